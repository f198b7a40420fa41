/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "deadline-call.h"
#include "time-util.h"

/* Shared by the waiter and the thread; the last one to let go frees it. */
typedef struct Waited {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned refs;
	bool done, abandoned;
	DeadlineCall call;
	void *data;
} Waited;

static void waited_unref(Waited *w) {
	bool last;

	pthread_mutex_lock(&w->lock);
	last = --w->refs == 0;
	pthread_mutex_unlock(&w->lock);
	if (!last)
		return;
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

static void *waited_thread(void *arg) {
	Waited *w = arg;
	atomic_uint *pending = w->call.pending;
	bool abandoned;

	w->call.run(w->data);
	pthread_mutex_lock(&w->lock);
	w->done = true;
	abandoned = w->abandoned;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	if (abandoned && w->call.orphan)
		w->call.orphan(w->data);
	waited_unref(w);
	if (pending)
		atomic_fetch_sub(pending, 1);
	return NULL;
}

static struct timespec deadline_after(uint64_t timeout_usec) {
	uint64_t deadline = now_monotonic_usec() + timeout_usec;

	return (struct timespec){ .tv_sec = (time_t)(deadline / 1000000ULL),
		                  .tv_nsec = (long)(deadline % 1000000ULL) * 1000L };
}

int deadline_call(const DeadlineCall *call, void *data, uint64_t timeout_usec) {
	struct timespec ts = deadline_after(timeout_usec);
	pthread_condattr_t ca;
	pthread_attr_t ta;
	pthread_t thread;
	Waited *w;
	int r = 0, k;

	if (!call || !call->run)
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	*w = (Waited){ .refs = 2, .call = *call, .data = data };
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (call->pending)
		atomic_fetch_add(call->pending, 1);
	pthread_attr_init(&ta);
	pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
	k = pthread_create(&thread, &ta, waited_thread, w);
	pthread_attr_destroy(&ta);
	if (k != 0) {
		if (call->pending)
			atomic_fetch_sub(call->pending, 1);
		w->refs = 1;
		waited_unref(w);
		return -k;
	}

	pthread_mutex_lock(&w->lock);
	while (!w->done)
		if (pthread_cond_timedwait(&w->cond, &w->lock, &ts) == ETIMEDOUT && !w->done) {
			w->abandoned = true;
			r = -ETIMEDOUT;
			break;
		}
	pthread_mutex_unlock(&w->lock);
	waited_unref(w);
	return r;
}
