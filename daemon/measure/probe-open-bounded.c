/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "macros.h"
#include "probe-open-bounded.h"

/* Shared by the waiter and the opener thread; the last one to let go frees it. */
typedef struct Opening {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned refs;
	bool done;
	ProbeOpenFunc open;
	ProbeOptions opts;
	char *btf_path; /* the options' string, owned: the waiter may be gone */
	Probe *probe;
	int r;
} Opening;

static void opening_unref(Opening *o) {
	bool last;

	pthread_mutex_lock(&o->lock);
	last = --o->refs == 0;
	pthread_mutex_unlock(&o->lock);
	if (!last)
		return;
	probe_close(o->probe); /* only when nobody took it: a late open */
	pthread_cond_destroy(&o->cond);
	pthread_mutex_destroy(&o->lock);
	free(o->btf_path);
	free(o);
}

static void *opening_run(void *userdata) {
	Opening *o = userdata;
	Probe *p = NULL;
	int r = o->open(&o->opts, &p);

	pthread_mutex_lock(&o->lock);
	o->probe = p;
	o->r = r;
	o->done = true;
	pthread_cond_signal(&o->cond);
	pthread_mutex_unlock(&o->lock);
	opening_unref(o);
	return NULL;
}

static Opening *opening_new(ProbeOpenFunc open, const ProbeOptions *opts) {
	pthread_condattr_t ca;
	Opening *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->opts = *opts;
	if (opts->btf_path) {
		o->btf_path = strdup(opts->btf_path);
		if (!o->btf_path) {
			free(o);
			return NULL;
		}
		o->opts.btf_path = o->btf_path;
	}
	o->open = open ?: probe_open;
	o->refs = 2;
	pthread_mutex_init(&o->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&o->cond, &ca);
	pthread_condattr_destroy(&ca);
	return o;
}

int probe_open_bounded(ProbeOpenFunc open, const ProbeOptions *opts, uint64_t timeout_usec,
                       Probe **ret) {
	pthread_attr_t attr;
	struct timespec deadline;
	pthread_t t;
	Opening *o;
	int r = 0;

	if (!opts || !ret)
		return -EINVAL;
	o = opening_new(open, opts);
	if (!o)
		return -ENOMEM;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	r = pthread_create(&t, &attr, opening_run, o);
	pthread_attr_destroy(&attr);
	if (r != 0) {
		o->refs = 1;
		opening_unref(o);
		return -r;
	}

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += (time_t)(timeout_usec / 1000000);
	deadline.tv_nsec += (long)(timeout_usec % 1000000) * 1000;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&o->lock);
	r = 0;
	while (!o->done && r != ETIMEDOUT)
		r = pthread_cond_timedwait(&o->cond, &o->lock, &deadline);
	if (o->done) {
		*ret = TAKE_PTR(o->probe);
		r = o->r;
	} else
		r = -ETIMEDOUT;
	pthread_mutex_unlock(&o->lock);
	opening_unref(o);
	return r;
}
