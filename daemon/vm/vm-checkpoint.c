/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The commit path: validate the plan, pause every selected VM with a deadline, then save them
 * (or shut them down) concurrently; roll everything back on failure (vm-rollback.c).
 */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "vm.h"
#include "vm-internal.h"
#include "deadline-call.h"
#include "keep-ram.h"
#include "macros.h"

#define SHUTDOWN_POLL_USEC 100000ULL

/*
 * Whether files in dir accept O_DIRECT: with VIR_DOMAIN_SAVE_BYPASS_CACHE libvirt writes the
 * image with O_DIRECT, and a filesystem without it fails the save (EINVAL) where a plain save
 * would work. Probed with a hidden file created and removed at once; true when the directory
 * cannot be probed (remote libvirt, no access): libvirt decides then.
 */
static bool dir_supports_direct_io(const char *dir) {
	_cleanup_free_ char *path = NULL;
	int fd;

	if (asprintf(&path, "%s/.upgraded-direct-io-%d", dir, (int)getpid()) < 0)
		return true;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno != EINVAL;
	close(fd);
	(void)unlink(path);
	return true;
}

static int64_t saved_image_size(const VmPlan *plan, const char *name) {
	_cleanup_free_ char *path = NULL;
	struct stat st;

	if (asprintf(&path, "%s/%s.save", plan->save_dir ?: VM_SAVE_DIR_DEFAULT, name) < 0)
		return -1;
	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode))
		return -1;
	return (int64_t)st.st_size;
}

/* ---- pausing with a deadline ---- */

/* One pause: its domain and its answer, kept by whoever holds it last. */
typedef struct PauseCall {
	virDomainPtr dom;
	int r;
	char *error;
} PauseCall;

static void pause_call_free(PauseCall *p) {
	virDomainFree(p->dom);
	free(p->error);
	free(p);
}

static void pause_call_run(void *data) {
	PauseCall *p = data;

	p->r = vm_ops->suspend(p->dom);
	if (p->r < 0)
		p->error = strdup(vm_last_error());
}

/* The caller stopped waiting and rolled the commit back: undo this late pause. */
static void pause_call_orphan(void *data) {
	PauseCall *p = data;

	if (p->r == 0)
		(void)vm_ops->resume(p->dom);
	pause_call_free(p);
}

/*
 * Pauses dom, waiting at most timeout. libvirt waits for QEMU's answer without a bound, so the
 * call runs on a thread of its own: on timeout it is abandoned (-ETIMEDOUT) and that thread,
 * whenever the call returns, resumes the domain if the pause went through after all.
 */
static int pause_domain(virDomainPtr dom, usec_t timeout, VmResult *v) {
	const DeadlineCall call = { .run = pause_call_run,
		                    .orphan = pause_call_orphan,
		                    .pending = vm_detached_calls() };
	PauseCall *p;
	int r;

	p = calloc(1, sizeof(*p));
	if (!p)
		return vm_fail(v, -ENOMEM, "pause failed: out of memory");
	p->dom = dom;
	virDomainRef(dom);
	r = deadline_call(&call, p, timeout);
	if (r == -ETIMEDOUT)
		return vm_fail(
		        v, -ETIMEDOUT,
		        "pause did not complete within %.1f s (QEMU not answering its monitor); "
		        "the pause is undone if it completes later",
		        (double)timeout / 1e6);
	if (r < 0)
		r = vm_fail(v, r, "pause failed: cannot start a thread: %s", strerror(-r));
	else if (p->r < 0)
		r = vm_fail(v, -EIO, "pause failed: %s", strna(p->error));
	pause_call_free(p);
	return r;
}

/* ---- per-VM steps (run on workers) ---- */

int vm_job_save(VmJob *j, virConnectPtr c) {
	VmResult *r = j->result;
	_cleanup_domain_ virDomainPtr dom = vm_lookup(c, r);
	unsigned flags = VIR_DOMAIN_SAVE_PAUSED;
	usec_t t0;
	int k;

	if (!dom)
		return vm_fail(r, -ENOENT, "domain disappeared: %s", vm_last_error());
	if (j->runner->bypass_cache)
		flags |= VIR_DOMAIN_SAVE_BYPASS_CACHE;
	k = r->strategy == VM_STRATEGY_KEEP_RAM
	            ? keep_ram_before_save(dom, j->runner->plan->keep_ram,
	                                   j->runner->plan->save_dir, r)
	            : keep_ram_before_checkpoint(dom);
	if (k < 0) {
		keep_ram_abandon(dom, r);
		if (!r->error)
			vm_result_set_error(
			        r, "cannot turn off x-ignore-shared before the checkpoint: %s",
			        vm_last_error());
		r->outcome = VM_OUTCOME_FAILED;
		return k;
	}

	r->save_started_at = vm_now(CLOCK_REALTIME);
	t0 = vm_now(CLOCK_MONOTONIC);
	k = vm_ops->managed_save(dom, flags);
	if (k < 0 && (flags & VIR_DOMAIN_SAVE_BYPASS_CACHE) &&
	    vm_last_error_is_unsupported(false)) {
		flags &= ~VIR_DOMAIN_SAVE_BYPASS_CACHE;
		k = vm_ops->managed_save(dom, flags);
	}
	r->save_time = vm_now(CLOCK_MONOTONIC) - t0;
	r->save_finished_at = vm_now(CLOCK_REALTIME);
	if (k < 0) {
		char *why = strdup(vm_last_error());

		keep_ram_abandon(dom, r);
		k = vm_fail(r, -EIO, "managed save failed: %s", strna(why));
		free(why);
		return k;
	}
	if (r->strategy == VM_STRATEGY_KEEP_RAM &&
	    (k = keep_ram_after_save(dom, j->runner->plan->keep_ram, r)) < 0) {
		r->outcome = VM_OUTCOME_FAILED;
		return k;
	}

	r->saved_bytes = saved_image_size(j->runner->plan, r->name);
	r->outcome = VM_OUTCOME_SAVED;
	return 0;
}

static int job_shutdown(VmJob *j, virConnectPtr c) {
	VmResult *r = j->result;
	_cleanup_domain_ virDomainPtr dom = vm_lookup(c, r);
	usec_t timeout = vm_plan_shutdown_timeout(j->runner->plan);
	usec_t deadline = vm_now(CLOCK_MONOTONIC) + timeout;

	if (!dom)
		return vm_fail(r, -ENOENT, "domain disappeared: %s", vm_last_error());
	if (vm_ops->shutdown(dom) < 0)
		return vm_fail(r, -EIO, "graceful shutdown request failed: %s", vm_last_error());
	for (;;) {
		int state;

		if (vm_get_state(dom, &state) < 0)
			return vm_fail(r, -EIO, "cannot query state: %s", vm_last_error());
		if (vm_state_is_inactive(state))
			break;
		if (vm_now(CLOCK_MONOTONIC) >= deadline)
			return vm_fail(r, -ETIMEDOUT, "did not shut down within %.1f s",
			               (double)timeout / 1e6);
		usleep(SHUTDOWN_POLL_USEC);
	}
	r->outcome = VM_OUTCOME_SHUT_DOWN;
	return 0;
}
/* ---- validating the plan, the entry point ---- */

/* A VM that cannot keep its RAM: checkpointed instead when the configuration allows it, the
 * reason recorded; otherwise the plan is refused. */
static int prepare_keep_ram(virDomainPtr dom, const KeepRamConfig *cfg, VmResult *r) {
	char *blocker = keep_ram_blocker(dom, cfg);

	if (!blocker)
		return 0;
	if (!cfg || !cfg->fallback_checkpoint) {
		int k = vm_fail(r, -EINVAL, "cannot keep its RAM: %s", blocker);
		free(blocker);
		return k;
	}
	r->kept_ram = calloc(1, sizeof(KeptRam));
	if (!r->kept_ram) {
		free(blocker);
		return -ENOMEM;
	}
	r->kept_ram->fallback_reason = blocker;
	r->strategy = VM_STRATEGY_CHECKPOINT;
	return 0;
}

/* Looks up and validates every plan entry; touches no domain. */
static int prepare(virConnectPtr conn, const VmPlan *plan, VmResults *results) {
	int ret = 0;

	for (size_t i = 0; i < plan->n_entries; i++) {
		const VmPlanEntry *e = &plan->entries[i];
		VmResult *r = &results->items[i];
		_cleanup_domain_ virDomainPtr dom = NULL;
		_cleanup_free_ char *blocker = NULL;
		int state, k = 0;

		r->strategy = e->strategy;
		r->name = strdup(e->name ?: "");
		if (!r->name)
			return -ENOMEM;
		if (!e->name || !*e->name)
			k = vm_fail(r, -EINVAL, "empty VM name in plan");
		else if (!vm_strategy_to_string(e->strategy))
			k = vm_fail(r, -EINVAL, "invalid strategy %d", (int)e->strategy);
		for (size_t p = 0; k == 0 && p < i; p++)
			if (streq_ptr(plan->entries[p].name, e->name))
				k = vm_fail(r, -EINVAL, "VM '%s' listed twice in plan", e->name);
		if (k < 0) {
			ret = ret ?: k;
			continue;
		}

		dom = virDomainLookupByName(conn, e->name);
		if (!dom) {
			ret = ret ?: vm_fail(r, -ENOENT, "no such domain '%s'", e->name);
			continue;
		}
		if (virDomainGetUUIDString(dom, r->uuid) < 0 || vm_get_state(dom, &state) < 0) {
			ret = ret ?: vm_fail(r, -EIO, "cannot query domain: %s", vm_last_error());
			continue;
		}
		r->orig_state = state;

		if (e->strategy == VM_STRATEGY_IGNORE || vm_state_is_inactive(state)) {
			r->outcome = VM_OUTCOME_IGNORED;
			continue;
		}
		if (!vm_state_is_running(state) && state != VIR_DOMAIN_PAUSED)
			k = vm_fail(r, -EBUSY, "domain is %s, its state cannot be preserved",
			            strna(vm_state_to_string(state)));
		else if (e->strategy == VM_STRATEGY_KEEP_RAM &&
		         (k = prepare_keep_ram(dom, plan->keep_ram, r)) < 0)
			;
		else if ((r->strategy == VM_STRATEGY_CHECKPOINT ||
		          r->strategy == VM_STRATEGY_KEEP_RAM) &&
		         (blocker = vm_checkpoint_blocker(dom)))
			k = vm_fail(r, -EINVAL, "cannot checkpoint: %s", blocker);
		else if (e->strategy == VM_STRATEGY_SHUTDOWN && state == VIR_DOMAIN_PAUSED)
			k = vm_fail(r, -EBUSY, "a paused domain cannot shut down gracefully");
		ret = ret ?: k;
	}
	return ret;
}

static const char *first_error(const VmResults *results, char **buf) {
	for (size_t i = 0; i < results->n; i++)
		if (results->items[i].outcome == VM_OUTCOME_FAILED) {
			if (asprintf(buf, "VM '%s' failed: %s", results->items[i].name,
			             strna(results->items[i].error)) < 0)
				return "a VM failed";
			return *buf;
		}
	return "a VM failed";
}

/* Step 2 of vm_checkpoint_all(): pauses every VM to checkpoint, back to back, stopping at the
 * first failure or a cancel request (-EINTR). Reports nothing: the caller does, after the last
 * pause. */
static int pause_all(virConnectPtr conn, const VmPlan *plan, VmResults *results) {
	int r = 0;

	for (size_t i = 0; i < results->n; i++) {
		VmResult *v = &results->items[i];
		_cleanup_domain_ virDomainPtr dom = NULL;

		if (v->outcome != VM_OUTCOME_PENDING ||
		    (v->strategy != VM_STRATEGY_CHECKPOINT && v->strategy != VM_STRATEGY_KEEP_RAM))
			continue;
		if (plan->cancel && *plan->cancel) {
			r = -EINTR;
			break;
		}
		if (vm_state_is_running(v->orig_state)) {
			dom = vm_lookup(conn, v);
			if (!dom) {
				r = vm_fail(v, -EIO, "pause failed: %s", vm_last_error());
				break;
			}
			vm_plan_event(plan, v, VM_EVENT_PAUSING);
			r = pause_domain(dom, vm_plan_pause_timeout(plan), v);
			if (r < 0)
				break;
			vm_plan_event(plan, v, VM_EVENT_PAUSED);
		}
		v->paused_at = vm_now(CLOCK_REALTIME);
		v->outcome = VM_OUTCOME_PAUSED;
	}
	return r;
}

/* Step 3 of vm_checkpoint_all(): the jobs, graceful shutdowns first, then the saves of the
 * paused VMs. Returns how many were written to jobs. */
static size_t checkpoint_jobs(const VmPlan *plan, VmResults *results, VmJob *jobs) {
	size_t n_jobs = 0;

	for (size_t i = 0; i < results->n; i++) {
		VmResult *v = &results->items[i];

		if (v->strategy == VM_STRATEGY_SHUTDOWN && v->outcome == VM_OUTCOME_PENDING)
			jobs[n_jobs++] = (VmJob){ .result = v,
				                  .func = job_shutdown,
				                  .start_outcome = VM_OUTCOME_SHUTTING_DOWN };
	}
	for (size_t i = 0; i < results->n; i++) {
		VmResult *v = &results->items[i];

		if ((v->strategy == VM_STRATEGY_CHECKPOINT ||
		     v->strategy == VM_STRATEGY_KEEP_RAM) &&
		    v->outcome == VM_OUTCOME_PAUSED)
			jobs[n_jobs++] = (VmJob){ .result = v,
				                  .func = vm_job_save,
				                  .start_outcome = VM_OUTCOME_SAVING,
				                  .timeout = vm_plan_save_timeout(plan) };
	}
	return n_jobs;
}

int vm_checkpoint_all(virConnectPtr conn, const VmPlan *plan, VmProgressCb cb, void *userdata,
                      VmResults **ret_results) {
	_cleanup_free_ VmJob *jobs = NULL;
	_cleanup_free_ char *reason = NULL;
	VmResults *results;
	VmRunner run;
	size_t n_jobs = 0;
	int r;

	if (!conn || !plan || !ret_results || (plan->n_entries > 0 && !plan->entries))
		return -EINVAL;
	results = vm_results_new(plan->n_entries);
	if (!results)
		return -ENOMEM;
	*ret_results = results;

	/* 1. Validate everything before touching anything. */
	r = prepare(conn, plan, results);
	if (r < 0)
		return r;
	r = vm_runner_init(&run, conn, plan, cb, userdata);
	if (r < 0)
		return r;
	run.bypass_cache = !plan->no_bypass_cache &&
	                   dir_supports_direct_io(plan->save_dir ?: VM_SAVE_DIR_DEFAULT);

	/* 2. Pause every VM to preserve, back to back: the blackout starts together. Progress
	 *    is reported after the last pause so that a slow listener cannot stretch it. */
	r = pause_all(conn, plan, results);
	for (size_t i = 0; i < results->n; i++)
		if (results->items[i].outcome != VM_OUTCOME_PENDING)
			vm_runner_report(&run, &results->items[i]);
	if (r < 0)
		goto rollback;

	/* 3. Graceful shutdowns and managed saves, concurrently. */
	jobs = calloc(results->n ?: 1, sizeof(VmJob));
	if (!jobs) {
		r = -ENOMEM;
		goto rollback;
	}
	n_jobs = checkpoint_jobs(plan, results, jobs);
	r = vm_run_jobs(&run, jobs, n_jobs, vm_plan_parallel(plan));
	if (r < 0)
		goto rollback;
	vm_runner_done(&run);
	return 0;

rollback:
	vm_runner_done(&run);
	(void)vm_rollback(conn, results,
	                  r == -EINTR ? "the commit was cancelled" : first_error(results, &reason),
	                  cb, userdata);
	return r;
}
