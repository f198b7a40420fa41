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
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "vm.h"
#include "vm-internal.h"
#include "deadline-call.h"
#include "macros.h"

static usec_t call_timeout_usec = VM_CALL_TIMEOUT_DEFAULT;
static usec_t libvirt_wait_usec = VM_LIBVIRT_WAIT_DEFAULT;
static bool event_loop_running;
static atomic_uint detached_calls; /* threads of detached calls not finished yet */

/* One virConnectOpen(): its answer, or the connection closed by whoever frees it last. */
typedef struct OpenCall {
	char *uri;
	virConnectPtr conn;
	char *error;
} OpenCall;

static void open_call_free(void *data) {
	OpenCall *o = data;

	if (o->conn)
		virConnectClose(o->conn);
	free(o->uri);
	free(o->error);
	free(o);
}

static void open_call_run(void *data) {
	OpenCall *o = data;

	o->conn = vm_ops->connect_open(o->uri);
	if (!o->conn)
		o->error = strdup(vm_last_error());
}

static void close_call_run(void *data) {
	virConnectClose(data);
}

static void *event_thread(void *arg) {
	for (;;)
		if (virEventRunDefaultImpl() < 0)
			usleep(100000);
	return NULL;
}

atomic_uint *vm_detached_calls(void) {
	return &detached_calls;
}

/* ---- public entry points ---- */

int vm_close_bounded(virConnectPtr conn, usec_t timeout) {
	int r;

	if (!conn)
		return 0;
	r = deadline_call(
	        &(const DeadlineCall){ .run = close_call_run, .pending = &detached_calls }, conn,
	        timeout);
	if (r < 0 && r != -ETIMEDOUT) {
		virConnectClose(conn); /* no thread: closed here, unbounded */
		return 0;
	}
	return r;
}

int vm_wait_detached(usec_t timeout) {
	usec_t deadline = vm_now(CLOCK_MONOTONIC) + timeout;

	while (atomic_load(&detached_calls) > 0) {
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
	OpenCall *o;
	int r;

	o = calloc(1, sizeof(*o));
	if (!o || !(o->uri = strdup(uri))) {
		free(o);
		return -ENOMEM;
	}
	r = deadline_call(&(const DeadlineCall){ .run = open_call_run,
	                                         .orphan = open_call_free,
	                                         .pending = &detached_calls },
	                  o, call_timeout_usec);
	if (r == -ETIMEDOUT) {
		if (ret_error && asprintf(ret_error, "libvirtd did not answer within %.1f s",
		                          (double)call_timeout_usec / 1e6) < 0)
			*ret_error = NULL;
		return r; /* o is the thread's now */
	}
	if (r >= 0 && !o->conn) {
		r = -ECONNREFUSED;
		if (ret_error)
			*ret_error = strdup(strna(o->error));
	} else if (r >= 0)
		*ret = TAKE_PTR(o->conn);
	open_call_free(o);
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
