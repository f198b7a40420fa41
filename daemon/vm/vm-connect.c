/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Connections with deadlines. libvirt's client waits for libvirtd's answer without a bound:
 * a libvirtd that accepts the connection and never answers (hung, stopped, a wrong socket)
 * blocks the caller forever. Two bounds cover every call:
 *   - opening: virConnectOpen() runs on a thread of its own; the caller waits at most the
 *     call timeout, and a connection that arrives later is closed by that thread;
 *   - calls on an open connection: libvirt's keepalive (virConnectSetKeepAlive(), which needs
 *     libvirt's event loop running: vm_event_loop_start()) closes a connection whose libvirtd
 *     stopped answering, and the call in flight fails with an error.
 */

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "vm.h"
#include "vm-internal.h"
#include "macros.h"

static usec_t call_timeout_usec = VM_CALL_TIMEOUT_DEFAULT;
static usec_t libvirt_wait_usec = VM_LIBVIRT_WAIT_DEFAULT;
static bool event_loop_running;
static unsigned detached_calls; /* threads of detached calls not finished yet */

typedef struct OpenCall {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char *uri;
	virConnectPtr conn;
	char *error;
	unsigned refs;
	bool done, abandoned;
} OpenCall;

static void open_call_unref(OpenCall *o) {
	bool last;

	pthread_mutex_lock(&o->lock);
	last = --o->refs == 0;
	pthread_mutex_unlock(&o->lock);
	if (!last)
		return;
	if (o->conn)
		virConnectClose(o->conn);
	free(o->uri);
	free(o->error);
	pthread_mutex_destroy(&o->lock);
	pthread_cond_destroy(&o->cond);
	free(o);
}

static void *open_thread(void *arg) {
	OpenCall *o = arg;
	virConnectPtr c = vm_ops->connect_open(o->uri);
	char *error = c ? NULL : strdup(vm_last_error());

	pthread_mutex_lock(&o->lock);
	o->conn = c; /* closed with o when the caller gave up */
	o->error = error;
	o->done = true;
	pthread_cond_broadcast(&o->cond);
	pthread_mutex_unlock(&o->lock);
	open_call_unref(o);
	vm_detached_end();
	return NULL;
}

static void *event_thread(void *arg) {
	for (;;)
		if (virEventRunDefaultImpl() < 0)
			usleep(100000);
	return NULL;
}

void vm_detached_begin(void) {
	__atomic_add_fetch(&detached_calls, 1, __ATOMIC_SEQ_CST);
}

void vm_detached_end(void) {
	__atomic_sub_fetch(&detached_calls, 1, __ATOMIC_SEQ_CST);
}

/* ---- public entry points ---- */

int vm_wait_detached(usec_t timeout) {
	usec_t deadline = vm_now(CLOCK_MONOTONIC) + timeout;

	while (__atomic_load_n(&detached_calls, __ATOMIC_SEQ_CST) > 0) {
		if (vm_now(CLOCK_MONOTONIC) >= deadline)
			return -ETIMEDOUT;
		usleep(1000);
	}
	return 0;
}

void vm_set_call_timeout(usec_t usec) {
	call_timeout_usec = usec ?: VM_CALL_TIMEOUT_DEFAULT;
}

usec_t vm_call_timeout(void) {
	return call_timeout_usec;
}

void vm_set_libvirt_wait(usec_t usec) {
	libvirt_wait_usec = usec ?: VM_LIBVIRT_WAIT_DEFAULT;
}

usec_t vm_libvirt_wait(void) {
	return libvirt_wait_usec;
}

int vm_event_loop_start(void) {
	pthread_attr_t attr;
	pthread_t t;
	int k;

	if (event_loop_running)
		return 0;
	if (virEventRegisterDefaultImpl() < 0)
		return -EIO;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	k = pthread_create(&t, &attr, event_thread, NULL);
	pthread_attr_destroy(&attr);
	if (k != 0)
		return -k;
	event_loop_running = true;
	return 0;
}

int vm_connect(const char *uri, virConnectPtr *ret, char **ret_error) {
	usec_t deadline = vm_now(CLOCK_MONOTONIC) + call_timeout_usec;
	struct timespec ts = { .tv_sec = (time_t)(deadline / 1000000ULL),
		               .tv_nsec = (long)(deadline % 1000000ULL) * 1000L };
	pthread_condattr_t attr;
	pthread_t thread;
	OpenCall *o;
	int r = 0, k;

	o = calloc(1, sizeof(*o));
	if (!o || !(o->uri = strdup(uri))) {
		free(o);
		return -ENOMEM;
	}
	pthread_mutex_init(&o->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&o->cond, &attr);
	pthread_condattr_destroy(&attr);
	o->refs = 2;
	vm_detached_begin();
	k = pthread_create(&thread, NULL, open_thread, o);
	if (k != 0) {
		vm_detached_end();
		o->refs = 1;
		open_call_unref(o);
		return -k;
	}
	pthread_detach(thread);

	pthread_mutex_lock(&o->lock);
	while (!o->done)
		if (pthread_cond_timedwait(&o->cond, &o->lock, &ts) == ETIMEDOUT && !o->done)
			break;
	if (!o->done) {
		o->abandoned = true;
		r = -ETIMEDOUT;
		if (ret_error && asprintf(ret_error, "libvirtd did not answer within %.1f s",
		                          (double)call_timeout_usec / 1e6) < 0)
			*ret_error = NULL;
	} else if (!o->conn) {
		r = -ECONNREFUSED;
		if (ret_error)
			*ret_error = strdup(strna(o->error));
	} else
		*ret = TAKE_PTR(o->conn);
	pthread_mutex_unlock(&o->lock);
	open_call_unref(o);
	if (r < 0)
		return r;

	/* interval * (count + 1) without an answer closes the connection. */
	if (event_loop_running) {
		int interval = (int)MAX(call_timeout_usec / 3 / 1000000ULL, 1ULL);

		if (virConnectSetKeepAlive(*ret, interval, 2) < 0)
			virResetLastError(); /* a driver without keepalive (test:///) */
	}
	return 0;
}
