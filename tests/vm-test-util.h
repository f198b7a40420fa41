/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Shared by the VM library's unit tests (test-vm.c, test-vm-rollback.c, test-vm-restore.c):
 * libvirt's test driver (test:///default, one shared in-process host per process while a
 * connection is open), failures injected through the VmOps seam at each libvirt call, a trace of
 * libvirt calls and VmEvents, and the fixture: domains "test", "a", "b" running.
 */

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "vm.h"

#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* ---- failure injection ---- */

typedef enum Op {
	OP_CONNECT,
	OP_SUSPEND,
	OP_SUSPEND_HANG, /* the pause blocks until the test releases it (QEMU not answering) */
	OP_RESUME,
	OP_SAVE,
	OP_SAVE_HANG,      /* managed save blocks until the job is aborted */
	OP_SAVE_NO_BYPASS, /* the driver does not support VIR_DOMAIN_SAVE_BYPASS_CACHE */
	OP_SAVE_SLOW,      /* managed save takes 200 ms: saves overlap when run in parallel */
	OP_SAVE_REMOVE,
	OP_HAS_SAVE,
	OP_HAS_SAVE_STALE, /* reports an image on an active domain once */
	OP_CREATE,
	OP_SHUTDOWN,
	OP_SHUTDOWN_IGNORED, /* the guest ignores the shutdown request */
	OP_GET_STATE,
	OP_CREATE_LOST,        /* libvirtd goes away during the restore, which it finished */
	OP_CREATE_LOST_UNDONE, /* libvirtd goes away during the restore, which it did not do */
	_OP_MAX,
} Op;

static struct {
	const char *target[_OP_MAX]; /* domain name, "*" for all, NULL for none */
	unsigned calls[_OP_MAX];
	bool aborted;
	bool released;               /* OP_SUSPEND_HANG: QEMU answers again */
	unsigned late_resumes;       /* resumes of b after its hung pause was released */
	unsigned connect_failures;   /* the next connects that fail (libvirtd restarting) */
	unsigned save_flags;         /* of the last managed save that went through */
	virConnectPtr lost;          /* OP_CREATE_LOST*: the connection whose libvirtd went */
	bool lost_for_good;          /* OP_CREATE_LOST*: libvirtd does not come back */
	unsigned saving, max_saving; /* concurrent managed saves, now and at most */
	pthread_mutex_t lock;
	pthread_cond_t cond;
} inj = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static inline bool hit(Op op, virDomainPtr dom) {
	const char *t = inj.target[op];

	if (!t)
		return false;
	if (strcmp(t, "*") != 0 && (!dom || strcmp(t, virDomainGetName(dom)) != 0))
		return false;
	__atomic_add_fetch(&inj.calls[op], 1, __ATOMIC_SEQ_CST);
	return true;
}

/* Fails like libvirt does: the calling thread's last libvirt error names the injection (looking
 * up a snapshot that does not exist is a public way to set one). */
static inline int injected(const char *what, virDomainPtr dom) {
	char msg[128];
	virDomainSnapshotPtr s;

	snprintf(msg, sizeof(msg), "injected %s failure on %s", what, virDomainGetName(dom));
	s = virDomainSnapshotLookupByName(dom, msg, 0);
	if (s)
		virDomainSnapshotFree(s);
	return -1;
}

/* ---- a trace of libvirt calls and VmEvents, in the order they happened ---- */

static struct {
	bool on;
	char entries[64][48];
	size_t n;
	pthread_t main_thread;
	pthread_mutex_t lock;
} trace = { .lock = PTHREAD_MUTEX_INITIALIZER };

static inline void trace_add(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void trace_add(const char *fmt, ...) {
	va_list ap;

	pthread_mutex_lock(&trace.lock);
	if (trace.on && trace.n < 64) {
		va_start(ap, fmt);
		vsnprintf(trace.entries[trace.n++], sizeof(trace.entries[0]), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&trace.lock);
}

/* Index of entry in the trace, -1 when absent. */
static inline ssize_t trace_index(const char *entry) {
	for (size_t i = 0; i < trace.n; i++)
		if (strcmp(trace.entries[i], entry) == 0)
			return (ssize_t)i;
	return -1;
}

static inline virConnectPtr fake_connect_open(const char *uri) {
	unsigned left = __atomic_load_n(&inj.connect_failures, __ATOMIC_SEQ_CST);

	while (left > 0 && !__atomic_compare_exchange_n(&inj.connect_failures, &left, left - 1,
	                                                false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		;
	if (left > 0 || hit(OP_CONNECT, NULL))
		return virConnectOpen("test:///injected-connect-failure.xml");
	return virConnectOpen(uri);
}

static inline int fake_connect_alive(virConnectPtr c) {
	return c != __atomic_load_n(&inj.lost, __ATOMIC_SEQ_CST);
}

static inline int fake_suspend(virDomainPtr d) {
	trace_add("suspend:%s", virDomainGetName(d));
	if (hit(OP_SUSPEND_HANG, d)) {
		pthread_mutex_lock(&inj.lock);
		while (!inj.released)
			pthread_cond_wait(&inj.cond, &inj.lock);
		pthread_mutex_unlock(&inj.lock);
	}
	return hit(OP_SUSPEND, d) ? injected("suspend", d) : virDomainSuspend(d);
}

static inline int fake_resume(virDomainPtr d) {
	int r;

	trace_add("resume:%s", virDomainGetName(d));
	r = hit(OP_RESUME, d) ? injected("resume", d) : virDomainResume(d);
	if (r == 0 && __atomic_load_n(&inj.released, __ATOMIC_SEQ_CST))
		__atomic_add_fetch(&inj.late_resumes, 1, __ATOMIC_SEQ_CST);
	return r;
}

static inline int fake_managed_save(virDomainPtr d, unsigned flags) {
	if (hit(OP_SAVE, d))
		return injected("managed save", d);
	if (hit(OP_SAVE_HANG, d)) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 10;
		pthread_mutex_lock(&inj.lock);
		while (!inj.aborted)
			if (pthread_cond_timedwait(&inj.cond, &inj.lock, &ts) != 0)
				break;
		pthread_mutex_unlock(&inj.lock);
		return injected("managed save (aborted)", d);
	}
	if ((flags & VIR_DOMAIN_SAVE_BYPASS_CACHE) && hit(OP_SAVE_NO_BYPASS, d)) {
		(void)virDomainAbortJob(d); /* the test driver: VIR_ERR_NO_SUPPORT */
		return -1;
	}
	__atomic_store_n(&inj.save_flags, flags, __ATOMIC_SEQ_CST);
	if (hit(OP_SAVE_SLOW, d)) {
		unsigned now = __atomic_add_fetch(&inj.saving, 1, __ATOMIC_SEQ_CST);
		unsigned max = __atomic_load_n(&inj.max_saving, __ATOMIC_SEQ_CST);
		int r;

		while (now > max &&
		       !__atomic_compare_exchange_n(&inj.max_saving, &max, now, false,
		                                    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
			;
		usleep(200000);
		r = virDomainManagedSave(d, flags);
		__atomic_sub_fetch(&inj.saving, 1, __ATOMIC_SEQ_CST);
		return r;
	}
	return virDomainManagedSave(d, flags);
}

static inline int fake_managed_save_remove(virDomainPtr d, unsigned flags) {
	return hit(OP_SAVE_REMOVE, d) ? injected("managed save remove", d)
	                              : virDomainManagedSaveRemove(d, flags);
}

static inline int fake_has_managed_save(virDomainPtr d, unsigned flags) {
	if (hit(OP_HAS_SAVE, d))
		return injected("managed save query", d);
	if (virDomainIsActive(d) == 1 && hit(OP_HAS_SAVE_STALE, d)) {
		inj.target[OP_HAS_SAVE_STALE] = NULL; /* once */
		return 1;
	}
	return virDomainHasManagedSaveImage(d, flags);
}

static inline int fake_create(virDomainPtr d, unsigned flags) {
	trace_add("create:%s", virDomainGetName(d));
	if (hit(OP_CREATE_LOST, d) || hit(OP_CREATE_LOST_UNDONE, d)) {
		/* The restarted libvirtd finished the restore (QEMU's driver leaves it paused)
		 * or not; the caller only sees its connection gone. */
		if (inj.target[OP_CREATE_LOST] && virDomainCreate(d) == 0)
			(void)virDomainSuspend(d);
		inj.target[OP_CREATE_LOST] = inj.target[OP_CREATE_LOST_UNDONE] = NULL; /* once */
		__atomic_store_n(&inj.lost, virDomainGetConnect(d), __ATOMIC_SEQ_CST);
		if (inj.lost_for_good)
			__atomic_store_n(&inj.connect_failures, 1000, __ATOMIC_SEQ_CST);
		return injected("create (libvirtd went away)", d);
	}
	return hit(OP_CREATE, d) ? injected("create", d) : virDomainCreateWithFlags(d, flags);
}

static inline int fake_shutdown(virDomainPtr d) {
	if (hit(OP_SHUTDOWN, d))
		return injected("shutdown", d);
	if (hit(OP_SHUTDOWN_IGNORED, d))
		return 0;
	return virDomainShutdown(d);
}

static inline int fake_abort_job(virDomainPtr d) {
	pthread_mutex_lock(&inj.lock);
	inj.aborted = true;
	pthread_cond_broadcast(&inj.cond);
	pthread_mutex_unlock(&inj.lock);
	return 0;
}

static inline int fake_get_state(virDomainPtr d, int *state, int *reason, unsigned flags) {
	return hit(OP_GET_STATE, d) ? injected("state query", d)
	                            : virDomainGetState(d, state, reason, flags);
}

static const VmOps fake_ops = {
	.connect_open = fake_connect_open,
	.suspend = fake_suspend,
	.resume = fake_resume,
	.managed_save = fake_managed_save,
	.managed_save_remove = fake_managed_save_remove,
	.has_managed_save = fake_has_managed_save,
	.create = fake_create,
	.shutdown = fake_shutdown,
	.abort_job = fake_abort_job,
	.get_state = fake_get_state,
	.connect_alive = fake_connect_alive,
};

/* ---- fixture: the test host with domains "test" (built in), "a", "b" running ---- */

static virConnectPtr conn;
static char progress[64][64];
static size_t n_progress;

static inline void on_progress(const VmResult *r, void *userdata) {
	assert_ptr_equal(userdata, &conn);
	if (n_progress < 64)
		snprintf(progress[n_progress++], sizeof(progress[0]), "%s:%s", r->name,
		         vm_outcome_to_string(r->outcome));
}

static inline ssize_t progress_index(const char *entry, bool last) {
	ssize_t found = -1;

	for (size_t i = 0; i < n_progress; i++)
		if (strcmp(progress[i], entry) == 0) {
			found = (ssize_t)i;
			if (!last)
				break;
		}
	return found;
}

static inline void define_domain(const char *name, const char *extra, bool start) {
	char xml[1024];
	virDomainPtr d;

	snprintf(xml, sizeof(xml),
	         "<domain type='test'><name>%s</name><memory>65536</memory><vcpu>1</vcpu>"
	         "<os><type>hvm</type></os><devices>%s</devices></domain>",
	         name, extra);
	d = virDomainDefineXML(conn, xml);
	assert_non_null(d);
	if (start)
		assert_int_equal(virDomainCreate(d), 0);
	virDomainFree(d);
}

static inline void silence(void *userdata, virErrorPtr e) {
}

static inline int setup(void **state) {
	virSetErrorFunc(NULL, silence);
	conn = virConnectOpen("test:///default");
	assert_non_null(conn);
	define_domain("a", "", true);
	define_domain("b", "", true);
	memset(&inj, 0, offsetof(typeof(inj), lock));
	trace.on = false;
	trace.n = 0;
	n_progress = 0;
	vm_set_ops(&fake_ops);
	vm_set_connect_retry(0);
	return 0;
}

static inline int teardown(void **state) {
	/* A detached call still holding the connection would keep the test host, and the next
	 * setup would find its domains defined already. */
	assert_int_equal(vm_wait_detached(10 * 1000000ULL), 0);
	vm_set_ops(NULL);
	vm_set_connect_retry(VM_CONNECT_RETRY_DEFAULT);
	/* The test host is reset once its last connection closes. */
	virConnectClose(conn);
	conn = NULL;
	return 0;
}

static inline int dom_state(const char *name) {
	virDomainPtr d = virDomainLookupByName(conn, name);
	int state = -1, reason;

	assert_non_null(d);
	assert_int_equal(virDomainGetState(d, &state, &reason, 0), 0);
	virDomainFree(d);
	return state;
}

static inline int dom_has_image(const char *name) {
	virDomainPtr d = virDomainLookupByName(conn, name);
	int r;

	assert_non_null(d);
	r = virDomainHasManagedSaveImage(d, 0);
	virDomainFree(d);
	return r;
}

static inline void dom_suspend(const char *name) {
	virDomainPtr d = virDomainLookupByName(conn, name);

	assert_non_null(d);
	assert_int_equal(virDomainSuspend(d), 0);
	virDomainFree(d);
}

/* The rollback guarantee: every listed VM running, no managed save image anywhere. */
static inline void assert_all_running_no_image(void) {
	const char *names[] = { "test", "a", "b" };

	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(dom_state(names[i]), VIR_DOMAIN_RUNNING);
		assert_int_equal(dom_has_image(names[i]), 0);
	}
}

static inline const VmResult *find(const VmResults *r, const char *name) {
	const VmResult *v = vm_results_find(r, name);

	assert_non_null(v);
	return v;
}

static inline void assert_error_contains(const VmResult *v, const char *needle) {
	assert_non_null(v->error);
	if (!strstr(v->error, needle))
		fail_msg("error of %s is \"%s\", expected it to contain \"%s\"", v->name, v->error,
		         needle);
}

/* With VM_JSON_DUMP_DIR set, writes the JSON a scenario produced there, for the check against
 * docs/vm-results.schema.json (tests/integration/vm/check-vm-json-schema). */
static inline void dump_json(struct json_object *j, const char *tag) {
	const char *dir = getenv("VM_JSON_DUMP_DIR");
	char path[512];

	if (!dir)
		return;
	snprintf(path, sizeof(path), "%s/%s.json", dir, tag);
	assert_int_equal(json_object_to_file_ext(path, j, JSON_C_TO_STRING_PLAIN), 0);
}

static inline void dump_results(const VmResults *r, const char *tag) {
	struct json_object *j = vm_results_to_json(r);

	dump_json(j, tag);
	json_object_put(j);
}

/* A saved domain started and paused behind the orchestration's back: it is active at the
 * restore, as a VM that survived the handoff. */
static inline void dom_start_paused(const char *name) {
	virDomainPtr d = virDomainLookupByName(conn, name);

	assert_non_null(d);
	assert_int_equal(virDomainCreate(d), 0);
	assert_int_equal(virDomainSuspend(d), 0);
	virDomainFree(d);
}

/* A test case with the fixture around it. */
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

static const VmPlanEntry plan_ab[] = {
	{ "a", VM_STRATEGY_CHECKPOINT },
	{ "b", VM_STRATEGY_CHECKPOINT },
	{ "test", VM_STRATEGY_CHECKPOINT },
};
