/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The commit and boot paths: pause every selected VM, save them concurrently, roll everything
 * back on failure; after the handoff restore them concurrently and resume them.
 *
 * Every step is decided from the domain's current state rather than from what we believe we
 * did, so that rollback and restore are idempotent and safe to repeat.
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "vm.h"
#include "vm-internal.h"
#include "keep-ram.h"
#include "macros.h"

#define SHUTDOWN_POLL_USEC 100000ULL
#define CONNECT_POLL_USEC  200000ULL
#define POLL_USEC          500000ULL /* cancel requests, transfer progress */

typedef struct VmJob VmJob;
typedef struct VmRunner VmRunner;

static int job_save(VmJob *j, virConnectPtr c);
static int job_restore(VmJob *j, virConnectPtr c);

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

static void domain_freep(virDomainPtr *d) {
	if (*d)
		virDomainFree(*d);
}
#define _cleanup_domain_ _cleanup_(domain_freep)

static const VmPlan default_plan = {};

static unsigned plan_parallel(const VmPlan *p) {
	return p->parallel ?: VM_PARALLEL_DEFAULT;
}

static usec_t plan_pause_timeout(const VmPlan *p) {
	return p->pause_timeout_usec ?: VM_PAUSE_TIMEOUT_DEFAULT;
}

static usec_t plan_save_timeout(const VmPlan *p) {
	return p->save_timeout_usec ?: VM_SAVE_TIMEOUT_DEFAULT;
}

static usec_t plan_shutdown_timeout(const VmPlan *p) {
	return p->shutdown_timeout_usec ?: VM_SHUTDOWN_TIMEOUT_DEFAULT;
}

static usec_t plan_restore_timeout(const VmPlan *p) {
	return p->restore_timeout_usec ?: VM_RESTORE_TIMEOUT_DEFAULT;
}

static bool state_is_running(int s) {
	return s == VIR_DOMAIN_RUNNING || s == VIR_DOMAIN_BLOCKED;
}

static bool state_is_inactive(int s) {
	return s == VIR_DOMAIN_SHUTOFF || s == VIR_DOMAIN_CRASHED;
}

/* Marks r failed with a reason and returns error. */
static int fail(VmResult *r, int error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(VmResult *r, int error, const char *fmt, ...) {
	char *s = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	if (r->error && s) {
		/* Keep the first cause in front: "save failed: ...; rollback: ..." */
		vm_result_set_error(r, "%s; %s", r->error, s);
		free(s);
	} else if (s) {
		free(r->error);
		r->error = s;
	}
	r->outcome = VM_OUTCOME_FAILED;
	return error;
}

/* Whether the last libvirt error on this thread means "this flag/call is not supported". */
static bool last_error_is_unsupported(bool invalid_arg_too) {
	int code = virGetLastErrorCode();

	return code == VIR_ERR_NO_SUPPORT || code == VIR_ERR_ARGUMENT_UNSUPPORTED ||
	       (invalid_arg_too && code == VIR_ERR_INVALID_ARG);
}

static int get_state(virDomainPtr dom, int *ret) {
	int state, reason;

	if (vm_ops->get_state(dom, &state, &reason, 0) < 0)
		return -EIO;
	*ret = state;
	return 0;
}

static virDomainPtr lookup(virConnectPtr c, const VmResult *r) {
	if (r->uuid[0])
		return virDomainLookupByUUIDString(c, r->uuid);
	return virDomainLookupByName(c, r->name);
}

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

/* Starts an inactive domain; from its managed save image when it has one. Comes back paused
 * where the driver supports VIR_DOMAIN_START_PAUSED, so that the caller resumes explicitly. */
static int start_domain(virDomainPtr dom) {
	if (vm_ops->create(dom, VIR_DOMAIN_START_PAUSED) == 0)
		return 0;
	if (!last_error_is_unsupported(true))
		return -EIO;
	return vm_ops->create(dom, 0) < 0 ? -EIO : 0;
}

/* start_domain() from a managed save; a keep-ram restore that lost the race for x-ignore-shared
 * (libvirt's migrate-incoming before the hook's helper) failed cleanly with its image and file
 * kept: it is tried again, at most KEEP_RAM_START_ATTEMPTS times in all. */
static int start_saved(virDomainPtr dom, VmResult *r) {
	for (unsigned a = 1;; a++) {
		int k = start_domain(dom);

		if (r->kept_ram)
			r->kept_ram->start_attempts = a;
		if (k >= 0 || r->strategy != VM_STRATEGY_KEEP_RAM || a >= KEEP_RAM_START_ATTEMPTS ||
		    !keep_ram_race_lost(vm_last_error()))
			return k;
	}
}

static void event(const VmPlan *plan, const VmResult *r, VmEvent e) {
	if (plan && plan->on_event)
		plan->on_event(r, e, plan->event_userdata);
}

static void report(VmRunner *run, const VmResult *r) {
	if (run->cb)
		run->cb(r, run->userdata);
}

/* ---- pausing with a deadline ---- */

/* One pause, shared by the caller waiting for it and the thread making it. */
typedef struct PauseCall {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	virDomainPtr dom;
	unsigned refs;
	bool done, abandoned;
	int r;
	char *error;
} PauseCall;

static void pause_call_unref(PauseCall *p) {
	bool last;

	pthread_mutex_lock(&p->lock);
	last = --p->refs == 0;
	pthread_mutex_unlock(&p->lock);
	if (!last)
		return;
	virDomainFree(p->dom);
	free(p->error);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	free(p);
}

static void *pause_thread(void *arg) {
	PauseCall *p = arg;
	int r = vm_ops->suspend(p->dom);
	char *error = r < 0 ? strdup(vm_last_error()) : NULL;
	bool abandoned;

	pthread_mutex_lock(&p->lock);
	p->r = r;
	p->error = error;
	p->done = true;
	abandoned = p->abandoned;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	/* The caller stopped waiting and rolled the commit back: undo this late pause. */
	if (abandoned && r == 0)
		(void)vm_ops->resume(p->dom);
	pause_call_unref(p);
	return NULL;
}

/*
 * Pauses dom, waiting at most timeout. libvirt waits for QEMU's answer without a bound, so the
 * call runs on a thread of its own: on timeout it is abandoned (-ETIMEDOUT) and that thread,
 * whenever the call returns, resumes the domain if the pause went through after all.
 */
static int pause_domain(virDomainPtr dom, usec_t timeout, VmResult *v) {
	usec_t deadline = vm_now(CLOCK_MONOTONIC) + timeout;
	struct timespec ts = { .tv_sec = (time_t)(deadline / 1000000ULL),
		               .tv_nsec = (long)(deadline % 1000000ULL) * 1000L };
	pthread_condattr_t attr;
	pthread_t thread;
	PauseCall *p;
	int r, k;

	p = calloc(1, sizeof(*p));
	if (!p)
		return fail(v, -ENOMEM, "pause failed: out of memory");
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cond, &attr);
	pthread_condattr_destroy(&attr);
	p->refs = 2;
	p->dom = dom;
	virDomainRef(dom);
	k = pthread_create(&thread, NULL, pause_thread, p);
	if (k != 0) {
		p->refs = 1;
		pause_call_unref(p);
		return fail(v, -k, "pause failed: cannot start a thread: %s", strerror(k));
	}
	pthread_detach(thread);

	pthread_mutex_lock(&p->lock);
	while (!p->done)
		if (pthread_cond_timedwait(&p->cond, &p->lock, &ts) == ETIMEDOUT && !p->done) {
			p->abandoned = true;
			break;
		}
	if (!p->done)
		r = fail(v, -ETIMEDOUT,
		         "pause did not complete within %.1f s (QEMU not answering its monitor); "
		         "the pause is undone if it completes later",
		         (double)timeout / 1e6);
	else if (p->r < 0)
		r = fail(v, -EIO, "pause failed: %s", strna(p->error));
	else
		r = 0;
	pthread_mutex_unlock(&p->lock);
	pause_call_unref(p);
	return r;
}

/* ---- worker threads ---- */

/* Opens a worker's connection, each attempt bounded by the call timeout; while libvirtd does
 * not answer (it may be restarting) tries again for vm_connect_retry_usec. */
static virConnectPtr connect_retry(const char *uri, char **ret_error) {
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

	c = connect_retry(run->uri, &error);
	if (!c)
		r = fail(j->result, -ECONNREFUSED, "cannot connect to %s: %s", run->uri,
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
	_cleanup_domain_ virDomainPtr dom = lookup(run->conn, j->result);

	if (dom)
		(void)vm_ops->abort_job(dom);
}

/* How far one running save or restore got (virDomainGetJobStats()), for plan->on_bytes. */
static void job_sample(VmRunner *run, VmJob *j) {
	_cleanup_domain_ virDomainPtr dom = NULL;
	virTypedParameterPtr params = NULL;
	unsigned long long done = 0, total = 0;
	int type, n = 0;

	if (!run->plan->on_bytes || (j->func != job_save && j->func != job_restore))
		return;
	dom = lookup(run->conn, j->result);
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

/* Between two waits of run_jobs() (lock held): a cancel request aborts every running job;
 * the running saves and restores report how far they got. */
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

/*
 * Runs the jobs, at most parallel at a time, each on its own thread and connection. Progress
 * is reported on this (the caller's) thread. Returns the first job's error, after all ended.
 */
static int run_jobs(VmRunner *run, VmJob *jobs, size_t n, unsigned parallel) {
	size_t next = 0, active = 0, finished = 0;
	int ret = 0;

	pthread_mutex_lock(&run->lock);
	while (finished < n) {
		bool reaped = false;
		usec_t now, wake;

		/* Cancelled: the jobs not started yet never start. */
		while (run->cancelled && next < n) {
			jobs[next].done = jobs[next].joined = true;
			next++;
			finished++;
		}
		while (active < parallel && next < n) {
			VmJob *j = &jobs[next++];
			int k;

			bool changed = j->result->outcome != j->start_outcome;

			j->runner = run;
			j->result->outcome = j->start_outcome;
			if (j->timeout)
				j->deadline = vm_now(CLOCK_MONOTONIC) + j->timeout;
			pthread_mutex_unlock(&run->lock);
			if (changed)
				report(run, j->result);
			k = pthread_create(&j->thread, NULL, job_thread, j);
			if (k != 0) {
				(void)fail(j->result, -k, "cannot start a worker thread: %s",
				           strerror(k));
				report(run, j->result);
			}
			pthread_mutex_lock(&run->lock);
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

		for (size_t i = 0; i < next; i++) {
			VmJob *j = &jobs[i];

			if (!j->started || !j->done || j->joined)
				continue;
			pthread_mutex_unlock(&run->lock);
			pthread_join(j->thread, NULL);
			if (j->timed_out && j->r < 0)
				vm_result_set_error(
				        j->result, "timed out after %.1f s, aborted: %s",
				        (double)j->timeout / 1e6, strempty(j->result->error));
			report(run, j->result);
			pthread_mutex_lock(&run->lock);
			if (j->r < 0 && ret == 0)
				ret = j->r;
			j->joined = true;
			active--;
			finished++;
			reaped = true;
		}
		if (reaped || finished == n)
			continue;

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
	pthread_mutex_unlock(&run->lock);
	return run->cancelled ? -EINTR : ret;
}

static int runner_init(VmRunner *run, virConnectPtr conn, const VmPlan *plan, VmProgressCb cb,
                       void *userdata) {
	pthread_condattr_t attr;

	*run = (VmRunner){
		.conn = conn, .plan = plan ?: &default_plan, .cb = cb, .userdata = userdata
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

static void runner_done(VmRunner *run) {
	if (!run->uri)
		return;
	pthread_mutex_destroy(&run->lock);
	pthread_cond_destroy(&run->cond);
	free(run->uri);
	run->uri = NULL;
}

/* ---- per-VM steps (run on workers; restore_domain also inline for vm_restore_one()) ---- */

static int job_save(VmJob *j, virConnectPtr c) {
	VmResult *r = j->result;
	_cleanup_domain_ virDomainPtr dom = lookup(c, r);
	unsigned flags = VIR_DOMAIN_SAVE_PAUSED;
	usec_t t0;
	int k;

	if (!dom)
		return fail(r, -ENOENT, "domain disappeared: %s", vm_last_error());
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
	if (k < 0 && (flags & VIR_DOMAIN_SAVE_BYPASS_CACHE) && last_error_is_unsupported(false)) {
		flags &= ~VIR_DOMAIN_SAVE_BYPASS_CACHE;
		k = vm_ops->managed_save(dom, flags);
	}
	r->save_time = vm_now(CLOCK_MONOTONIC) - t0;
	r->save_finished_at = vm_now(CLOCK_REALTIME);
	if (k < 0) {
		char *why = strdup(vm_last_error());

		keep_ram_abandon(dom, r);
		k = fail(r, -EIO, "managed save failed: %s", strna(why));
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
	_cleanup_domain_ virDomainPtr dom = lookup(c, r);
	usec_t timeout = plan_shutdown_timeout(j->runner->plan);
	usec_t deadline = vm_now(CLOCK_MONOTONIC) + timeout;

	if (!dom)
		return fail(r, -ENOENT, "domain disappeared: %s", vm_last_error());
	if (vm_ops->shutdown(dom) < 0)
		return fail(r, -EIO, "graceful shutdown request failed: %s", vm_last_error());
	for (;;) {
		int state;

		if (get_state(dom, &state) < 0)
			return fail(r, -EIO, "cannot query state: %s", vm_last_error());
		if (state_is_inactive(state))
			break;
		if (vm_now(CLOCK_MONOTONIC) >= deadline)
			return fail(r, -ETIMEDOUT, "did not shut down within %.1f s",
			            (double)timeout / 1e6);
		usleep(SHUTDOWN_POLL_USEC);
	}
	r->outcome = VM_OUTCOME_SHUT_DOWN;
	return 0;
}

/* Puts an active domain into its state before the commit: resumed when it was running, paused
 * when it was paused (a driver without VIR_DOMAIN_START_PAUSED may start it running). */
static int settle_state(virDomainPtr dom, VmResult *r) {
	int state;

	if (get_state(dom, &state) < 0)
		return fail(r, -EIO, "cannot query state: %s", vm_last_error());
	if (state_is_running(r->orig_state) && state == VIR_DOMAIN_PAUSED &&
	    vm_ops->resume(dom) < 0)
		return fail(r, -EIO, "resume failed: %s", vm_last_error());
	if (r->orig_state == VIR_DOMAIN_PAUSED && state_is_running(state) &&
	    vm_ops->suspend(dom) < 0)
		return fail(r, -EIO, "pause failed: %s", vm_last_error());
	return 0;
}

/*
 * Brings one VM back after the handoff: already active (survived, or something else restored
 * it) -> resume; managed save image -> restore paused, then resume; shut down by us -> start.
 * A failed restore never removes the image: it stays for `upgradectl restore-vm`.
 */
static int restore_domain(virConnectPtr c, const VmPlan *plan, VmResult *r) {
	_cleanup_domain_ virDomainPtr dom = lookup(c, r);
	int state, has, k;
	usec_t t0;

	if (!dom)
		return fail(r, -ENOENT, "domain not found: %s", vm_last_error());
	if (get_state(dom, &state) < 0)
		return fail(r, -EIO, "cannot query state: %s", vm_last_error());

	if (state_is_inactive(state)) {
		has = vm_ops->has_managed_save(dom, 0);
		if (has < 0)
			return fail(r, -EIO, "cannot look for a managed save image: %s",
			            vm_last_error());
		if (has == 0 && r->strategy != VM_STRATEGY_SHUTDOWN)
			return fail(r, -ENODATA,
			            "no managed save image: the VM's state was not preserved");
		if (r->strategy == VM_STRATEGY_KEEP_RAM) {
			_cleanup_free_ char *why = NULL;

			k = keep_ram_verify(r, &why);
			if (k < 0)
				return fail(
				        r, k,
				        "kept RAM cannot be trusted, the VM is not resumed: %s; "
				        "nothing was deleted (managed save image and RAM file "
				        "kept for 'upgradectl restore-vm %s')",
				        strna(why), r->name);
		}

		r->restore_started_at = vm_now(CLOCK_REALTIME);
		t0 = vm_now(CLOCK_MONOTONIC);
		k = has ? start_saved(dom, r) : start_domain(dom);
		r->restore_time = vm_now(CLOCK_MONOTONIC) - t0;
		if (k < 0) {
			if (has)
				return fail(r, k,
				            "restore from the managed save image failed: %s; the "
				            "image is kept, retry with 'upgradectl restore-vm %s'",
				            vm_last_error(), r->name);
			return fail(r, k, "start failed: %s", vm_last_error());
		}
		event(plan, r, VM_EVENT_RESTORED);
	}

	if (state_is_running(r->orig_state))
		event(plan, r, VM_EVENT_RESUMING);
	k = settle_state(dom, r);
	if (k < 0)
		return k;
	if (state_is_running(r->orig_state)) {
		r->resumed_at = vm_now(CLOCK_REALTIME);
		event(plan, r, VM_EVENT_RESUMED);
		r->outcome = VM_OUTCOME_RESUMED;
	} else
		r->outcome = VM_OUTCOME_RESTORED;
	if (r->strategy == VM_STRATEGY_KEEP_RAM)
		keep_ram_restored(dom, r);
	return 0;
}

/* Whether c still reaches libvirtd: a connection whose libvirtd went away looks alive until it
 * is used, one round trip tells. */
static bool connection_alive(virConnectPtr c) {
	unsigned long version;

	if (vm_ops->connect_alive)
		return vm_ops->connect_alive(c) > 0;
	return virConnectIsAlive(c) == 1 && virConnectGetLibVersion(c, &version) == 0;
}

/*
 * A restore whose libvirtd went away (killed, restarted) says nothing about the domain: the
 * restarted libvirtd may have finished the restore by itself (the VM is there, paused, its
 * image gone) or not (still saved). Wait for libvirtd and settle the domain from what it is
 * now: active -> resumed; saved -> restored again; neither -> reported lost. Never a paused VM
 * reported as restored, never a running one reported as failed.
 */
static int job_restore(VmJob *j, virConnectPtr c) {
	VmResult *r = j->result;
	_cleanup_free_ char *first = NULL, *connect_error = NULL;
	virConnectPtr again;
	int k;

	k = restore_domain(c, j->runner->plan, r);
	if (k >= 0 || connection_alive(c))
		return k;
	again = connect_retry(j->runner->uri, &connect_error);
	if (!again)
		return k;
	first = TAKE_PTR(r->error);
	k = restore_domain(again, j->runner->plan, r);
	virConnectClose(again);
	if (k < 0)
		vm_result_set_error(r,
		                    "libvirtd went away during the restore (%s); once it was "
		                    "back: %s",
		                    strna(first), strna(r->error));
	return k;
}

/*
 * Puts one VM back into its state before the commit, from whatever state it is in now:
 * saved -> restore from the image; save incomplete -> drop a stale image; paused -> resume
 * (if it was running); shut down -> start. The image is removed only once the VM is active.
 */
static int rollback_domain(virConnectPtr c, VmResult *r) {
	_cleanup_domain_ virDomainPtr dom = lookup(c, r);
	int state, has, k;

	if (!dom)
		return fail(r, -ENOENT, "rollback: domain not found: %s", vm_last_error());
	if (get_state(dom, &state) < 0)
		return fail(r, -EIO, "rollback: cannot query state: %s", vm_last_error());

	switch (r->strategy) {
	case VM_STRATEGY_CHECKPOINT:
	case VM_STRATEGY_KEEP_RAM:
		has = vm_ops->has_managed_save(dom, 0);
		if (has < 0)
			return fail(r, -EIO, "rollback: cannot look for a managed save image: %s",
			            vm_last_error());
		if (state_is_inactive(state)) {
			if (has == 0)
				return fail(r, -ENODATA,
				            "rollback: domain is shut off and has no managed save "
				            "image");
			usec_t t0 = vm_now(CLOCK_MONOTONIC);

			r->restore_started_at = vm_now(CLOCK_REALTIME);
			k = start_saved(dom, r);
			r->restore_time = vm_now(CLOCK_MONOTONIC) - t0;
			if (k < 0)
				return fail(
				        r, k,
				        "rollback: restore from the managed save image failed: %s; "
				        "the image is kept",
				        vm_last_error());
			has = vm_ops->has_managed_save(dom, 0);
		}
		/* Running on its RAM again (or never stopped): the link and the entry go. */
		keep_ram_abandon(dom, r);
		/* Active now: an image left behind is stale and would win at the next start. */
		if (has > 0 && vm_ops->managed_save_remove(dom, 0) < 0)
			return fail(r, -EIO, "rollback: cannot remove the managed save image: %s",
			            vm_last_error());
		k = settle_state(dom, r);
		if (k < 0)
			return k;
		break;
	case VM_STRATEGY_SHUTDOWN:
		if (state_is_inactive(state) && state_is_running(r->orig_state)) {
			k = start_domain(dom);
			if (k < 0)
				return fail(r, k, "rollback: start failed: %s", vm_last_error());
			k = settle_state(dom, r);
			if (k < 0)
				return k;
		}
		break;
	default:
		return 0;
	}

	if (get_state(dom, &state) < 0)
		return fail(r, -EIO, "rollback: cannot query state: %s", vm_last_error());
	if (state_is_running(state) != state_is_running(r->orig_state) || state_is_inactive(state))
		return fail(r, -EIO, "rollback: domain is %s, expected %s",
		            strna(vm_state_to_string(state)),
		            strna(vm_state_to_string(r->orig_state)));
	/* What the failed attempt cost this VM: its downtime ends here. */
	if (r->paused_at && state_is_running(r->orig_state))
		r->resumed_at = vm_now(CLOCK_REALTIME);
	r->outcome = VM_OUTCOME_ROLLED_BACK;
	return 0;
}

static int job_rollback(VmJob *j, virConnectPtr c) {
	return rollback_domain(c, j->result);
}

/* ---- public entry points ---- */

/* A VM that cannot keep its RAM: checkpointed instead when the configuration allows it, the
 * reason recorded; otherwise the plan is refused. */
static int prepare_keep_ram(virDomainPtr dom, const KeepRamConfig *cfg, VmResult *r) {
	char *blocker = keep_ram_blocker(dom, cfg);

	if (!blocker)
		return 0;
	if (!cfg || !cfg->fallback_checkpoint) {
		int k = fail(r, -EINVAL, "cannot keep its RAM: %s", blocker);
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
			k = fail(r, -EINVAL, "empty VM name in plan");
		else if (!vm_strategy_to_string(e->strategy))
			k = fail(r, -EINVAL, "invalid strategy %d", (int)e->strategy);
		for (size_t p = 0; k == 0 && p < i; p++)
			if (streq_ptr(plan->entries[p].name, e->name))
				k = fail(r, -EINVAL, "VM '%s' listed twice in plan", e->name);
		if (k < 0) {
			ret = ret ?: k;
			continue;
		}

		dom = virDomainLookupByName(conn, e->name);
		if (!dom) {
			ret = ret ?: fail(r, -ENOENT, "no such domain '%s'", e->name);
			continue;
		}
		if (virDomainGetUUIDString(dom, r->uuid) < 0 || get_state(dom, &state) < 0) {
			ret = ret ?: fail(r, -EIO, "cannot query domain: %s", vm_last_error());
			continue;
		}
		r->orig_state = state;

		if (e->strategy == VM_STRATEGY_IGNORE || state_is_inactive(state)) {
			r->outcome = VM_OUTCOME_IGNORED;
			continue;
		}
		if (!state_is_running(state) && state != VIR_DOMAIN_PAUSED)
			k = fail(r, -EBUSY, "domain is %s, its state cannot be preserved",
			         strna(vm_state_to_string(state)));
		else if (e->strategy == VM_STRATEGY_KEEP_RAM &&
		         (k = prepare_keep_ram(dom, plan->keep_ram, r)) < 0)
			;
		else if ((r->strategy == VM_STRATEGY_CHECKPOINT ||
		          r->strategy == VM_STRATEGY_KEEP_RAM) &&
		         (blocker = vm_checkpoint_blocker(dom)))
			k = fail(r, -EINVAL, "cannot checkpoint: %s", blocker);
		else if (e->strategy == VM_STRATEGY_SHUTDOWN && state == VIR_DOMAIN_PAUSED)
			k = fail(r, -EBUSY, "a paused domain cannot shut down gracefully");
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
	r = runner_init(&run, conn, plan, cb, userdata);
	if (r < 0)
		return r;
	run.bypass_cache = !plan->no_bypass_cache &&
	                   dir_supports_direct_io(plan->save_dir ?: VM_SAVE_DIR_DEFAULT);

	/* 2. Pause every VM to preserve, back to back: the blackout starts together. Progress
	 *    is reported after the last pause so that a slow listener cannot stretch it. */
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
		if (state_is_running(v->orig_state)) {
			dom = lookup(conn, v);
			if (!dom) {
				r = fail(v, -EIO, "pause failed: %s", vm_last_error());
				break;
			}
			event(plan, v, VM_EVENT_PAUSING);
			r = pause_domain(dom, plan_pause_timeout(plan), v);
			if (r < 0)
				break;
			event(plan, v, VM_EVENT_PAUSED);
		}
		v->paused_at = vm_now(CLOCK_REALTIME);
		v->outcome = VM_OUTCOME_PAUSED;
	}
	for (size_t i = 0; i < results->n; i++)
		if (results->items[i].outcome != VM_OUTCOME_PENDING)
			report(&run, &results->items[i]);
	if (r < 0)
		goto rollback;

	/* 3. Graceful shutdowns and managed saves, concurrently. */
	jobs = calloc(results->n ?: 1, sizeof(VmJob));
	if (!jobs) {
		r = -ENOMEM;
		goto rollback;
	}
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
				                  .func = job_save,
				                  .start_outcome = VM_OUTCOME_SAVING,
				                  .timeout = plan_save_timeout(plan) };
	}
	r = run_jobs(&run, jobs, n_jobs, plan_parallel(plan));
	if (r < 0)
		goto rollback;
	runner_done(&run);
	return 0;

rollback:
	runner_done(&run);
	(void)vm_rollback(conn, results,
	                  r == -EINTR ? "the commit was cancelled" : first_error(results, &reason),
	                  cb, userdata);
	return r;
}

int vm_rollback(virConnectPtr conn, VmResults *results, const char *reason, VmProgressCb cb,
                void *userdata) {
	_cleanup_free_ VmJob *jobs = NULL;
	VmRunner run;
	size_t n_jobs = 0;
	int r;

	if (!conn || !results)
		return -EINVAL;
	jobs = calloc(results->n ?: 1, sizeof(VmJob));
	if (!jobs)
		return -ENOMEM;
	r = runner_init(&run, conn, NULL, cb, userdata);
	if (r < 0)
		return r;

	for (size_t i = 0; i < results->n; i++) {
		VmResult *v = &results->items[i];

		if (v->strategy == VM_STRATEGY_IGNORE || v->outcome == VM_OUTCOME_IGNORED ||
		    !v->uuid[0])
			continue;
		/* The VM that caused the rollback keeps its own error as the reason. */
		if (!v->error && reason)
			vm_result_set_error(v, "rolled back: %s", reason);
		jobs[n_jobs++] =
		        (VmJob){ .result = v, .func = job_rollback, .start_outcome = v->outcome };
	}
	r = run_jobs(&run, jobs, n_jobs, plan_parallel(run.plan));
	runner_done(&run);
	return r;
}

int vm_restore_all(virConnectPtr conn, const VmPlan *plan, VmResults *results, VmProgressCb cb,
                   void *userdata) {
	_cleanup_free_ VmJob *jobs = NULL;
	VmRunner run;
	size_t n_jobs = 0;
	int r;

	if (!conn || !results)
		return -EINVAL;
	plan = plan ?: &default_plan;
	jobs = calloc(results->n ?: 1, sizeof(VmJob));
	if (!jobs)
		return -ENOMEM;
	r = runner_init(&run, conn, plan, cb, userdata);
	if (r < 0)
		return r;

	for (size_t i = 0; i < results->n; i++) {
		VmResult *v = &results->items[i];

		if (((v->strategy == VM_STRATEGY_CHECKPOINT ||
		      v->strategy == VM_STRATEGY_KEEP_RAM) &&
		     v->outcome == VM_OUTCOME_SAVED) ||
		    (v->strategy == VM_STRATEGY_SHUTDOWN && v->outcome == VM_OUTCOME_SHUT_DOWN &&
		     state_is_running(v->orig_state)))
			jobs[n_jobs++] = (VmJob){ .result = v,
				                  .func = job_restore,
				                  .start_outcome = VM_OUTCOME_RESTORING,
				                  .timeout = plan_restore_timeout(plan) };
	}
	r = run_jobs(&run, jobs, n_jobs, plan_parallel(plan));
	runner_done(&run);
	return r;
}

int vm_restore_one(virConnectPtr conn, const char *name, VmResult *r) {
	_cleanup_domain_ virDomainPtr dom = NULL;
	VmResult local = { .strategy = VM_STRATEGY_CHECKPOINT,
		           .orig_state = VIR_DOMAIN_RUNNING,
		           .saved_bytes = -1 };
	int state, has, k;

	if (!conn || !name || !*name || (r && r->name && !streq(r->name, name)))
		return -EINVAL;
	dom = virDomainLookupByName(conn, name);
	if (!dom)
		return -ENOENT;
	if (get_state(dom, &state) < 0)
		return -EIO;
	if (!state_is_inactive(state))
		return -EBUSY;
	has = vm_ops->has_managed_save(dom, 0);
	if (has < 0)
		return -EIO;
	if (has == 0)
		return -ENODATA;

	if (!r) {
		r = &local;
		r->name = (char *)name;
	} else if (!r->name) {
		r->name = strdup(name);
		if (!r->name)
			return -ENOMEM;
	}
	if (virDomainGetUUIDString(dom, r->uuid) < 0) {
		k = -EIO;
		goto finish;
	}
	/* A keep-ram record restores on its kept RAM (guard first); anything else as a checkpoint:
	 * without a record the hook still links a kept RAM file back, under its own guard. */
	if (r->strategy != VM_STRATEGY_KEEP_RAM || !r->kept_ram)
		r->strategy = VM_STRATEGY_CHECKPOINT;
	free(r->error);
	r->error = NULL;
	k = restore_domain(conn, NULL, r);
finish:
	if (r == &local)
		free(local.error);
	return k;
}
