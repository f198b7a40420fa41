/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The daemon's state machine, free of any bus: staging, committing, cancelling
 * and the recovery that runs on every start. Every transition is persisted
 * (write_file_atomic) BEFORE it takes effect; docs/state-machine.md describes
 * the states, the records and the point of no return.
 *
 * bus.c owns a Context and turns its callbacks (ContextOps) into D-Bus signals
 * and the request to systemd; unit tests drive it directly.
 */

#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>

#include "kexec-backend.h"
#include "policy.h"
#include "update.h"

typedef struct Context Context;

typedef enum HookKind {
	HOOK_PRE_HANDOFF, /* before the handoff record; failing aborts the commit */
	HOOK_ROLLBACK,    /* after a failed or interrupted commit: give everything back */
	HOOK_POST_BOOT,   /* on the new kernel: restore what the pre-handoff steps saved */
	_HOOK_KIND_MAX,
} HookKind;

/* A step of the commit path (VM checkpoint/restore, probes, ...). Must be
 * idempotent: a crash between its end and the persisted "done" mark runs it
 * again after restart. On failure set *ret_reason (freed by the caller). */
typedef int (*HookFunc)(Context *c, Update *u, void *userdata, char **ret_reason);

/* One persisted action of a step: key names its "done" mark in the update record
 * ("<pre|rollback|post>:<key>", Update.hooks_done); records of earlier versions carry the
 * same keys, so they never change. */
typedef struct ContextHook {
	const char *key;
	HookFunc func;
} ContextHook;

typedef struct ContextOps {
	/* Starts the kexec reboot (THE POINT OF NO RETURN once accepted). Returns < 0 when
	 * the request could not be sent; otherwise the outcome arrives through
	 * context_handoff_result(), possibly before this returns. */
	int (*request_kexec)(Context *c, Update *u, void *userdata);
	/* Notifications for the bus: properties changed, update finished. */
	void (*update_changed)(Context *c, Update *u, void *userdata);
	void (*update_added)(Context *c, Update *u, void *userdata);
	/* u is pruned ([Reports] Keep=, context_retain()): still listed, freed right after. */
	void (*update_removed)(Context *c, Update *u, void *userdata);
	void (*manager_changed)(Context *c, void *userdata);
	void (*finished)(Context *c, Update *u, const char *result, void *userdata);
	/* The report of u was written to path (atomically): announce it. */
	void (*report_ready)(Context *c, Update *u, const char *path, void *userdata);
	/* Whether Cancel was asked for u's commit (before the point of no return): checked
	 * once the pre-handoff steps ended, before the handoff record; a commit that failed
	 * because of it ends "cancelled" rather than "failed". Optional. */
	bool (*cancel_requested)(Context *c, Update *u, void *userdata);
} ContextOps;

/* The commit preconditions (daemon/vm/vm-steps-check.c: VM inventory, policy_decide_vm(),
 * policy_check_commit()). Sets *ret_decisions (a JSON object, also on refusal) and
 * returns 1 when the commit may proceed, 0 when the policy refuses it (*ret_refusal:
 * the blocking reasons, one sentence), < 0 on error (*ret_refusal may say why). */
typedef int (*CommitCheck)(Context *c, Update *u, void *userdata, json_object **ret_decisions,
                           char **ret_refusal);

/*
 * The steps that plug into the commit path, in the order they run: this enum is the one
 * place that order is declared. Every callback of every step runs in it, whatever the order
 * of registration (context_add_step()).
 */
typedef enum ContextStepId {
	CONTEXT_STEP_KEXEC_IMAGE, /* the kernel still holds the staged image (context.c) */
	CONTEXT_STEP_MEASURE,     /* the probe is open before the first VM pauses (measure/) */
	CONTEXT_STEP_VMS,         /* the VMs: commit check, checkpoint, rollback, restore (vm/) */
	_CONTEXT_STEP_MAX,
} ContextStepId;

/*
 * One step: everything it plugs into the state machine, every member optional (NULL: the
 * step has nothing to do there). userdata is the step's own, given to context_add_step()
 * and handed back only to its own callbacks.
 */
typedef struct ContextStepVTable {
	const char *name; /* for the journal */
	/* [HOOK_PRE_HANDOFF]: before the handoff record, a failure rolls the commit back;
	 * [HOOK_ROLLBACK]: after a failed commit, every step's, even if one fails;
	 * [HOOK_POST_BOOT]: on the new kernel. */
	ContextHook hooks[_HOOK_KIND_MAX];
	/* The commit's preconditions (at most one step has them), see CommitCheck. */
	CommitCheck commit_check;
	/* Right before the handoff record is written: store what must survive the kexec
	 * (u->measure). */
	void (*handoff_prepare)(Context *c, Update *u, void *userdata);
	/* On the crash kernel, before the second kexec's handoff record: the old kernel's
	 * figures are on a clock that axis cannot relate, set them aside. */
	void (*panic_takeover)(Context *c, Update *u, void *userdata);
	/* Right before the kexec is requested (what it adds is persisted, best effort, with
	 * the "handoff-requested" phase). */
	void (*handoff_request)(Context *c, Update *u, void *userdata);
	/* Adds the step's sections to a report being built; a failure is logged. */
	int (*report_extend)(Context *c, Update *u, json_object *report, void *userdata);
} ContextStepVTable;

/* Test seam: called after every successful persist with a running step number.
 * Returning < 0 (e.g. -ECANCELED) makes the current operation stop right there,
 * as if the daemon died after the write. */
typedef int (*PersistHook)(Context *c, Update *u, unsigned step, void *userdata);

/* TEST ONLY (the lab's panic scenario, meson -Dtest-panic-hold=true): called once
 * the pre-handoff steps are done, before the handoff record is written. The
 * production daemon never sets it. */
typedef void (*HandoffHold)(Context *c, Update *u, void *userdata);

/* Told when the state the outside sees has settled: after a stage and after every
 * finished update (done, failed or cancelled; its report written), never inside the
 * commit path. upgraded.c refreshes the metrics textfile (daemon/metrics/) with it. */
typedef void (*ContextSettled)(Context *c, void *userdata);

typedef struct StageRequest {
	const char *kernel;
	const char *initrd;  /* "" or NULL: none */
	const char *cmdline; /* ignored with reuse_cmdline */
	bool reuse_cmdline;
} StageRequest;

/* backend NULL: the default, kexec_load with kexec_file as the fallback
 * (kexec_backend_select()). */
int context_new(const char *root, const KexecBackend *backend, Context **ret);
Context *context_free(Context *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(Context *, context_free);

/* Plugs step id in, once: -EEXIST when it is already, -EBUSY when vt has a commit check and
 * another step has one, -EINVAL for a hook without a key. vt must outlive c. */
int context_add_step(Context *c, ContextStepId id, const ContextStepVTable *vt, void *userdata);

/* Takes ownership of p: its [Paths] AllowedRoots= replace the default directories
 * and context_decide_handoff() asks it. */
int context_set_policy(Context *c, Policy *p);

/* Reads every record below state_dir/updates. Unreadable records are logged and
 * left on disk untouched (never overwritten). */
int context_load(Context *c);
/* Resolves records left in a non-terminal state by a crash, restart or kexec. */
int context_recover(Context *c);
/* Applies [Reports] Keep= now: the oldest finished updates beyond it lose their files and
 * leave memory, each announced through ops.update_removed first (context-retention.c).
 * On the event loop, once an update finished: a daemon that runs for long keeps Keep=
 * updates, not every one it saw. Never fails (a prune that fails is logged, and retried
 * at the next call). */
int context_retain(Context *c);

Update *context_find(Context *c, const char *id);
/* "" means the active update. Sets NoSuchUpdate / InvalidId. */
int context_lookup(Context *c, const char *id, Update **ret, sd_bus_error *error);

int context_stage(Context *c, const StageRequest *req, Update **ret, sd_bus_error *error);
/* context_stage() in three steps, so that a job does the reading off the event loop
 * (docs/architecture.md, "Jobs"):
 * 1. context_stage_prepare(), on the loop: the request validated and the files opened
 *    and judged (path, owner, mode, size limit, kernel header), no file read past the
 *    header; the new update's id chosen. Nothing changes.
 * 2. stage_plan_hash(): the digests; reads the files, touches no state (call it without
 *    the state lock); -ECANCELED, error unset, as soon as *cancel.
 * 3. context_stage_finish(), with the state lock: the record persisted, the image loaded
 *    (on a job's worker the lock is released while the backend reads the files), staged.
 *    -ECANCELED when *cancel was set before the update was announced: nothing is left. */
typedef struct StagePlan StagePlan;
int context_stage_prepare(Context *c, const StageRequest *req, StagePlan **ret,
                          sd_bus_error *error);
const char *stage_plan_id(const StagePlan *p);
int stage_plan_hash(StagePlan *p, const atomic_bool *cancel, sd_bus_error *error);
int context_stage_finish(Context *c, StagePlan *p, const atomic_bool *cancel, Update **ret,
                         sd_bus_error *error);
StagePlan *stage_plan_free(StagePlan *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(StagePlan *, stage_plan_free);
int context_commit_begin(Context *c, const char *id, Update **ret, sd_bus_error *error);
int context_commit_run(Context *c, Update *u);
void context_handoff_result(Context *c, Update *u, int r, const char *why);
int context_cancel(Context *c, const char *id, sd_bus_error *error);
/* The way out of an update stuck in committing in this boot (docs/reliability.md, "Stuck
 * updates"): no commit job runs it any more and the kexec is not under way (the caller
 * checked both). Rolled back like a failed commit (VMs given back, image unloaded), it ends
 * cancelled when ops.cancel_requested says so. -ESTALE when u is not such an update. */
int context_abort_stuck(Context *c, Update *u);
/* `upgradectl commit --dry-run`: the decisions a commit of id would take now
 * (handoff, per-VM strategies, preconditions) as JSON; changes nothing. */
int context_plan_commit(Context *c, const char *id, char **ret_json, sd_bus_error *error);
/* Persists u now (steps that must leave a record before they return, e.g. VM results)
 * and tells the bus that it changed. */
int context_save(Context *c, Update *u);
void context_notify(Context *c, Update *u);

/* THE policy seam: how the next kernel is handed over and why.
 * The policy library replaces the body; the backend limits what is possible. */
int context_decide_handoff(Context *c, Update *u, HandoffMode *ret_mode, char **ret_reason);

const char *context_state(Context *c);
int context_describe(Context *c, char **ret_json);
int context_get_report(Context *c, const char *id, char **ret_json, sd_bus_error *error);
int context_report_path(Context *c, const char *id, char **ret);
/* ---- accessors: Context is private to the state machine (context-private.h) ---- */

const char *context_root(const Context *c);     /* NULL for "/" */
const Policy *context_policy(const Context *c); /* NULL: built-in behaviour */
const KexecBackend *context_backend(const Context *c);
/* The backend's probe result (< 0: not usable here) and why it, or the fallback, was
 * chosen (NULL when the first choice works); *ret_fallback: kexec_file instead of kexec_load. */
int context_backend_status(const Context *c, const char **ret_reason, bool *ret_fallback);
const char *context_running_kernel(const Context *c);
const char *context_boot_id(const Context *c);
/* Started on the crash kernel of a panic image (docs/state-machine.md). */
bool context_on_panic_kernel(const Context *c);
/* Every loaded update, oldest first; *ret_n of them. */
Update *const *context_updates(const Context *c, size_t *ret_n);
/* The one update not in a terminal state, or NULL. */
Update *context_active(const Context *c);
const char *context_last_report(const Context *c);

/* TEST ONLY (upgraded --running-kernel/--boot-id with --root): what the host is. NULL
 * leaves a value as it is; boot_id is 32 hex digits. */
int context_set_host(Context *c, const char *running_kernel, const char *boot_id);
void context_set_ops(Context *c, const ContextOps *ops, void *userdata);
void context_set_persist_hook(Context *c, PersistHook hook, void *userdata);
void context_set_handoff_hold(Context *c, HandoffHold hold, void *userdata);
void context_set_settled(Context *c, ContextSettled settled, void *userdata);

/* Where stage saved the firmware memory map for update id (the panic path's
 * ordinary kexec out of the crash kernel places the staged kernel with it). */
int context_memmap_path(Context *c, const char *id, char **ret);
