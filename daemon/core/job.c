/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Worker threads for long work, the daemon's state lock, and the hand-over of work back to the
 * event loop (job.h). Threads rather than helper processes: the work is libvirt calls that
 * need the daemon's state (records, the measurement's probe) around them, and libvirt's client
 * is thread-safe; docs/architecture.md argues the choice.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <systemd/sd-event.h>

#include "job.h"
#include "log.h"
#include "macros.h"

struct Job {
	atomic_uint refs;
	char *name;
	JobRun run;
	JobDone done;
	void *userdata;
	sd_event_source *deadline; /* the loop's */
	atomic_bool cancelled;
	atomic_bool abandoned;
	bool done_called; /* the loop's */
	int result;
};

typedef struct Deferred {
	void (*fn)(void *data);
	void *data;
	void (*free_data)(void *data);
	struct Deferred *next;
} Deferred;

static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static Deferred *queue_head, *queue_tail;
static int wake_fd = -EBADF;
static sd_event *loop_event;
static pthread_t loop_thread;
static bool loop_thread_known;
static atomic_uint n_jobs;
static _Thread_local Job *current;

/* ---- constructors / destructors ---- */

static void job_unref(Job *j) {
	if (!j || atomic_fetch_sub(&j->refs, 1) != 1)
		return;
	sd_event_source_disable_unref(j->deadline);
	free(j->name);
	free(j);
}

/* ---- helpers ---- */

/* Runs everything queued so far, in order (on the loop, lock held). */
static int on_wake(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
	uint64_t v;
	Deferred *d;

	(void)!read(fd, &v, sizeof(v));
	pthread_mutex_lock(&queue_lock);
	d = queue_head;
	queue_head = queue_tail = NULL;
	pthread_mutex_unlock(&queue_lock);
	while (d) {
		Deferred *next = d->next;

		d->fn(d->data);
		if (d->free_data)
			d->free_data(d->data);
		free(d);
		d = next;
	}
	return 0;
}

static void job_call_done(Job *j, int r) {
	if (j->done_called)
		return;
	j->done_called = true;
	j->deadline = sd_event_source_disable_unref(j->deadline);
	atomic_fetch_sub(&n_jobs, 1);
	if (j->done)
		j->done(j, r, j->userdata);
}

/* The worker returned (deferred to the loop). When it was the last job, the daemon goes idle:
 * give the pages of the heap's free chunks back to the kernel. With one arena, an update's
 * short-lived allocations leave free holes between the long-lived ones (the kept records),
 * which glibc never returns by itself, only its top; 1,000 Stage/Cancel cycles kept 1.4-1.8
 * MiB of such free heap resident, with the heap in use flat (docs/reliability.md, "Soak").
 * malloc_trim() walks the free lists once, well under a millisecond for this heap. */
static void job_finished(void *data) {
	Job *j = data;

	if (atomic_load(&j->abandoned))
		log_debug("Job %s returned after its deadline (%d), ignored.", j->name, j->result);
	job_call_done(j, j->result);
	if (atomic_load(&n_jobs) == 0)
		(void)malloc_trim(0);
}

static int on_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
	Job *j = userdata;

	log_warning("Job %s did not finish within its deadline, abandoning it.", j->name);
	atomic_store(&j->abandoned, true);
	j->cancelled = true;
	job_call_done(j, -ETIMEDOUT);
	job_unref(j); /* the loop's reference */
	return 0;
}

static void job_finished_unref(void *data) {
	Job *j = data;

	/* Abandoned jobs gave their loop reference up already. */
	if (j->done_called && !atomic_load(&j->abandoned))
		job_unref(j);
	job_unref(j); /* the worker's */
}

static void *job_thread(void *arg) {
	Job *j = arg;
	int r;

	current = j;
	pthread_mutex_lock(&state_lock);
	r = atomic_load(&j->abandoned) ? -ETIMEDOUT : j->run(j, j->userdata);
	j->result = r;
	if (job_defer(job_finished, j, job_finished_unref) < 0)
		log_error("Job %s: cannot report its end to the event loop.", j->name);
	pthread_mutex_unlock(&state_lock);
	current = NULL;
	return NULL;
}

/* ---- public entry points ---- */

int job_attach_event(sd_event *e) {
	int r;

	if (loop_event == e)
		return 0;
	if (wake_fd < 0) {
		wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (wake_fd < 0)
			return -errno;
	}
	/* A new loop (tests run one a case): the queue moves to it. */
	r = sd_event_add_io(e, NULL, wake_fd, EPOLLIN, on_wake, NULL);
	if (r < 0)
		return r;
	loop_event = e;
	loop_thread = pthread_self();
	loop_thread_known = true;
	return 0;
}

int job_loop_run(sd_event *e) {
	int r = 0, code = 0;

	loop_thread = pthread_self();
	loop_thread_known = true;
	pthread_mutex_lock(&state_lock);
	while (sd_event_get_state(e) != SD_EVENT_FINISHED) {
		r = sd_event_prepare(e);
		if (r == 0) {
			/* The only moment workers may take the lock: the loop waits. */
			pthread_mutex_unlock(&state_lock);
			r = sd_event_wait(e, UINT64_MAX);
			pthread_mutex_lock(&state_lock);
		}
		if (r > 0)
			r = sd_event_dispatch(e);
		if (r < 0)
			break;
	}
	pthread_mutex_unlock(&state_lock);
	if (r < 0)
		return r;
	(void)sd_event_get_exit_code(e, &code);
	return code;
}

bool job_on_loop(void) {
	return !loop_thread_known || pthread_equal(pthread_self(), loop_thread);
}

int job_defer(void (*fn)(void *data), void *data, void (*free_data)(void *data)) {
	Deferred *d;
	uint64_t one = 1;

	if (wake_fd < 0)
		return -ENOTCONN;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	*d = (Deferred){ .fn = fn, .data = data, .free_data = free_data };
	pthread_mutex_lock(&queue_lock);
	if (queue_tail)
		queue_tail->next = d;
	else
		queue_head = d;
	queue_tail = d;
	pthread_mutex_unlock(&queue_lock);
	if (write(wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		return -errno;
	return 0;
}

typedef struct Waited {
	void (*fn)(void *data);
	void *data;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
} Waited;

static void waited_run(void *userdata) {
	Waited *w = userdata;

	w->fn(w->data);
	pthread_mutex_lock(&w->lock);
	w->done = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

void job_defer_wait(void (*fn)(void *data), void *data) {
	Waited w = { .fn = fn, .data = data };

	if (!current) {
		fn(data);
		return;
	}
	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.cond, NULL);
	if (job_defer(waited_run, &w, NULL) >= 0) {
		pthread_mutex_unlock(&state_lock);
		pthread_mutex_lock(&w.lock);
		while (!w.done)
			pthread_cond_wait(&w.cond, &w.lock);
		pthread_mutex_unlock(&w.lock);
		pthread_mutex_lock(&state_lock);
	}
	pthread_mutex_destroy(&w.lock);
	pthread_cond_destroy(&w.cond);
}

int job_start(const char *name, uint64_t timeout_usec, JobRun run, JobDone done, void *userdata,
              Job **ret) {
	pthread_attr_t attr;
	pthread_t thread;
	Job *j;
	int r;

	if (!loop_event)
		return -ENOTCONN;
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->name = strdup(name);
	if (!j->name) {
		free(j);
		return -ENOMEM;
	}
	j->run = run;
	j->done = done;
	j->userdata = userdata;
	atomic_init(&j->refs, 2); /* the loop's (until done ran) and the worker's */
	if (timeout_usec > 0) {
		r = sd_event_add_time_relative(loop_event, &j->deadline, CLOCK_MONOTONIC,
		                               timeout_usec, 0, on_deadline, j);
		if (r < 0) {
			free(j->name);
			free(j);
			return r;
		}
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	r = -pthread_create(&thread, &attr, job_thread, j);
	pthread_attr_destroy(&attr);
	if (r < 0) {
		sd_event_source_disable_unref(j->deadline);
		free(j->name);
		free(j);
		return r;
	}
	atomic_fetch_add(&n_jobs, 1);
	if (ret)
		*ret = j;
	return 0;
}

const char *job_name(const Job *j) {
	return j ? j->name : NULL;
}

Job *job_current(void) {
	return current;
}

void job_cancel(Job *j) {
	if (j)
		j->cancelled = true;
}

bool job_is_cancelled(const Job *j) {
	return j && j->cancelled;
}

const atomic_bool *job_cancel_flag(Job *j) {
	return j ? &j->cancelled : NULL;
}

unsigned job_count(void) {
	return atomic_load(&n_jobs);
}

void job_blocking_begin(void) {
	if (current)
		pthread_mutex_unlock(&state_lock);
}

int job_blocking_end(void) {
	if (!current)
		return 0;
	pthread_mutex_lock(&state_lock);
	return atomic_load(&current->abandoned) ? -ETIMEDOUT : 0;
}
