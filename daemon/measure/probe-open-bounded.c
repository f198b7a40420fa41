/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "deadline-call.h"
#include "macros.h"
#include "probe-open-bounded.h"

/* One open: its options and its answer, kept by whoever holds it last. */
typedef struct Opening {
	ProbeOpenFunc open;
	ProbeOptions opts;
	char *btf_path; /* the options' string, owned: the waiter may be gone */
	Probe *probe;
	int r;
} Opening;

static void opening_free(Opening *o) {
	free(o->btf_path);
	free(o);
}

static void opening_run(void *userdata) {
	Opening *o = userdata;

	o->r = o->open(&o->opts, &o->probe);
}

/* The waiter gave up: a late open closes what it opened by itself. */
static void opening_orphan(void *userdata) {
	Opening *o = userdata;

	probe_close(o->probe);
	opening_free(o);
}

static Opening *opening_new(ProbeOpenFunc open, const ProbeOptions *opts) {
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
	return o;
}

int probe_open_bounded(ProbeOpenFunc open, const ProbeOptions *opts, uint64_t timeout_usec,
                       Probe **ret) {
	static const DeadlineCall call = { .run = opening_run, .orphan = opening_orphan };
	Opening *o;
	int r;

	if (!opts || !ret)
		return -EINVAL;
	o = opening_new(open, opts);
	if (!o)
		return -ENOMEM;
	r = deadline_call(&call, o, timeout_usec);
	if (r == -ETIMEDOUT)
		return r; /* o is the thread's now */
	if (r == 0) {
		*ret = TAKE_PTR(o->probe);
		r = o->r;
	}
	opening_free(o);
	return r;
}
