/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Shared between the library's files; not part of the API. */

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "vm.h"

extern const VmOps *vm_ops;
extern usec_t vm_connect_retry_usec;

usec_t vm_now(clockid_t clock);
const char *vm_last_error(void);
const char *vm_state_to_string(int state);
int vm_state_from_string(const char *s);
void vm_result_set_error(VmResult *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
VmResults *vm_results_new(size_t n);
char *vm_checkpoint_blocker(virDomainPtr dom);
/* Counts the threads of detached calls not finished yet (vm_wait_detached()). */
atomic_uint *vm_detached_calls(void);

/* ---- the commit and boot paths, by concern ----
 *   vm-domain.c       small steps on one domain the paths share
 *   vm-orchestrate.c  the worker threads that run the per-VM jobs
 *   vm-checkpoint.c   commit: validate the plan, pause, save or shut down
 *   vm-rollback.c     rollback to the state before the commit
 *   vm-restore.c      boot: restore and resume; the manual retry of one VM
 *   vm-clock.c        boot: the guests' clocks set again once they run
 */

typedef struct VmJob VmJob;
typedef struct VmRunner VmRunner;

struct VmJob {
	VmRunner *runner;
	VmResult *result;
	int (*func)(VmJob *j, virConnectPtr c);
	VmOutcome start_outcome; /* set (and reported) when the job starts */
	usec_t timeout;          /* 0: the job bounds itself */
	usec_t deadline;
	pthread_t thread;
	bool started, done, joined, timed_out;
	int r;
};

struct VmRunner {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	virConnectPtr conn;
	char *uri;
	const VmPlan *plan;
	bool bypass_cache; /* VIR_DOMAIN_SAVE_BYPASS_CACHE for managed saves */
	VmProgressCb cb;
	void *userdata;
	bool cancelled; /* plan->cancel seen: running jobs aborted */
};

/* vm-domain.c */
void vm_domain_freep(virDomainPtr *d);
#define _cleanup_domain_ _cleanup_(vm_domain_freep)

/* How long a restore waits for a restarted libvirtd to settle a domain it found half restored
 * (paused, starting up; vm-restore.c). */
#define VM_STARTING_UP_WAIT_USEC (30ULL * 1000 * 1000)

extern const VmPlan vm_default_plan;

unsigned vm_plan_parallel(const VmPlan *p);
usec_t vm_plan_pause_timeout(const VmPlan *p);
usec_t vm_plan_save_timeout(const VmPlan *p);
usec_t vm_plan_shutdown_timeout(const VmPlan *p);
usec_t vm_plan_restore_timeout(const VmPlan *p);
bool vm_state_is_running(int s);
bool vm_state_is_inactive(int s);
int vm_fail(VmResult *r, int error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool vm_last_error_is_unsupported(bool invalid_arg_too);
int vm_get_state(virDomainPtr dom, int *ret);
virDomainPtr vm_lookup(virConnectPtr c, const VmResult *r);
int vm_start_domain(virDomainPtr dom);
int vm_start_saved(virDomainPtr dom, VmResult *r);
void vm_plan_event(const VmPlan *plan, const VmResult *r, VmEvent e);
int vm_settle_state(virDomainPtr dom, VmResult *r);

/* vm-orchestrate.c */
void vm_runner_report(VmRunner *run, const VmResult *r);
virConnectPtr vm_connect_retry(const char *uri, char **ret_error);
int vm_run_jobs(VmRunner *run, VmJob *jobs, size_t n, unsigned parallel);
int vm_runner_init(VmRunner *run, virConnectPtr conn, const VmPlan *plan, VmProgressCb cb,
                   void *userdata);
int vm_runner_init_jobs(VmRunner *run, virConnectPtr conn, const VmPlan *plan, VmProgressCb cb,
                        void *userdata, size_t n, VmJob **ret_jobs);
void vm_runner_done(VmRunner *run);

/* The jobs whose bytes the runner samples (vm-checkpoint.c, vm-restore.c). */
int vm_job_save(VmJob *j, virConnectPtr c);
int vm_job_restore(VmJob *j, virConnectPtr c);
