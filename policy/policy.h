/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * libpolicy: decides how an update is handed over and how each VM is preserved,
 * and says why. A pure library: no exit(), no logging above debug, no D-Bus, and
 * no I/O in the decision functions. Only policy_load()/policy_check_config() read
 * files. Settings, defaults and rules are documented in docs/policy.md.
 *
 * How the daemon uses it
 *
 *   1. Load. At start and on reload:
 *
 *        Policy *p = NULL;
 *        PolicyErrors errs = {};
 *        r = policy_load(arg_root, &p, &errs);
 *        if (r < 0) {
 *                policy_errors_print(&errs, stderr);   // "file:line: message" lines
 *                policy_errors_done(&errs);
 *                // keep the previous policy; refuse to start when there is none
 *        }
 *
 *      No configuration at all (no upgraded.conf, no drop-ins) is valid and gives
 *      the built-in defaults. Any error in any file fails the whole load: the
 *      caller keeps its previous Policy.
 *
 *   2. `upgraded --check-config [--show]`:
 *        return policy_check_config(arg_root, show, stdout, stderr) == 0 ? 0 : 1;
 *      It prints one "FILE:LINE: message" line per error and a summary, and
 *      returns 0 when the configuration loads, a negative errno otherwise.
 *
 *   3. Decide. The daemon gathers facts (it does the I/O) and calls:
 *        policy_decide_handoff(p, &handoff_facts, &handoff)  for the planned image
 *            (never the crash image: the loader builds it verified and refuses
 *            to make it fast, daemon/kexec-loader.c);
 *        policy_decide_vm(p, &vm_facts, &vm)  for every libvirt domain;
 *        policy_check_commit(p, &commit_facts, &verdict)  with all VM decisions,
 *            free space, staged-kernel state and the current local time.
 *      A commit may proceed only if verdict.allowed is true. Every decision
 *      carries PolicyReasons.
 *
 *   4. Show. policy_reasons_to_json() / policy_*_to_json() for Describe() and the
 *      downtime report; policy_reasons_format() for `upgradectl commit --dry-run`
 *      and `upgradectl status` (policy_reasons_format_json() when the CLI has the
 *      JSON from D-Bus); policy_to_json() for the effective settings.
 *
 *   Staging: policy_path_allowed(p, resolved_path) before accepting a kernel or
 *   initrd; the Policy fields (checkpoint_dir, save_parallel,
 *   shutdown_timeout_usec, pause_timeout_usec) are read directly.
 *
 *   5. Free: policy_free(), policy_handoff_decision_done(), policy_vm_decision_done(),
 *      policy_verdict_done(), policy_errors_done(). All accept zeroed structs.
 *
 * Conventions: 0 on success, negative errno on failure; ret_* parameters are
 * written only on success (PolicyErrors is the exception: it collects errors on
 * failure). Zero-initialized fact structs describe "nothing is known": they never
 * lead to a fast handoff.
 */

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "handoff-mode.h"
#include "shutdown-mode.h"

/* ---------- settings ---------- */

typedef enum PolicyHandoffMode {
	POLICY_HANDOFF_MODE_VERIFIED, /* purgatory always checks every segment's SHA-256 */
	POLICY_HANDOFF_MODE_FAST,     /* like auto, but unmeasurable health facts only warn */
	POLICY_HANDOFF_MODE_AUTO,     /* fast only when every safety condition holds */
	_POLICY_HANDOFF_MODE_MAX,
} PolicyHandoffMode;

/* keep-ram: how the kept RAM is proven before a VM resumes on it (docs/vms.md). */
#define POLICY_KEEP_REPORTS_DEFAULT 100

typedef enum PolicyKeepRamDigest {
	POLICY_KEEP_RAM_DIGEST_MARK,    /* the generation mark alone */
	POLICY_KEEP_RAM_DIGEST_SAMPLED, /* + SHA-256 of 1/64 of the RAM */
	POLICY_KEEP_RAM_DIGEST_FULL,    /* + SHA-256 of all of it */
	_POLICY_KEEP_RAM_DIGEST_MAX,
} PolicyKeepRamDigest;

typedef enum PolicyVmStrategy {
	POLICY_VM_CHECKPOINT, /* save state to CheckpointDir (libvirt managed save), restore after */
	POLICY_VM_KEEP_RAM,   /* device state saved, RAM kept in place on memory that survives
	                         the kexec (persistent memory + DAX): memory_preserved */
	POLICY_VM_SHUTDOWN,   /* clean guest shutdown, start again after the update */
	POLICY_VM_IGNORE,     /* leave alone: the VM dies with the old kernel */
	_POLICY_VM_STRATEGY_MAX,
} PolicyVmStrategy;

/* [VMRule:NAME] sections: every given condition must hold; the first matching rule
 * (in order of first appearance across the files) sets the strategy. */
typedef struct PolicyVmRule {
	char *name;
	char **name_globs;     /* Name=: any glob matches (fnmatch); NULL = no condition */
	char **metadata;       /* Metadata=KEY=VALUE: every pair must be present */
	uint64_t memory_above; /* MemoryAbove=: memory > this; UINT64_MAX = no condition */
	uint64_t memory_below; /* MemoryBelow=: memory < this; UINT64_MAX = no condition */
	PolicyVmStrategy strategy;
	bool have_strategy;
	char *file; /* where the rule was first defined, for messages */
	unsigned line;
} PolicyVmRule;

/* A time window "DAYS HH:MM-HH:MM"; end <= start wraps past midnight and belongs
 * to the day it started. */
typedef struct PolicyWindow {
	bool set;       /* false: commits are allowed at any time */
	uint8_t days;   /* bit 0 = Sunday ... bit 6 = Saturday */
	unsigned start; /* minutes since midnight */
	unsigned end;   /* minutes since midnight, exclusive; 1440 for "24:00" */
} PolicyWindow;

/* The loaded configuration. Read its fields; do not modify them. */
typedef struct Policy {
	/* [Handoff] */
	PolicyHandoffMode mode;
	bool allow_fast;
	uint64_t allow_taint;      /* taint bits that do not block a fast handoff */
	ShutdownMode shutdown;     /* Shutdown=: the old kernel's stop the policy asks for */
	bool kdump_initrd_at_boot; /* KdumpInitrd=boot: kdump-tools builds it on the first boot */

	/* [Paths] */
	char **allowed_roots; /* kernels/initrds may only be staged from below these */

	/* [Commit] */
	PolicyWindow window;
	uint64_t max_vms;       /* UINT64_MAX = unlimited */
	uint64_t max_vm_memory; /* bytes, total over preserved VMs; UINT64_MAX = unlimited */
	char *checkpoint_dir;
	bool margin_is_percent;
	uint64_t free_space_margin; /* percent of the checkpoint total, or bytes */

	/* [VM] */
	PolicyVmStrategy default_strategy;
	uint64_t shutdown_timeout_usec;
	uint64_t pause_timeout_usec; /* a VM's pause failing after it: commit rolled back */
	unsigned save_parallel;
	PolicyKeepRamDigest keep_ram_digest;
	bool keep_ram_fallback;   /* a VM that cannot keep its RAM is checkpointed instead */
	char *memory_backing_dir; /* NULL: libvirt's qemu.conf memory_backing_dir */
	bool sync_guest_clock;    /* after the restore, set each guest's clock (guest agent) */

	/* [Metrics] */
	char *metrics_dir; /* node_exporter's textfile directory (daemon/metrics/) */

	/* [Reports] */
	uint64_t keep_reports; /* finished updates whose record and report stay; UINT64_MAX: all */

	/* [Restore] */
	char **defer_until_restored; /* units (globs) held back on the boot after a handoff */

	PolicyVmRule *rules;
	size_t n_rules;

	/* Where each setting came from, for policy_show() (policy-config.c); NULL: all defaults. */
	struct PolicyOrigins *origins;
} Policy;

/* The effective settings as JSON, for Describe() and `upgradectl status`:
 * {"handoff":{"mode":..,"allow_fast":..,"allow_taint":"..","shutdown":..},"paths":{...},
 *  "commit":{...},"vm":{...},"rules":[{"name":..,...}]}; "infinity" for no limit. */
int policy_to_json(const Policy *p, json_object **ret);

/* True when path (absolute, normalized; the caller resolves symlinks first, e.g.
 * with realpath()) is one of [Paths] AllowedRoots= or below one of them. For
 * `upgradectl stage`: anything else is refused. */
bool policy_path_allowed(const Policy *p, const char *path);

/* Whether s may stand in [Restore] DeferUntilRestored=: a unit name or glob of
 * letters, digits, ":_.-@\\" and the glob characters "*?[]", at most 255 bytes,
 * ending in .timer, .service, .path or .socket (the unit types that can wait for
 * the restore without holding up the boot's own targets). */
bool policy_unit_pattern_valid(const char *s);

/* ---------- configuration errors ---------- */

typedef struct PolicyError {
	char *file;    /* path as read (including the root prefix) */
	unsigned line; /* 1-based; 0 when the error concerns the whole file */
	char *message;
} PolicyError;

typedef struct PolicyErrors {
	PolicyError *items;
	size_t n;
} PolicyErrors;

void policy_errors_done(PolicyErrors *e);
/* Prints "FILE:LINE: message\n" for each error. */
void policy_errors_print(const PolicyErrors *e, FILE *out);

/* ---------- loading ---------- */

/* The built-in defaults (what an absent configuration means). */
int policy_new_default(Policy **ret);
void policy_free(Policy *p);
static inline void policy_freep(Policy **p) {
	policy_free(*p);
	*p = NULL;
}

/*
 * Reads ROOT/etc/upgraded/upgraded.conf, then ROOT/etc/upgraded/upgraded.conf.d/\*.conf
 * in lexical (byte) order; later assignments override earlier ones, list settings
 * append (an empty assignment clears them). Missing files and directories are
 * fine. root NULL, "" or "/" means the real root.
 *
 * Returns 0 and a new Policy in *ret; -EBADMSG when any file has errors (each one
 * appended to ret_errors with file:line, if ret_errors is not NULL); another
 * negative errno when a file exists but cannot be read (also in ret_errors).
 * *ret is not touched on failure.
 */
int policy_load(const char *root, Policy **ret, PolicyErrors *ret_errors);

/*
 * For `upgraded --check-config`: loads like policy_load(), prints every error as
 * "FILE:LINE: message" to out, then "configuration OK" or "N error(s)"; with show, the
 * settings in effect first (policy_show()). A configuration directory ROOT/etc/upgraded
 * that does not exist is valid (the built-in defaults), but is warned about on err (out
 * when NULL): it may be a mistyped --root=.
 * Returns 0 when the configuration is valid, otherwise what policy_load() returned.
 */
int policy_check_config(const char *root, bool show, FILE *out, FILE *err);

/*
 * For `upgraded --check-config --show`: every section and key in effect (defaults for what
 * no file sets, each [VMRule:NAME] with its keys) as KEY=VALUE lines in the files' syntax
 * (a list shows its whole value, defaults included), each followed by "# " and where it
 * came from: "default", or FILE:LINE of the assignment that set it (a list appended to
 * by several lines names each of them). A header names the files read, in order.
 */
int policy_show(const Policy *p, FILE *out);

/* Where the setting KEY of section ("VMRule:NAME" for a rule) came from, as policy_show()
 * prints it: "default" when no file set it, "FILE:LINE", or several joined with ", " for
 * a list. The string belongs to p; NULL only for NULL arguments. */
const char *policy_origin(const Policy *p, const char *section, const char *key);

/*
 * Applies one file's content (data, size; need not be NUL-terminated) on top of p,
 * naming it `file` in errors. Errors are appended to errors; returns -EBADMSG if
 * there were any, -ENOMEM on allocation failure. policy_finish() must follow the
 * last file: it checks what only the whole configuration can tell (e.g. a rule
 * without a Strategy=).
 */
int policy_parse_buffer(Policy *p, const char *file, const char *data, size_t size,
                        PolicyErrors *errors);
int policy_finish(Policy *p, PolicyErrors *errors);

/* ---------- reasons ---------- */

typedef enum PolicyReasonSeverity {
	POLICY_REASON_INFO,     /* explains the choice */
	POLICY_REASON_WARNING,  /* a risk the configuration accepted */
	POLICY_REASON_BLOCKING, /* made the decision conservative, or refused it */
	_POLICY_REASON_SEVERITY_MAX,
} PolicyReasonSeverity;

typedef struct PolicyReason {
	const char *code; /* stable, machine-readable: "taint", "mce-errors", ... */
	PolicyReasonSeverity severity;
	char *text; /* one human sentence */
} PolicyReason;

typedef struct PolicyReasons {
	PolicyReason *items;
	size_t n;
} PolicyReasons;

void policy_reasons_done(PolicyReasons *r);
bool policy_reasons_has(const PolicyReasons *r, const char *code);
/* [{"code":..., "severity":"info|warning|blocking", "text":...}, ...] */
int policy_reasons_to_json(const PolicyReasons *r, json_object **ret);
/* One line per reason: "<prefix><severity>: <code>: <text>\n". */
int policy_reasons_format(const PolicyReasons *r, const char *prefix, FILE *out);
/* The same lines from the JSON array policy_reasons_to_json() made, e.g. as
 * received over D-Bus by upgradectl. -EBADMSG if it is not such an array. */
int policy_reasons_format_json(json_object *reasons, const char *prefix, FILE *out);

/* ---------- handoff ---------- */

typedef struct HandoffFacts {
	bool digests_at_stage;     /* segment digests were computed when the update was staged */
	bool files_unchanged;      /* kernel/initrd still match those digests (re-checked) */
	bool memory_map_unchanged; /* no memory hotplug/map change since the segments were placed */
	const char *architecture;  /* "x86_64", "arm64"; NULL: not named */
	bool have_mce;             /* mce_errors is valid */
	uint64_t mce_errors;       /* hardware errors since boot (x86_64: machine checks) */
	const char *mce_unknown;   /* !have_mce: why (static string), or NULL */
	bool have_edac;            /* edac_errors is valid */
	uint64_t edac_errors;      /* EDAC corrected + uncorrected memory errors since boot */
	const char *edac_unknown;  /* !have_edac: why (static string), or NULL */
	bool iommu_enabled;        /* the IOMMU translates every device's DMA (not passthrough) */
	bool have_taint;           /* taint is valid */
	uint64_t taint;            /* /proc/sys/kernel/tainted */
} HandoffFacts;

typedef struct HandoffDecision {
	HandoffMode handoff;    /* the outcome (common/handoff-mode.h) */
	PolicyHandoffMode mode; /* the configured mode it was decided under */
	PolicyReasons reasons;
} HandoffDecision;

int policy_decide_handoff(const Policy *p, const HandoffFacts *facts, HandoffDecision *ret);
void policy_handoff_decision_done(HandoffDecision *d);
int policy_handoff_decision_to_json(const HandoffDecision *d, json_object **ret);

/* ---------- VMs ---------- */

typedef struct PolicyMetadata {
	const char *key;
	const char *value;
} PolicyMetadata;

typedef struct VmFacts {
	const char *name;
	uint64_t memory_bytes; /* current guest memory */
	bool has_hostdev;      /* a passed-through host device (PCI/USB/mdev) */
	bool persistent;       /* defined domain (a transient one vanishes on shutdown) */
	bool memory_preserved; /* this VM's RAM is on memory that survives the kexec (keep-ram) */
	/* the domain's upgraded metadata: children of <metadata> in the XML namespace
	 * urn:upgraded:policy:1, element name = key, text = value (docs/policy.md) */
	const PolicyMetadata *metadata;
	size_t n_metadata;
} VmFacts;

typedef struct VmDecision {
	char *name;
	PolicyVmStrategy strategy; /* what the rules chose */
	bool refused;              /* strategy cannot be applied to this VM: commit is refused */
	char *rule;                /* matching [VMRule:NAME], NULL = [VM] DefaultStrategy= */
	uint64_t memory_bytes;     /* copied from the facts, for policy_check_commit() */
	PolicyReasons reasons;
} VmDecision;

int policy_decide_vm(const Policy *p, const VmFacts *facts, VmDecision *ret);
void policy_vm_decision_done(VmDecision *d);
int policy_vm_decision_to_json(const VmDecision *d, json_object **ret);

/* ---------- commit preconditions ---------- */

typedef struct CommitFacts {
	const VmDecision *vms; /* policy_decide_vm() result for every domain */
	size_t n_vms;
	bool have_free_space;
	uint64_t checkpoint_free_bytes; /* free bytes on the file system of CheckpointDir */
	bool staged;                    /* an update is staged */
	bool kernel_loaded;             /* /sys/kernel/kexec_loaded is 1 */
	bool staged_unchanged; /* the staged files are those stage validated (same inode, size, mtime, ctime) */
	bool have_time;
	struct tm now; /* local time (tm_wday, tm_hour, tm_min are used) */
} CommitFacts;

typedef struct PolicyVerdict {
	bool allowed;
	uint64_t checkpoint_bytes; /* estimated need (sum of memory of checkpointed VMs) */
	uint64_t required_bytes;   /* with the margin */
	PolicyReasons reasons;
} PolicyVerdict;

int policy_check_commit(const Policy *p, const CommitFacts *facts, PolicyVerdict *ret);
void policy_verdict_done(PolicyVerdict *v);
int policy_verdict_to_json(const PolicyVerdict *v, json_object **ret);

/* ---------- names ---------- */

const char *policy_handoff_mode_to_string(PolicyHandoffMode m);
int policy_handoff_mode_from_string(const char *s); /* -1 if unknown */
const char *policy_keep_ram_digest_to_string(PolicyKeepRamDigest d);
int policy_keep_ram_digest_from_string(const char *s); /* -1 if unknown */
const char *policy_vm_strategy_to_string(PolicyVmStrategy s);
int policy_vm_strategy_from_string(const char *s); /* -1 if unknown */
const char *policy_reason_severity_to_string(PolicyReasonSeverity s);
