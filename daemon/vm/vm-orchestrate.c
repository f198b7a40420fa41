/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The worker threads of the commit and boot paths: per-VM jobs (vm-checkpoint.c,
 * vm-rollback.c, vm-restore.c) run concurrently, each on its own thread and libvirt
 * connection, at most plan->parallel at a time, each with its deadline; a cancel request aborts
 * the running ones, progress is reported on the caller's thread.
 *
 * Every step is decided from the domain's current state rather than from what we believe we
 * did, so that rollback and restore are idempotent and safe to repeat.
 */

#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "vm.h"
#include "vm-internal.h"
#include "macros.h"

#define CONNECT_POLL_USEC 200000ULL
#define POLL_USEC         500000ULL /* cancel requests, transfer progress */

void vm_runner_report(VmRunner *run, const VmResult *r) {
	if (run->cb)
		run->cb(r, run->userdata);
}

/* ---- worker threads ---- */

/* Opens a worker's connection, each attempt bounded by the call timeout; while libvirtd does
 * not answer (it may be restarting) tries again for vm_connect_retry_usec. */
virConnectPtr vm_connect_retry(const char *uri, char **ret_error) {
	usec_t deadline = vm_now(CLOCK_MONOTONIC) + vm_connect_retry_usec;
	virConnectPtr c = NULL;

	for (;;) {
		free(*ret_error);
		*ret_error = NULL;
		if (vm_connect(uri, &c, ret_error) >= 0)
			return c;
		if (vm_now(CLOCK_MONOTONIC) >= deadline)
			return NULL;
		usleep(CONNECT_POLL_USEC);
	}
}

static void *job_thread(void *p) {
	VmJob *j = p;
	VmRunner *run = j->runner;
	_cleanup_free_ char *error = NULL;
	virConnectPtr c;
	int r;

	c = vm_connect_retry(run->uri, &error);
	if (!c)
		r = vm_fail(j->result, -ECONNREFUSED, "cannot connect to %s: %s", run->uri,
		            strna(error));
	else {
		r = j->func(j, c);
		virConnectClose(c);
	}

	pthread_mutex_lock(&run->lock);
	j->r = r;
	j->done = true;
	pthread_cond_broadcast(&run->cond);
	pthread_mutex_unlock(&run->lock);
	return NULL;
}

/* A job past its deadline: ask libvirt to abort the domain's job (a save or a restore is a
 * migration to/from a file and can be cancelled); the worker then returns with an error. */
static void job_abort(VmRunner *run, VmJob *j) {
	_cleanup_domain_ virDomainPtr dom = vm_lookup(run->conn, j->result);

	if (dom)
		(void)vm_ops->abort_job(dom);
}

/* How far one running save or restore got (virDomainGetJobStats()), for plan->on_bytes. */
static void job_sample(VmRunner *run, VmJob *j) {
	_cleanup_domain_ virDomainPtr dom = NULL;
	virTypedParameterPtr params = NULL;
	unsigned long long done = 0, total = 0;
	int type, n = 0;

	if (!run->plan->on_bytes || (j->func != vm_job_save && j->func != vm_job_restore))
		return;
	dom = vm_lookup(run->conn, j->result);
	if (!dom || virDomainGetJobStats(dom, &type, &params, &n, 0) < 0) {
		virResetLastError();
		return;
	}
	if (type != VIR_DOMAIN_JOB_NONE) {
		(void)virTypedParamsGetULLong(params, n, VIR_DOMAIN_JOB_DATA_PROCESSED, &done);
		(void)virTypedParamsGetULLong(params, n, VIR_DOMAIN_JOB_DATA_TOTAL, &total);
		if (done > 0 || total > 0)
			run->plan->on_bytes(j->result->name, done, total, run->userdata);
	}
	virTypedParamsFree(params, n);
}

/* Between two waits of vm_run_jobs() (lock held): a cancel request aborts every running job;
 * the running saves and restores vm_runner_report how far they got. */
static void runner_poll(VmRunner *run, VmJob *jobs, size_t next) {
	bool cancel = run->plan->cancel && *run->plan->cancel && !run->cancelled;

	if (cancel)
		run->cancelled = true;
	for (size_t i = 0; i < next; i++) {
		VmJob *j = &jobs[i];

		if (!j->started || j->done)
			continue;
		pthread_mutex_unlock(&run->lock);
		if (cancel)
			job_abort(run, j);
		else
			job_sample(run, j);
		pthread_mutex_lock(&run->lock);
	}
}

/* Starts job j on a thread of its own (lock held, dropped meanwhile); 0, or the error of
 * pthread_create() after reporting j failed. */
static int runner_start(VmRunner *run, VmJob *j) {
	bool changed = j->result->outcome != j->start_outcome;
	int k;

	j->runner = run;
	j->result->outcome = j->start_outcome;
	if (j->timeout)
		j->deadline = vm_now(CLOCK_MONOTONIC) + j->timeout;
	pthread_mutex_unlock(&run->lock);
	if (changed)
		vm_runner_report(run, j->result);
	k = pthread_create(&j->thread, NULL, job_thread, j);
	if (k != 0) {
		(void)vm_fail(j->result, -k, "cannot start a worker thread: %s", strerror(k));
		vm_runner_report(run, j->result);
	}
	pthread_mutex_lock(&run->lock);
	return k;
}

/* Joins the jobs among the first next that ended and reports them (lock held, dropped for
 * each); the first error goes into *ret. Returns how many were joined. */
static size_t runner_reap(VmRunner *run, VmJob *jobs, size_t next, int *ret) {
	size_t reaped = 0;

	for (size_t i = 0; i < next; i++) {
		VmJob *j = &jobs[i];

		if (!j->started || !j->done || j->joined)
			continue;
		pthread_mutex_unlock(&run->lock);
		pthread_join(j->thread, NULL);
		if (j->timed_out && j->r < 0)
			vm_result_set_error(j->result, "timed out after %.1f s, aborted: %s",
			                    (double)j->timeout / 1e6, strempty(j->result->error));
		vm_runner_report(run, j->result);
		pthread_mutex_lock(&run->lock);
		if (j->r < 0 && *ret == 0)
			*ret = j->r;
		j->joined = true;
		reaped++;
	}
	return reaped;
}

/* Nothing to join: aborts the jobs past their deadline, then waits (lock held) until a job
 * ends, the next deadline, or POLL_USEC for the next cancel check and progress sample. */
static void runner_wait(VmRunner *run, VmJob *jobs, size_t next) {
	usec_t now, wake;

	runner_poll(run, jobs, next);
	now = vm_now(CLOCK_MONOTONIC);
	wake = now + POLL_USEC;
	for (size_t i = 0; i < next; i++) {
		VmJob *j = &jobs[i];

		if (!j->started || j->done || j->timed_out || !j->deadline)
			continue;
		if (j->deadline <= now) {
			j->timed_out = true;
			pthread_mutex_unlock(&run->lock);
			job_abort(run, j);
			pthread_mutex_lock(&run->lock);
		} else
			wake = MIN(wake, j->deadline);
	}

	bool any_done = false;
	for (size_t i = 0; i < next; i++)
		if (jobs[i].started && jobs[i].done && !jobs[i].joined)
			any_done = true;
	if (!any_done) {
		struct timespec ts = {
			.tv_sec = (time_t)(wake / 1000000ULL),
			.tv_nsec = (long)(wake % 1000000ULL) * 1000L,
		};
		(void)pthread_cond_timedwait(&run->cond, &run->lock, &ts);
	}
}

/*
 * Runs the jobs, at most parallel at a time, each on its own thread and connection. Progress
 * is reported on this (the caller's) thread. Returns the first job's error, after all ended.
 */
int vm_run_jobs(VmRunner *run, VmJob *jobs, size_t n, unsigned parallel) {
	size_t next = 0, active = 0, finished = 0;
	int ret = 0;

	pthread_mutex_lock(&run->lock);
	while (finished < n) {
		size_t reaped;

		/* Cancelled: the jobs not started yet never start. */
		while (run->cancelled && next < n) {
			jobs[next].done = jobs[next].joined = true;
			next++;
			finished++;
		}
		while (active < parallel && next < n) {
			VmJob *j = &jobs[next++];
			int k = runner_start(run, j);

			if (k != 0) {
				j->done = j->joined = true;
				j->r = -k;
				ret = ret ?: -k;
				finished++;
			} else {
				j->started = true;
				active++;
			}
		}

		reaped = runner_reap(run, jobs, next, &ret);
		active -= reaped;
		finished += reaped;
		if (reaped > 0 || finished == n)
			continue;
		runner_wait(run, jobs, next);
	}
	pthread_mutex_unlock(&run->lock);
	return run->cancelled ? -EINTR : ret;
}

int vm_runner_init(VmRunner *run, virConnectPtr conn, const VmPlan *plan, VmProgressCb cb,
                   void *userdata) {
	pthread_condattr_t attr;

	*run = (VmRunner){
		.conn = conn, .plan = plan ?: &vm_default_plan, .cb = cb, .userdata = userdata
	};
	run->uri = virConnectGetURI(conn);
	if (!run->uri)
		return -EIO;
	pthread_mutex_init(&run->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&run->cond, &attr);
	pthread_condattr_destroy(&attr);
	return 0;
}

/* The runner of a path and its array of n zeroed jobs (at least one, so that calloc() of none
 * is never NULL). On failure nothing is left allocated and *ret_jobs is untouched. */
int vm_runner_init_jobs(VmRunner *run, virConnectPtr conn, const VmPlan *plan, VmProgressCb cb,
                        void *userdata, size_t n, VmJob **ret_jobs) {
	_cleanup_free_ VmJob *jobs = NULL;
	int r;

	jobs = calloc(n ?: 1, sizeof(VmJob));
	if (!jobs)
		return -ENOMEM;
	r = vm_runner_init(run, conn, plan, cb, userdata);
	if (r < 0)
		return r;
	*ret_jobs = TAKE_PTR(jobs);
	return 0;
}

void vm_runner_done(VmRunner *run) {
	if (!run->uri)
		return;
	pthread_mutex_destroy(&run->lock);
	pthread_cond_destroy(&run->cond);
	free(run->uri);
	run->uri = NULL;
}
