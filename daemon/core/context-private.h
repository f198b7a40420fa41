/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The state machine's own view of a Context: its definition and the steps its
 * files share. Included only by daemon/core/context*.c (and, through
 * tests/context-test-util.h, by unit tests); everyone else goes through
 * context.h's accessors. The files, by concern:
 *   context.c          constructor, hooks, lookups, Describe()
 *   context-records.c  paths, persisting, transitions, loading the records, the report
 *   context-stage.c    staging
 *   context-crash.c    the crash image a staged update loads, and giving kdump its slot back
 *   context-decide.c   the commit decision: handoff mode, preconditions, PlanCommit()
 *   context-commit.c   the commit run, the hooks, the handoff, cancel
 *   context-recover.c  recovery on every start
 *   context-panic.c    the panic path on the crash kernel
 *   context-leftovers.c removing the temporary files an interrupted write left
 *   context-retention.c pruning the records and reports of old finished updates
 */

#include <json-c/json.h>

#include "context.h"
#include "image.h"
#include "platform.h"

#define RECORD_MAX     (1u << 20) /* an update record or a report */
#define KDUMP_CONFIG   "/usr/sbin/kdump-config"
#define SYSTEMCTL_PATH "/usr/bin/systemctl"

/* A step plugged in (context_add_step()); vt NULL: not plugged in. */
typedef struct ContextStep {
	const ContextStepVTable *vt;
	void *userdata;
} ContextStep;

/* Every plugged-in step of c, in the order of ContextStepId. */
#define CONTEXT_FOREACH_STEP(s, c)                                                       \
	for (const ContextStep *s = (c)->steps; s < (c)->steps + _CONTEXT_STEP_MAX; s++) \
		if (!s->vt) {                                                            \
		} else

struct Context {
	char *root;      /* NULL for "/" */
	Policy *policy;  /* NULL: built-in behaviour (unit tests); owned */
	char *state_dir; /* <root>/var/lib/upgraded */
	char **allowed_roots;
	uid_t image_owner;

	const KexecBackend *backend;
	int backend_status;     /* 0 usable, < 0 errno from probe */
	char *backend_reason;   /* why not usable, or why the default was not chosen */
	bool backend_fallback;  /* kexec_file because kexec_load cannot be used here */
	PlatformFacts platform; /* firmware, Secure Boot, lockdown: read at start */

	char *running_kernel; /* uname -r */
	char boot_id[33];
	/* Started on the crash kernel of a panic image (CMDLINE_PANIC_MARK on
	 * <root>/proc/cmdline): recovery takes over the interrupted update with an
	 * ordinary kexec and touches no VM (docs/state-machine.md). */
	bool panic_kernel;

	Update **updates;
	size_t n_updates;
	Update *active; /* the one update not in a terminal state, or NULL */
	char *last_report;

	ContextStep steps[_CONTEXT_STEP_MAX]; /* in the order they run */

	ContextOps ops;
	void *ops_userdata;

	PersistHook persist_hook;
	void *persist_hook_userdata;
	unsigned persist_step;

	/* The journal flush before a fast shutdown (handoff-shutdown.h); NULL: journal_sync().
	 * A seam for unit tests. */
	int (*journal_sync)(const char *root, char **ret_why);

	HandoffHold handoff_hold;
	void *handoff_hold_userdata;

	ContextSettled settled;
	void *settled_userdata;
};

/* ---- records (context-records.c) ---- */
int context_add_update(Context *c, Update *u);

int context_record_path(Context *c, const char *id, char **ret);
/* Drops the oldest finished updates beyond [Reports] Keep=, files and memory
 * (context-retention.c); called by context_load() once the records are sorted. */
int context_prune(Context *c);

/* Removes the regular files "<id>.json.tmpXXXXXX" an interrupted write left in the state
 * directory's sub (updates, reports), each logged; nothing when sub is not a directory of
 * ours alone. Returns how many went. */
int context_remove_leftovers(Context *c, const char *sub);

int context_save_memmap(Context *c, Update *u);

int context_persist(Context *c, Update *u);

void context_notify_update(Context *c, Update *u);

int context_transition(Context *c, Update *u, UpdateState state, const char *phase,
                       unsigned progress);
/* context_transition() that also appends the phase stamp `stamp` (NULL: none); a
 * transition that could not be persisted leaves no stamp behind (the history says only
 * what reached the disk). */
int context_transition_stamped(Context *c, Update *u, const char *stamp, bool with_tsc,
                               UpdateState state, const char *phase, unsigned progress);
/* The same with the string *field set to a copy of value (NULL: cleared) first; restored
 * when the transition could not be persisted. field NULL: nothing set. */
int context_transition_setting(Context *c, Update *u, char **field, const char *value,
                               const char *stamp, bool with_tsc, UpdateState state,
                               const char *phase, unsigned progress);

int context_write_report(Context *c, Update *u);

int context_finish(Context *c, Update *u, const char *result);

int context_mark_failed(Context *c, Update *u, const char *why);

/* The normal image of u to load from its opened files k and i: verified, as stage
 * builds it (the commit may switch the mode later). */
KexecImage context_staged_image(const Update *u, const ImageFile *k, const ImageFile *i);

int context_open_staged_files(Context *c, Update *u, ImageFile *k, ImageFile *i, char **ret_why);

/* context-crash.c: upgraded's crash image, which replaces kdump's while an update holds it.
 * Load it (marked for kdump-tools' stop, see units/kdump-tools.service.d), say who had the
 * slot before, and give the slot back: unload ours, then run the previous owner's loader. */
int context_load_crash_image(Context *c, Update *u, KexecImage *img);
const char *context_crash_image_owner(Context *c);
void context_give_back_crash_image(Context *c, Update *u);

/* context-kdump.c: kdump's initrd for the staged kernel, built at stage (a job) rather than
 * on the new kernel's first boot, before basic.target. The record's kdump_initrd says how. */
bool context_kdump_version_valid(const char *v);
int context_kdump_initrd_current(Context *c, const char *version);
void context_prepare_kdump(Context *c, Update *u);

/* "<kind>:<key>", the mark of a finished hook in Update.hooks_done. */
int context_hook_key(HookKind kind, const char *key, char **ret);
/* The step with the commit's preconditions, or NULL. */
const ContextStep *context_commit_check_step(const Context *c);

int context_commit_fail(Context *c, Update *u, const char *reason);

int context_complete(Context *c, Update *u);

int context_handoff(Context *c, Update *u, const char *stamp);

int context_panic_fail(Context *c, Update *u, const char *reason);

int context_recover_panic(Context *c, Update *u);

int context_decide_commit(Context *c, const char *id, Update **ret_update, HandoffMode *ret_mode,
                          char **ret_why, json_object **ret_decisions, char **ret_refusal,
                          sd_bus_error *error);

/* Kept memory (context-kept.c, daemon/pmem): the facts for u's command line as
 * JSON with the policy's named reasons; added: memmap= words stage carried. */
int context_kept_memory(Context *c, const Update *u, const char *added, json_object **ret);
/* Gathers them again into u->kept_memory (commit); on failure the old ones stay. */
void context_kept_memory_refresh(Context *c, Update *u);
/* A persistent-memory region of the running kernel stays one on the next: the
 * memmap= words of running (/proc/cmdline) that *cmdline lacks are appended,
 * because without them the new kernel uses the region as RAM and what lives
 * there (VM RAM, the filesystem holding it) is lost (docs/vms.md). *ret_added:
 * the words, NULL when none. */
int context_carry_memmap(const char *running, char **cmdline, char **ret_added,
                         sd_bus_error *error);
