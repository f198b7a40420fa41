/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * VM state preservation across a kernel handoff, through libvirt's C API.
 *
 * How the daemon uses it:
 *
 *   stage    vm_inventory()          facts for the policy: every domain, its state, size and
 *                                    whether a managed save is possible (and why not).
 *   commit   vm_checkpoint_all()     with the strategy the policy chose per VM: pauses ALL
 *                                    selected VMs first (the blackout starts together), then
 *                                    saves them concurrently (libvirt managed save), at most
 *                                    plan->parallel at a time, each with a timeout. When any
 *                                    VM fails it rolls everything back itself before returning
 *                                    the error: every VM is back in its original state.
 *            vm_results_to_json()    goes into the handoff record.
 *            vm_rollback()           when a later step before the point of no return fails
 *                                    (handoff record, kexec load...), undoes a successful
 *                                    vm_checkpoint_all(): restores saved VMs from their images,
 *                                    resumes paused ones, starts shut down ones, removes images.
 *            ---- point of no return: the reboot request. No vm_* call after it. ----
 *   boot     vm_results_from_json()  reads the handoff record back.
 *            vm_restore_all()        restores every checkpointed VM concurrently, resumes it,
 *                                    records restore time, resumed_at and downtime. A VM that
 *                                    fails keeps its managed save image for a manual retry.
 *   verb     vm_restore_one()        `upgradectl restore-vm NAME`: the manual retry.
 *
 * Threads: the orchestration calls block their caller. Saves, shutdowns and restores run on
 * worker threads, each with its own connection to the URI of the connection passed in; the
 * progress callback is only ever invoked on the caller's thread, so it may touch sd-bus.
 *
 * Times: *_at fields are wall clock (CLOCK_REALTIME) microseconds since the epoch, the only
 * clock both kernels share; durations (save_time, restore_time) are CLOCK_MONOTONIC
 * microseconds within one kernel; downtime = resumed_at - paused_at (wall clock, so its
 * uncertainty is the wall clock's step across the handoff). 0 means "did not happen".
 *
 * Errors: functions return 0 or a negative errno; the per-VM reason is in VmResult.error.
 * libvirt prints every error to stderr unless the process installs its own handler with
 * virSetErrorFunc() (the daemon should, and log them); this module never changes it.
 *
 * Blocking: vm_checkpoint_all() takes about as long as the slowest save (bounded by the save
 * timeout), vm_restore_all() as the slowest restore; the daemon calls them from a job's worker
 * thread (daemon/core/job.h), never from its event loop. Every libvirt call is bounded
 * (vm_connect(), keepalive; see vm-connect.c).
 */

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libvirt/libvirt.h>

#include <json-c/json.h>

typedef uint64_t usec_t;

typedef enum VmStrategy {
	VM_STRATEGY_CHECKPOINT, /* pause, managed save, restore + resume on the new kernel */
	VM_STRATEGY_KEEP_RAM,   /* pause, managed save of the device state only, the RAM kept in
	                           place (keep-ram.h); restore on that RAM */
	VM_STRATEGY_SHUTDOWN,   /* graceful shutdown with timeout; started again afterwards */
	VM_STRATEGY_IGNORE,     /* left alone */
	_VM_STRATEGY_MAX,
	_VM_STRATEGY_INVALID = -22, /* -EINVAL */
} VmStrategy;

const char *vm_strategy_to_string(VmStrategy s);
VmStrategy vm_strategy_from_string(const char *s);

typedef enum VmOutcome {
	VM_OUTCOME_PENDING, /* nothing done yet */
	VM_OUTCOME_PAUSED,  /* paused (pause strategy, or checkpoint before its save) */
	VM_OUTCOME_SAVING,  /* managed save running */
	VM_OUTCOME_SAVED,   /* managed save image written, domain shut off */
	VM_OUTCOME_SHUTTING_DOWN,
	VM_OUTCOME_SHUT_DOWN,
	VM_OUTCOME_IGNORED,     /* strategy ignore, or not running: nothing to preserve */
	VM_OUTCOME_ROLLED_BACK, /* back in its original state after a rollback */
	VM_OUTCOME_RESTORING,
	VM_OUTCOME_RESUMED,  /* running again after the handoff */
	VM_OUTCOME_RESTORED, /* restored and left paused, as it was before the commit */
	VM_OUTCOME_FAILED,   /* see error; a checkpoint image, if any, is kept on disk */
	_VM_OUTCOME_MAX,
	_VM_OUTCOME_INVALID = -22,
} VmOutcome;

const char *vm_outcome_to_string(VmOutcome o);
VmOutcome vm_outcome_from_string(const char *s);

/* One domain as seen by vm_inventory(). */
typedef struct VmInfo {
	char *name;
	char uuid[VIR_UUID_STRING_BUFLEN];
	int state; /* virDomainState */
	bool active;
	bool persistent;
	bool autostart;
	bool has_managed_save; /* an image exists already */
	uint64_t memory_kib;   /* current memory */
	unsigned vcpus;
	/* Whether a managed save can preserve it; when not, blocker says why (e.g. "transient
	 * domain", "host device passed through (<hostdev>)"). */
	bool checkpoint_possible;
	char *checkpoint_blocker;
} VmInfo;

typedef struct VmList {
	VmInfo *vms;
	size_t n;
} VmList;

void vm_list_free(VmList *l);
static inline void vm_list_freep(VmList **l) {
	vm_list_free(*l);
}

/* Lists every domain on conn, persistent or transient, active or not. */
int vm_inventory(virConnectPtr conn, VmList **ret_list);
const VmInfo *vm_list_find(const VmList *l, const char *name);
struct json_object *vm_list_to_json(const VmList *l);

/*
 * The moments a measurement wants to stamp exactly (daemon/measure/measure.h): unlike the progress
 * callback, called synchronously at the moment itself, on the thread doing the step (the
 * caller's for pauses, a worker's for restores and resumes), so it must be thread-safe and
 * quick. It cannot fail a step.
 */
typedef enum VmEvent {
	VM_EVENT_PAUSING,  /* right before virDomainSuspend */
	VM_EVENT_PAUSED,   /* virDomainSuspend returned */
	VM_EVENT_RESTORED, /* the domain is active again (restored from its image, paused where
	                      the driver supports it, or started again after the shutdown
	                      strategy): its QEMU process exists */
	VM_EVENT_RESUMING, /* right before the domain is resumed after the handoff */
	VM_EVENT_RESUMED,  /* virDomainResume returned: the VM runs again */
	_VM_EVENT_MAX,
} VmEvent;

const char *vm_event_to_string(VmEvent e);

struct VmResult;
typedef void (*VmEventCb)(const struct VmResult *r, VmEvent e, void *userdata);

struct KeepRamConfig; /* keep-ram.h */
struct KeptRam;

/* The policy's decision for one VM, and the knobs of one run. */
typedef struct VmPlanEntry {
	const char *name;
	VmStrategy strategy;
} VmPlanEntry;

typedef struct VmPlan {
	const VmPlanEntry *entries;
	size_t n_entries;
	unsigned parallel;            /* concurrent saves/restores; 0 = VM_PARALLEL_DEFAULT */
	usec_t pause_timeout_usec;    /* per VM; 0 = VM_PAUSE_TIMEOUT_DEFAULT */
	usec_t save_timeout_usec;     /* per VM; 0 = VM_SAVE_TIMEOUT_DEFAULT */
	usec_t shutdown_timeout_usec; /* per VM; 0 = VM_SHUTDOWN_TIMEOUT_DEFAULT */
	usec_t restore_timeout_usec;  /* per VM; 0 = VM_RESTORE_TIMEOUT_DEFAULT */
	bool no_bypass_cache;         /* do not ask for VIR_DOMAIN_SAVE_BYPASS_CACHE */
	const char *save_dir;         /* where managed save images live, for saved_bytes;
	                                  NULL = VM_SAVE_DIR_DEFAULT */
	const struct KeepRamConfig *keep_ram; /* VM_STRATEGY_KEEP_RAM's settings; NULL = defaults */
	VmEventCb on_event;                   /* optional, see VmEvent */
	void *event_userdata;
	/* Set (by another thread) to stop the commit: checked before each pause and while the
	 * saves run; running saves are aborted (virDomainAbortJob) and everything is rolled
	 * back; vm_checkpoint_all() then returns -EINTR. NULL: never. */
	const atomic_bool *cancel;
	/* Optional, on the caller's thread, about twice a second while saves or restores run:
	 * bytes done and total of one VM's transfer (virDomainGetJobStats(); total 0 when
	 * unknown). */
	void (*on_bytes)(const char *name, uint64_t done, uint64_t total, void *userdata);

	/* Restore: set the guests' clocks again (vm_sync_clocks()) unless no_clock_sync, each
	 * waiting for its guest agent's answer at most clock_sync_timeout_usec (whole seconds;
	 * 0 = VM_CLOCK_SYNC_TIMEOUT_DEFAULT). */
	bool no_clock_sync;
	usec_t clock_sync_timeout_usec;
} VmPlan;

#define VM_PARALLEL_DEFAULT         4u
#define VM_PAUSE_TIMEOUT_DEFAULT    (10ULL * 1000000ULL)
#define VM_SAVE_TIMEOUT_DEFAULT     (120ULL * 1000000ULL)
#define VM_CONNECT_RETRY_DEFAULT    (30ULL * 1000000ULL)
#define VM_SHUTDOWN_TIMEOUT_DEFAULT (60ULL * 1000000ULL)
#define VM_RESTORE_TIMEOUT_DEFAULT  (120ULL * 1000000ULL)
#define VM_SAVE_DIR_DEFAULT         "/var/lib/libvirt/qemu/save"
#define VM_CALL_TIMEOUT_DEFAULT     (15ULL * 1000000ULL)
/* How long the restore on the new kernel (and a rollback) waits for libvirt to answer at all:
 * libvirtd says READY=1 before its QEMU driver answers, and a rollback may run beside a
 * libvirtd still starting. Five minutes covers libvirtd's whole default start timeout (90 s)
 * under load, three times over. */
#define VM_LIBVIRT_WAIT_DEFAULT     (300ULL * 1000000ULL)

#define VM_CLOCK_SYNC_TIMEOUT_DEFAULT (5ULL * 1000000ULL)

/* Whether a restored guest's clock was set again (vm_sync_clocks()). */
typedef enum VmClockSync {
	VM_CLOCK_SYNC_NONE,   /* not tried: not restored (yet), or a record from before */
	VM_CLOCK_SYNC_DONE,   /* set to the host's wall clock through the guest agent */
	VM_CLOCK_SYNC_FAILED, /* not set: clock_sync_reason says why */
} VmClockSync;

/* Per-VM record, carried through the handoff (see vm_results_to_json()). */
typedef struct VmResult {
	char *name;
	char uuid[VIR_UUID_STRING_BUFLEN];
	VmStrategy strategy;
	VmOutcome outcome;
	int orig_state; /* virDomainState before commit */
	usec_t paused_at;
	usec_t save_started_at, save_finished_at;
	int64_t saved_bytes; /* -1 when unknown (remote URI, test driver) */
	usec_t save_time;    /* monotonic duration of the managed save */
	usec_t restore_started_at;
	usec_t restore_time;
	usec_t resumed_at;
	char *error;              /* why it failed or was rolled back; NULL otherwise */
	struct KeptRam *kept_ram; /* keep-ram: the kept file, or why the VM fell back */

	/* The guest's clock after the restore (vm_sync_clocks()). */
	VmClockSync clock_sync;
	usec_t clock_synced_at;  /* wall clock handed to the guest */
	usec_t clock_sync_time;  /* monotonic duration of the agent calls */
	int64_t clock_behind;    /* host minus guest wall clock before, µs (< 0: ahead) */
	bool clock_behind_known; /* the guest's clock was read */
	char *clock_sync_reason; /* why the clock was not set */
} VmResult;

typedef struct VmResults {
	VmResult *items;
	size_t n;
} VmResults;

void vm_results_free(VmResults *r);
static inline void vm_results_freep(VmResults **r) {
	vm_results_free(*r);
}
const VmResult *vm_results_find(const VmResults *r, const char *name);
/* downtime = resumed_at - paused_at, 0 when either is missing. */
usec_t vm_result_downtime(const VmResult *r);

/* The report's "vms" array: one object per VM with name, uuid, strategy, result, paused_at,
 * saved_bytes, save_time, restore_time, resumed_at, downtime, error (null when n/a), and once
 * the restore tried, clock_sync {synced, synced_at, sync_time, behind, reason}.
 * vm_results_from_json() reads it back (the handoff record), -EBADMSG on malformed input. */
struct json_object *vm_results_to_json(const VmResults *r);
int vm_results_from_json(struct json_object *j, VmResults **ret_results);

/* Called on the caller's thread whenever a VM's outcome changes. */
typedef void (*VmProgressCb)(const VmResult *r, void *userdata);

/*
 * Commit path, before the point of no return. Validates the whole plan first (every named
 * domain exists, checkpoint only where possible, no duplicates): -EINVAL/-ENOENT and nothing
 * touched. Then pauses every running VM with strategy checkpoint or pause, starts graceful
 * shutdowns, saves the checkpoint VMs concurrently. Domains that are not active are recorded
 * as ignored. On any failure it rolls back (see vm_rollback()) and returns the first error;
 * *ret_results then holds the reason for every VM: unlike other output parameters it is set
 * on failure too (the caller frees it).
 *
 * A pause that does not complete within plan->pause_timeout_usec (a QEMU that does not answer
 * its monitor blocks libvirt's call without a bound) fails the commit with -ETIMEDOUT and
 * rolls the others back; the pending call is abandoned, and if it completes later the domain
 * is resumed right away by the thread that waited for it.
 */
int vm_checkpoint_all(virConnectPtr conn, const VmPlan *plan, VmProgressCb cb, void *userdata,
                      VmResults **ret_results);

/*
 * Undoes vm_checkpoint_all() (only before the point of no return): checkpointed VMs are
 * restored from their image (or resumed if their save never completed), paused ones resumed,
 * shut down ones started again; originally paused VMs stay paused. Images no longer needed are
 * removed; an image whose restore fails is KEPT. reason is recorded for every VM touched.
 * Returns 0 when every VM is back in its original state, else the first error.
 */
int vm_rollback(virConnectPtr conn, VmResults *results, const char *reason, VmProgressCb cb,
                void *userdata);

/*
 * Boot path, on the new kernel: restores every VM recorded as saved, concurrently (at most
 * plan->parallel; entries/save options of the plan are not used), resumes it and records
 * restore_time, resumed_at and downtime. Paused VMs are resumed if they survived, shut down
 * ones started. A failure is recorded per VM and its image kept on disk; returns the first
 * error after trying every VM.
 */
int vm_restore_all(virConnectPtr conn, const VmPlan *plan, VmResults *results, VmProgressCb cb,
                   void *userdata);

/*
 * The last step of vm_restore_all(), once every VM is back (never inside a VM's downtime):
 * sets the clock of every VM resumed from its saved state to the host's wall clock through its
 * guest agent (virDomainSetTime()), concurrently, each waiting at most
 * plan->clock_sync_timeout_usec for the agent. Records per VM whether it was synced and else
 * why (no agent channel, agent not answering, left paused, started afresh,
 * plan->no_clock_sync); a clock never fails a restore. 0, or -EINVAL/-ENOMEM.
 */
int vm_sync_clocks(virConnectPtr conn, const VmPlan *plan, VmResults *results);

/* Manual retry of one VM's restore from its managed save image (`upgradectl restore-vm`).
 * r may be the VM's record from the report (updated in place) or NULL. -ENOENT when the
 * domain does not exist, -ENODATA when it has no managed save image, -EBUSY when active. */
int vm_restore_one(virConnectPtr conn, const char *name, VmResult *r);

/*
 * The libvirt calls the orchestration makes, replaceable so that unit tests can inject a
 * failure at each of them. vm_ops_default() is libvirt itself.
 */
typedef struct VmOps {
	virConnectPtr (*connect_open)(const char *uri);
	int (*suspend)(virDomainPtr dom);
	int (*resume)(virDomainPtr dom);
	int (*managed_save)(virDomainPtr dom, unsigned flags);
	int (*managed_save_remove)(virDomainPtr dom, unsigned flags);
	int (*has_managed_save)(virDomainPtr dom, unsigned flags);
	int (*create)(virDomainPtr dom, unsigned flags);
	int (*shutdown)(virDomainPtr dom);
	int (*abort_job)(virDomainPtr dom);
	int (*get_state)(virDomainPtr dom, int *state, int *reason, unsigned flags);
	/* 1 while the connection reaches libvirtd; NULL: virConnectIsAlive() and a round trip. */
	int (*connect_alive)(virConnectPtr conn);
} VmOps;

const VmOps *vm_ops_default(void);

/*
 * How long a worker keeps trying to open its connection when libvirtd does not answer: it may
 * be restarting (e.g. killed during the saves, the commit then rolls back once it is back).
 * Default VM_CONNECT_RETRY_DEFAULT; 0 tries once. Not thread-safe, like vm_set_ops().
 */
void vm_set_connect_retry(usec_t usec);
/* NULL restores the default. Not thread-safe: set it before any vm_* call. */
void vm_set_ops(const VmOps *ops);

/*
 * Deadlines for libvirt (vm-connect.c). vm_connect() opens uri waiting at most the call
 * timeout (-ETIMEDOUT; a late connection is closed) and, once vm_event_loop_start() ran, turns
 * libvirt's keepalive on so that a libvirtd that stops answering fails the calls in flight
 * after about the call timeout. *ret_error (optional, freed by the caller) says why it failed.
 * vm_event_loop_start() registers libvirt's default event loop and runs it on a thread of its
 * own (once per process, before the first connection). Not thread-safe: call both setters
 * before any vm_* call.
 */
void vm_set_call_timeout(usec_t usec); /* 0: VM_CALL_TIMEOUT_DEFAULT */
/* How long the restore and a rollback wait for libvirt to answer at all (upgraded
 * --libvirt-wait=); 0: VM_LIBVIRT_WAIT_DEFAULT. Not thread-safe: set it at start. */
void vm_set_libvirt_wait(usec_t usec);
usec_t vm_libvirt_wait(void);
usec_t vm_call_timeout(void);
int vm_event_loop_start(void);
int vm_connect(const char *uri, virConnectPtr *ret, char **ret_error);
/* Closes conn (takes it) on a thread of its own, waiting at most timeout: closing sends
 * libvirtd a call, which a mute libvirtd answers only when the keepalive gives up. 0, or
 * -ETIMEDOUT with the close still in flight (the caller is leaving: the process exit ends it). */
int vm_close_bounded(virConnectPtr conn, usec_t timeout);
/*
 * Calls a caller stopped waiting for (a connection, a pause) finish on threads of their own,
 * holding a reference on the connection until they do. Waits until none is left, at most
 * timeout: 0, or -ETIMEDOUT with calls still in flight (libvirt still not answering). Before
 * the last connection is closed or the process exits, so that nothing is torn down under them.
 */
int vm_wait_detached(usec_t timeout);
