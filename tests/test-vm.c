/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The VM orchestration against libvirt's test driver (test:///default, one shared in-process
 * host per process while a connection is open), with failures injected through the VmOps seam
 * at each libvirt call. Every failure case ends by checking the rollback guarantee: every VM in
 * its original state, no managed save image left.
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

static bool hit(Op op, virDomainPtr dom) {
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
static int injected(const char *what, virDomainPtr dom) {
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

static void trace_add(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void trace_add(const char *fmt, ...) {
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
static ssize_t trace_index(const char *entry) {
	for (size_t i = 0; i < trace.n; i++)
		if (strcmp(trace.entries[i], entry) == 0)
			return (ssize_t)i;
	return -1;
}

static virConnectPtr fake_connect_open(const char *uri) {
	unsigned left = __atomic_load_n(&inj.connect_failures, __ATOMIC_SEQ_CST);

	while (left > 0 && !__atomic_compare_exchange_n(&inj.connect_failures, &left, left - 1,
	                                                false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		;
	if (left > 0 || hit(OP_CONNECT, NULL))
		return virConnectOpen("test:///injected-connect-failure.xml");
	return virConnectOpen(uri);
}

static int fake_connect_alive(virConnectPtr c) {
	return c != __atomic_load_n(&inj.lost, __ATOMIC_SEQ_CST);
}

static int fake_suspend(virDomainPtr d) {
	trace_add("suspend:%s", virDomainGetName(d));
	if (hit(OP_SUSPEND_HANG, d)) {
		pthread_mutex_lock(&inj.lock);
		while (!inj.released)
			pthread_cond_wait(&inj.cond, &inj.lock);
		pthread_mutex_unlock(&inj.lock);
	}
	return hit(OP_SUSPEND, d) ? injected("suspend", d) : virDomainSuspend(d);
}

static int fake_resume(virDomainPtr d) {
	int r;

	trace_add("resume:%s", virDomainGetName(d));
	r = hit(OP_RESUME, d) ? injected("resume", d) : virDomainResume(d);
	if (r == 0 && __atomic_load_n(&inj.released, __ATOMIC_SEQ_CST))
		__atomic_add_fetch(&inj.late_resumes, 1, __ATOMIC_SEQ_CST);
	return r;
}

static int fake_managed_save(virDomainPtr d, unsigned flags) {
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

static int fake_managed_save_remove(virDomainPtr d, unsigned flags) {
	return hit(OP_SAVE_REMOVE, d) ? injected("managed save remove", d)
	                              : virDomainManagedSaveRemove(d, flags);
}

static int fake_has_managed_save(virDomainPtr d, unsigned flags) {
	if (hit(OP_HAS_SAVE, d))
		return injected("managed save query", d);
	if (virDomainIsActive(d) == 1 && hit(OP_HAS_SAVE_STALE, d)) {
		inj.target[OP_HAS_SAVE_STALE] = NULL; /* once */
		return 1;
	}
	return virDomainHasManagedSaveImage(d, flags);
}

static int fake_create(virDomainPtr d, unsigned flags) {
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

static int fake_shutdown(virDomainPtr d) {
	if (hit(OP_SHUTDOWN, d))
		return injected("shutdown", d);
	if (hit(OP_SHUTDOWN_IGNORED, d))
		return 0;
	return virDomainShutdown(d);
}

static int fake_abort_job(virDomainPtr d) {
	pthread_mutex_lock(&inj.lock);
	inj.aborted = true;
	pthread_cond_broadcast(&inj.cond);
	pthread_mutex_unlock(&inj.lock);
	return 0;
}

static int fake_get_state(virDomainPtr d, int *state, int *reason, unsigned flags) {
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

static void on_progress(const VmResult *r, void *userdata) {
	assert_ptr_equal(userdata, &conn);
	if (n_progress < 64)
		snprintf(progress[n_progress++], sizeof(progress[0]), "%s:%s", r->name,
		         vm_outcome_to_string(r->outcome));
}

static ssize_t progress_index(const char *entry, bool last) {
	ssize_t found = -1;

	for (size_t i = 0; i < n_progress; i++)
		if (strcmp(progress[i], entry) == 0) {
			found = (ssize_t)i;
			if (!last)
				break;
		}
	return found;
}

static void define_domain(const char *name, const char *extra, bool start) {
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

static void silence(void *userdata, virErrorPtr e) {
}

static int setup(void **state) {
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

static int teardown(void **state) {
	vm_set_ops(NULL);
	vm_set_connect_retry(VM_CONNECT_RETRY_DEFAULT);
	/* The test host is reset once its last connection closes. */
	virConnectClose(conn);
	conn = NULL;
	return 0;
}

static int dom_state(const char *name) {
	virDomainPtr d = virDomainLookupByName(conn, name);
	int state = -1, reason;

	assert_non_null(d);
	assert_int_equal(virDomainGetState(d, &state, &reason, 0), 0);
	virDomainFree(d);
	return state;
}

static int dom_has_image(const char *name) {
	virDomainPtr d = virDomainLookupByName(conn, name);
	int r;

	assert_non_null(d);
	r = virDomainHasManagedSaveImage(d, 0);
	virDomainFree(d);
	return r;
}

static void dom_suspend(const char *name) {
	virDomainPtr d = virDomainLookupByName(conn, name);

	assert_non_null(d);
	assert_int_equal(virDomainSuspend(d), 0);
	virDomainFree(d);
}

/* The rollback guarantee: every listed VM running, no managed save image anywhere. */
static void assert_all_running_no_image(void) {
	const char *names[] = { "test", "a", "b" };

	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(dom_state(names[i]), VIR_DOMAIN_RUNNING);
		assert_int_equal(dom_has_image(names[i]), 0);
	}
}

static const VmResult *find(const VmResults *r, const char *name) {
	const VmResult *v = vm_results_find(r, name);

	assert_non_null(v);
	return v;
}

static void assert_error_contains(const VmResult *v, const char *needle) {
	assert_non_null(v->error);
	if (!strstr(v->error, needle))
		fail_msg("error of %s is \"%s\", expected it to contain \"%s\"", v->name, v->error,
		         needle);
}

/* With VM_JSON_DUMP_DIR set, writes the JSON a scenario produced there, for the check against
 * docs/vm-results.schema.json (tests/integration/vm/check-vm-json-schema). */
static void dump_json(struct json_object *j, const char *tag) {
	const char *dir = getenv("VM_JSON_DUMP_DIR");
	char path[512];

	if (!dir)
		return;
	snprintf(path, sizeof(path), "%s/%s.json", dir, tag);
	assert_int_equal(json_object_to_file_ext(path, j, JSON_C_TO_STRING_PLAIN), 0);
}

static void dump_results(const VmResults *r, const char *tag) {
	struct json_object *j = vm_results_to_json(r);

	dump_json(j, tag);
	json_object_put(j);
}

/* A saved domain started and paused behind the orchestration's back: it is active at the
 * restore, as a VM that survived the handoff. */
static void dom_start_paused(const char *name) {
	virDomainPtr d = virDomainLookupByName(conn, name);

	assert_non_null(d);
	assert_int_equal(virDomainCreate(d), 0);
	assert_int_equal(virDomainSuspend(d), 0);
	virDomainFree(d);
}

static const VmPlanEntry plan_ab[] = {
	{ "a", VM_STRATEGY_CHECKPOINT },
	{ "b", VM_STRATEGY_CHECKPOINT },
	{ "test", VM_STRATEGY_CHECKPOINT },
};

/* ---- tests ---- */

static void test_strategy_strings(void **state) {
	for (int s = 0; s < _VM_STRATEGY_MAX; s++)
		assert_int_equal(vm_strategy_from_string(vm_strategy_to_string(s)), s);
	for (int o = 0; o < _VM_OUTCOME_MAX; o++)
		assert_int_equal(vm_outcome_from_string(vm_outcome_to_string(o)), o);
	assert_int_equal(vm_strategy_from_string("suspend"), _VM_STRATEGY_INVALID);
	assert_int_equal(vm_strategy_from_string(NULL), _VM_STRATEGY_INVALID);
	assert_null(vm_strategy_to_string(_VM_STRATEGY_MAX));
	assert_null(vm_outcome_to_string(-1));
}

static void test_inventory_facts(void **state) {
	VmList *l = NULL;
	virDomainPtr t;
	const VmInfo *v;
	struct json_object *j;

	define_domain("dev",
	              "<hostdev mode='subsystem' type='pci' managed='yes'><source>"
	              "<address domain='0' bus='6' slot='7' function='0'/></source></hostdev>",
	              false);
	define_domain("off", "", false);
	t = virDomainCreateXML(conn,
	                       "<domain type='test'><name>tr</name><memory>32768</memory>"
	                       "<os><type>hvm</type></os></domain>",
	                       0);
	assert_non_null(t);
	virDomainFree(t);

	assert_int_equal(vm_inventory(NULL, &l), -EINVAL);
	assert_int_equal(vm_inventory(conn, &l), 0);
	assert_int_equal(l->n, 6);

	v = vm_list_find(l, "a");
	assert_non_null(v);
	assert_true(v->active && v->persistent && v->checkpoint_possible);
	assert_int_equal(v->state, VIR_DOMAIN_RUNNING);
	assert_int_equal(v->memory_kib, 65536);
	assert_int_equal(v->vcpus, 1);
	assert_null(v->checkpoint_blocker);

	v = vm_list_find(l, "tr");
	assert_non_null(v);
	assert_false(v->persistent);
	assert_false(v->checkpoint_possible);
	assert_non_null(strstr(v->checkpoint_blocker, "transient"));

	v = vm_list_find(l, "dev");
	assert_non_null(v);
	assert_false(v->checkpoint_possible);
	assert_non_null(strstr(v->checkpoint_blocker, "<hostdev>"));

	v = vm_list_find(l, "off");
	assert_non_null(v);
	assert_false(v->active);
	assert_int_equal(v->state, VIR_DOMAIN_SHUTOFF);
	assert_null(vm_list_find(l, "nope"));

	j = vm_list_to_json(l);
	assert_int_equal(json_object_array_length(j), 6);
	dump_json(j, "inventory");
	assert_non_null(strstr(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN),
	                       "\"checkpoint_blocker\":\"host device"));
	json_object_put(j);
	vm_list_free(l);
}

static void test_checkpoint_restore_ok(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3 };
	VmResults *r = NULL;
	const VmResult *a, *b, *t;
	ssize_t last_pause, first_save;

	assert_int_equal(vm_checkpoint_all(conn, &plan, on_progress, &conn, &r), 0);
	a = find(r, "a");
	b = find(r, "b");
	t = find(r, "test");
	assert_int_equal(a->outcome, VM_OUTCOME_SAVED);
	assert_int_equal(b->outcome, VM_OUTCOME_SAVED);
	assert_int_equal(t->outcome, VM_OUTCOME_SAVED);
	assert_null(a->error);
	assert_int_equal(a->orig_state, VIR_DOMAIN_RUNNING);
	assert_int_equal(dom_state("a"), VIR_DOMAIN_SHUTOFF);
	assert_int_equal(dom_has_image("a"), 1);
	assert_int_equal(dom_has_image("b"), 1);
	assert_int_equal(dom_state("test"), VIR_DOMAIN_SHUTOFF);
	/* The test driver writes no file: size unknown. */
	assert_int_equal(a->saved_bytes, -1);
	assert_true(a->paused_at > 0 && a->save_started_at >= a->paused_at);
	assert_true(a->save_finished_at >= a->save_started_at);

	/* Every pause is reported before the first save starts. */
	last_pause = MAX(progress_index("a:paused", true), progress_index("b:paused", true));
	first_save = progress_index("a:saving", false);
	assert_true(last_pause >= 0 && first_save > last_pause);
	assert_true(progress_index("b:saved", true) > first_save);

	dump_results(r, "checkpointed");
	n_progress = 0;
	assert_int_equal(vm_restore_all(conn, NULL, r, on_progress, &conn), 0);
	assert_all_running_no_image();
	dump_results(r, "restored");
	for (size_t i = 0; i < r->n; i++) {
		assert_int_equal(r->items[i].outcome, VM_OUTCOME_RESUMED);
		assert_null(r->items[i].error);
		assert_true(r->items[i].resumed_at >= r->items[i].paused_at);
		assert_int_equal(vm_result_downtime(&r->items[i]),
		                 r->items[i].resumed_at - r->items[i].paused_at);
	}
	assert_true(progress_index("a:restoring", false) >= 0);
	assert_true(progress_index("a:resumed", false) > progress_index("a:restoring", false));
	vm_results_free(r);
}

static const char *vm_state_to_string_for_test(const char *name) {
	virDomainPtr d = virDomainLookupByName(conn, name);
	int st = -1, reason;

	if (d) {
		(void)virDomainGetState(d, &st, &reason, 0);
		virDomainFree(d);
	}
	return st == VIR_DOMAIN_PAUSED || st == VIR_DOMAIN_RUNNING ? "(active)" : "(inactive)";
}

/* The VmEvent callback: where it ran, and the domain's state at RESTORED. */
static void on_event(const VmResult *r, VmEvent e, void *userdata) {
	bool main_thread = pthread_equal(pthread_self(), trace.main_thread);
	const char *state = "";

	assert_ptr_equal(userdata, &trace);
	if (e == VM_EVENT_RESTORED)
		state = vm_state_to_string_for_test(r->name);
	trace_add("%s:%s%s%s", vm_event_to_string(e), r->name, main_thread ? "" : "@worker", state);
}

static void test_events_at_the_moment(void **state) {
	VmPlan plan = {
		.entries = plan_ab, .n_entries = 3, .on_event = on_event, .event_userdata = &trace
	};
	VmResults *r = NULL;

	trace.main_thread = pthread_self();
	trace.on = true;
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	/* Pauses: on the caller's thread, right around virDomainSuspend. */
	for (size_t i = 0; i < 3; i++) {
		char a[48], b[48], c[48];

		snprintf(a, sizeof(a), "pausing:%s", plan_ab[i].name);
		snprintf(b, sizeof(b), "suspend:%s", plan_ab[i].name);
		snprintf(c, sizeof(c), "paused:%s", plan_ab[i].name);
		assert_true(trace_index(a) >= 0);
		assert_int_equal(trace_index(b), trace_index(a) + 1);
		assert_int_equal(trace_index(c), trace_index(b) + 1);
	}
	assert_int_equal(trace.n, 9);

	/* Restores: on the workers; restored (active: paused with libvirt's QEMU driver, the
	 * test driver ignores VIR_DOMAIN_START_PAUSED and needs no resume) -> resuming ->
	 * resumed. */
	trace.n = 0;
	assert_int_equal(vm_restore_all(conn, &plan, r, NULL, NULL), 0);
	for (size_t i = 0; i < 3; i++) {
		const char *n = plan_ab[i].name;
		char cr[48], rd[48], rg[48], ru[48];

		snprintf(cr, sizeof(cr), "create:%s", n);
		snprintf(rd, sizeof(rd), "restored:%s@worker(active)", n);
		snprintf(rg, sizeof(rg), "resuming:%s@worker", n);
		snprintf(ru, sizeof(ru), "resumed:%s@worker", n);
		assert_true(trace_index(cr) >= 0);
		assert_true(trace_index(rd) > trace_index(cr));
		assert_true(trace_index(rg) > trace_index(rd));
		assert_true(trace_index(ru) > trace_index(rg));
	}
	assert_all_running_no_image();
	vm_results_free(r);
}

static void test_events_not_on_failure(void **state) {
	VmPlan plan = {
		.entries = plan_ab, .n_entries = 3, .on_event = on_event, .event_userdata = &trace
	};
	VmResults *r = NULL;

	trace.main_thread = pthread_self();
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	trace.on = true;
	/* a's restore fails: no moment of a restored or resumed VM is announced; test is found
	 * active and paused (it survived), its resume fails: it was announced as resuming,
	 * never as resumed. */
	inj.target[OP_CREATE] = "a";
	inj.target[OP_RESUME] = "test";
	dom_start_paused("test");
	assert_int_equal(vm_restore_all(conn, &plan, r, NULL, NULL), -EIO);
	assert_int_equal(trace_index("restored:a@worker(active)"), -1);
	assert_int_equal(trace_index("resuming:a@worker"), -1);
	assert_int_equal(trace_index("resumed:a@worker"), -1);
	assert_true(trace_index("restored:b@worker(active)") >= 0);
	assert_true(trace_index("resumed:b@worker") > trace_index("resuming:b@worker"));
	assert_true(trace_index("resuming:test@worker") >= 0);
	assert_int_equal(trace_index("resumed:test@worker"), -1);
	assert_null(vm_event_to_string(_VM_EVENT_MAX));
	assert_null(vm_event_to_string((VmEvent)-1));
	vm_results_free(r);
}

static void test_checkpoint_bypass_cache(void **state) {
	const VmPlanEntry e[] = { { "a", VM_STRATEGY_CHECKPOINT } };
	VmPlan plan = { .entries = e, .n_entries = 1, .save_dir = "/tmp" };
	VmResults *r = NULL;

	/* A directory that takes O_DIRECT: the page cache is bypassed, the image comes back
	 * paused. */
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	assert_int_equal(inj.save_flags, VIR_DOMAIN_SAVE_PAUSED | VIR_DOMAIN_SAVE_BYPASS_CACHE);
	assert_int_equal(vm_restore_all(conn, NULL, r, NULL, NULL), 0);
	vm_results_free(r);

	plan.no_bypass_cache = true;
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	assert_int_equal(inj.save_flags, VIR_DOMAIN_SAVE_PAUSED);
	assert_int_equal(vm_restore_all(conn, NULL, r, NULL, NULL), 0);
	vm_results_free(r);

	/* The driver refuses the flag: saved without it rather than rolled back. */
	plan.no_bypass_cache = false;
	inj.target[OP_SAVE_NO_BYPASS] = "a";
	inj.save_flags = 0;
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	assert_int_equal(inj.calls[OP_SAVE_NO_BYPASS], 1);
	assert_int_equal(inj.save_flags, VIR_DOMAIN_SAVE_PAUSED);
	assert_int_equal(find(r, "a")->outcome, VM_OUTCOME_SAVED);
	assert_int_equal(vm_restore_all(conn, NULL, r, NULL, NULL), 0);
	assert_all_running_no_image();
	vm_results_free(r);
}

static void test_checkpoint_parallel_limit(void **state) {
	const VmPlanEntry e[] = {
		{ "a", VM_STRATEGY_CHECKPOINT },
		{ "b", VM_STRATEGY_CHECKPOINT },
		{ "test", VM_STRATEGY_CHECKPOINT },
	};
	VmPlan plan = { .entries = e, .n_entries = 3, .parallel = 1 };
	VmResults *r = NULL;

	inj.target[OP_SAVE_SLOW] = "*";
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	assert_int_equal(inj.max_saving, 1);
	assert_int_equal(vm_restore_all(conn, NULL, r, NULL, NULL), 0);
	vm_results_free(r);

	inj.max_saving = 0;
	plan.parallel = 2;
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	assert_int_equal(inj.max_saving, 2);
	for (size_t i = 0; i < r->n; i++)
		assert_int_equal(r->items[i].outcome, VM_OUTCOME_SAVED);
	assert_int_equal(vm_restore_all(conn, NULL, r, NULL, NULL), 0);
	assert_all_running_no_image();
	vm_results_free(r);
}

static void test_null_arguments(void **state) {
	VmResults *r = NULL;

	assert_int_equal(vm_rollback(NULL, r, "x", NULL, NULL), -EINVAL);
	assert_int_equal(vm_rollback(conn, NULL, "x", NULL, NULL), -EINVAL);
	assert_int_equal(vm_restore_all(NULL, NULL, r, NULL, NULL), -EINVAL);
	assert_int_equal(vm_restore_all(conn, NULL, NULL, NULL, NULL), -EINVAL);
	assert_int_equal(vm_inventory(conn, NULL), -EINVAL);
	assert_null(vm_results_find(NULL, "a"));
	assert_null(vm_list_find(NULL, "a"));
	vm_results_free(NULL);
	vm_list_free(NULL);
	assert_int_equal(dom_state("a"), VIR_DOMAIN_RUNNING);
}

static void test_checkpoint_bad_plan(void **state) {
	VmPlanEntry e[2];
	VmPlan plan = { .entries = e, .n_entries = 2 };
	VmResults *r = NULL;
	virDomainPtr t;

	assert_int_equal(vm_checkpoint_all(NULL, &plan, NULL, NULL, &r), -EINVAL);
	assert_int_equal(vm_checkpoint_all(conn, NULL, NULL, NULL, &r), -EINVAL);

	e[0] = (VmPlanEntry){ "a", VM_STRATEGY_CHECKPOINT };
	e[1] = (VmPlanEntry){ "nope", VM_STRATEGY_CHECKPOINT };
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -ENOENT);
	assert_error_contains(find(r, "nope"), "no such domain 'nope'");
	vm_results_free(r);

	e[1] = (VmPlanEntry){ "a", VM_STRATEGY_KEEP_RAM };
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EINVAL);
	assert_error_contains(&r->items[1], "listed twice");
	vm_results_free(r);

	e[1] = (VmPlanEntry){ "b", (VmStrategy)17 };
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EINVAL);
	assert_error_contains(find(r, "b"), "invalid strategy");
	vm_results_free(r);

	e[1] = (VmPlanEntry){ NULL, VM_STRATEGY_KEEP_RAM };
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EINVAL);
	vm_results_free(r);

	t = virDomainCreateXML(conn,
	                       "<domain type='test'><name>tr</name><memory>32768</memory>"
	                       "<os><type>hvm</type></os></domain>",
	                       0);
	assert_non_null(t);
	virDomainFree(t);
	e[1] = (VmPlanEntry){ "tr", VM_STRATEGY_CHECKPOINT };
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EINVAL);
	assert_error_contains(find(r, "tr"), "transient");
	vm_results_free(r);

	dom_suspend("b");
	e[1] = (VmPlanEntry){ "b", VM_STRATEGY_SHUTDOWN };
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EBUSY);
	assert_error_contains(find(r, "b"), "paused domain cannot shut down");
	vm_results_free(r);

	inj.target[OP_GET_STATE] = "b";
	e[1] = (VmPlanEntry){ "b", VM_STRATEGY_KEEP_RAM };
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EIO);
	assert_error_contains(find(r, "b"), "injected state query failure");
	vm_results_free(r);

	/* Nothing was touched by any of them. */
	assert_int_equal(dom_state("a"), VIR_DOMAIN_RUNNING);
	assert_int_equal(dom_state("b"), VIR_DOMAIN_PAUSED);
	assert_int_equal(dom_has_image("a"), 0);
}

static void test_checkpoint_suspend_fails(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3 };
	VmResults *r = NULL;

	inj.target[OP_SUSPEND] = "b";
	assert_int_equal(vm_checkpoint_all(conn, &plan, on_progress, &conn, &r), -EIO);
	assert_all_running_no_image();
	assert_error_contains(find(r, "b"), "pause failed: ");
	assert_error_contains(find(r, "b"), "injected suspend failure on b");
	assert_int_equal(find(r, "a")->outcome, VM_OUTCOME_ROLLED_BACK);
	assert_error_contains(find(r, "a"), "rolled back: VM 'b' failed: pause failed");
	assert_int_equal(find(r, "test")->outcome, VM_OUTCOME_ROLLED_BACK);
	/* a was paused before b failed and got resumed; nothing was saved. */
	assert_true(progress_index("a:paused", false) >= 0);
	assert_true(progress_index("a:saving", false) < 0);
	dump_results(r, "rollback-pause-failed");
	vm_results_free(r);
}

static void test_checkpoint_save_fails(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3, .parallel = 1 };
	VmResults *r = NULL;

	/* parallel = 1: a is saved (shut off, image written) before b fails. */
	inj.target[OP_SAVE] = "b";
	assert_int_equal(vm_checkpoint_all(conn, &plan, on_progress, &conn, &r), -EIO);
	assert_true(progress_index("a:saved", false) >= 0);
	assert_all_running_no_image();
	assert_int_equal(find(r, "b")->outcome, VM_OUTCOME_ROLLED_BACK);
	assert_error_contains(find(r, "b"), "managed save failed: ");
	assert_error_contains(find(r, "b"), "injected managed save failure on b");
	assert_int_equal(find(r, "a")->outcome, VM_OUTCOME_ROLLED_BACK);
	assert_error_contains(find(r, "a"), "rolled back: VM 'b' failed");
	assert_true(progress_index("a:rolled-back", false) > progress_index("b:failed", false));
	/* The report says what the failed attempt cost. */
	assert_true(find(r, "a")->resumed_at > find(r, "a")->paused_at);
	assert_true(find(r, "b")->resumed_at > find(r, "b")->paused_at);
	dump_results(r, "rollback-save-failed");
	vm_results_free(r);
}

static void test_checkpoint_save_fails_parallel(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3, .parallel = 8 };
	VmResults *r = NULL;

	inj.target[OP_SAVE] = "a";
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EIO);
	assert_all_running_no_image();
	vm_results_free(r);
}

static void test_checkpoint_save_timeout(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3, .save_timeout_usec = 200000 };
	VmResults *r = NULL;

	inj.target[OP_SAVE_HANG] = "b";
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EIO);
	assert_true(inj.aborted);
	assert_all_running_no_image();
	assert_error_contains(find(r, "b"), "timed out after 0.2 s, aborted");
	assert_error_contains(find(r, "a"), "rolled back: VM 'b' failed: timed out");
	vm_results_free(r);
}

static void test_checkpoint_connect_fails(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3 };
	VmResults *r = NULL;

	inj.target[OP_CONNECT] = "*";
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -ECONNREFUSED);
	/* The rollback's workers cannot connect either: the VMs stay paused, and say so. */
	assert_int_equal(dom_state("a"), VIR_DOMAIN_PAUSED);
	assert_int_equal(find(r, "a")->outcome, VM_OUTCOME_FAILED);
	assert_error_contains(find(r, "a"), "cannot connect to test:///default: ");
	assert_error_contains(find(r, "a"), "injected-connect-failure");

	inj.target[OP_CONNECT] = NULL;
	assert_int_equal(vm_rollback(conn, r, "retry", NULL, NULL), 0);
	assert_all_running_no_image();
	vm_results_free(r);
}

/* A QEMU that stops answering its monitor: the pause is abandoned after the timeout, the
 * others are rolled back, and when the pause goes through later it is undone at once. */
static void test_checkpoint_pause_timeout(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3, .pause_timeout_usec = 200000 };
	VmResults *r = NULL;

	inj.target[OP_SUSPEND_HANG] = "b";
	assert_int_equal(vm_checkpoint_all(conn, &plan, on_progress, &conn, &r), -ETIMEDOUT);
	assert_error_contains(find(r, "b"), "pause did not complete within 0.2 s");
	assert_error_contains(find(r, "a"), "rolled back: VM 'b' failed: pause did not complete");
	assert_int_equal(find(r, "a")->outcome, VM_OUTCOME_ROLLED_BACK);
	assert_int_equal(dom_state("a"), VIR_DOMAIN_RUNNING);
	assert_int_equal(dom_state("b"), VIR_DOMAIN_RUNNING); /* its pause is still pending */
	assert_true(progress_index("a:saving", false) < 0);   /* nothing was saved */

	/* QEMU answers again: the late pause happens and is undone by its own thread. */
	pthread_mutex_lock(&inj.lock);
	inj.released = true;
	pthread_cond_broadcast(&inj.cond);
	pthread_mutex_unlock(&inj.lock);
	for (int i = 0; i < 500 && __atomic_load_n(&inj.late_resumes, __ATOMIC_SEQ_CST) == 0; i++)
		usleep(10000);
	assert_int_equal(inj.late_resumes, 1);
	assert_all_running_no_image();
	usleep(100000); /* the thread drops its domain reference after the resume */
	vm_results_free(r);
}

/* libvirtd restarting: the rollback's workers retry their connection until it answers. */
static void test_rollback_connect_retry(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3 };
	VmResults *r = NULL;

	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	inj.connect_failures = 3;
	vm_set_connect_retry(5 * 1000000ULL);
	assert_int_equal(vm_rollback(conn, r, "handoff failed", NULL, NULL), 0);
	assert_int_equal(inj.connect_failures, 0);
	assert_all_running_no_image();
	vm_results_free(r);

	/* Without a retry window one failure is final, and the VM says why. */
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	vm_set_connect_retry(0);
	inj.connect_failures = 1;
	assert_int_equal(vm_rollback(conn, r, "handoff failed", NULL, NULL), -ECONNREFUSED);
	assert_int_equal(vm_rollback(conn, r, "handoff failed", NULL, NULL), 0);
	assert_all_running_no_image();
	vm_results_free(r);
}

static void test_rollback_restore_fails_keeps_image(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3, .parallel = 1 };
	VmResults *r = NULL;

	inj.target[OP_SAVE] = "b";
	inj.target[OP_CREATE] = "a";
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EIO);
	/* a cannot be restored: its state is kept on disk, never removed. */
	assert_int_equal(find(r, "a")->outcome, VM_OUTCOME_FAILED);
	assert_error_contains(find(r, "a"), "restore from the managed save image failed");
	assert_error_contains(find(r, "a"), "the image is kept");
	assert_int_equal(dom_state("a"), VIR_DOMAIN_SHUTOFF);
	assert_int_equal(dom_has_image("a"), 1);
	assert_int_equal(dom_state("b"), VIR_DOMAIN_RUNNING);
	assert_int_equal(dom_state("test"), VIR_DOMAIN_RUNNING);

	/* The manual retry works once the cause is gone. */
	inj.target[OP_CREATE] = NULL;
	assert_int_equal(vm_restore_one(conn, "a", &r->items[0]), 0);
	assert_int_equal(r->items[0].outcome, VM_OUTCOME_RESUMED);
	assert_null(r->items[0].error);
	assert_all_running_no_image();
	vm_results_free(r);
}

static void test_rollback_removes_stale_image(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3, .parallel = 1 };
	VmResults *r = NULL;

	inj.target[OP_SAVE] = "b";
	inj.target[OP_HAS_SAVE_STALE] = "b";
	inj.target[OP_SAVE_REMOVE] = "nobody"; /* count only */
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EIO);
	assert_int_equal(inj.calls[OP_HAS_SAVE_STALE], 1);
	assert_all_running_no_image();
	assert_int_equal(find(r, "b")->outcome, VM_OUTCOME_ROLLED_BACK);
	vm_results_free(r);

	/* The removal itself fails: reported, not hidden. */
	inj.target[OP_HAS_SAVE_STALE] = "b";
	inj.target[OP_SAVE_REMOVE] = "b";
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EIO);
	assert_int_equal(find(r, "b")->outcome, VM_OUTCOME_FAILED);
	assert_error_contains(find(r, "b"), "cannot remove the managed save image");
	vm_results_free(r);
}

static void test_rollback_resume_fails(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3 };
	VmResults *r = NULL;

	/* b's save fails, it is still paused: its resume fails in the rollback too. */
	inj.target[OP_SAVE] = "b";
	inj.target[OP_RESUME] = "b";
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EIO);
	assert_int_equal(find(r, "b")->outcome, VM_OUTCOME_FAILED);
	assert_error_contains(find(r, "b"), "resume failed: ");
	assert_error_contains(find(r, "b"), "injected resume failure on b");
	assert_int_equal(dom_state("b"), VIR_DOMAIN_PAUSED);
	assert_int_equal(dom_state("a"), VIR_DOMAIN_RUNNING);
	assert_int_equal(dom_state("test"), VIR_DOMAIN_RUNNING);

	/* A repeated rollback is safe and finishes the job. */
	inj.target[OP_RESUME] = NULL;
	assert_int_equal(vm_rollback(conn, r, "retry", NULL, NULL), 0);
	assert_all_running_no_image();
	vm_results_free(r);
}

static void test_rollback_after_success(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3 };
	VmResults *r = NULL;

	/* A later step of the commit failed (e.g. the handoff record): undo everything. */
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	assert_int_equal(dom_has_image("a"), 1);
	assert_int_equal(vm_rollback(conn, r, "handoff record not written", NULL, NULL), 0);
	assert_all_running_no_image();
	for (size_t i = 0; i < r->n; i++) {
		assert_int_equal(r->items[i].outcome, VM_OUTCOME_ROLLED_BACK);
		assert_error_contains(&r->items[i], "rolled back: handoff record not written");
	}
	vm_results_free(r);
}

static void test_originally_paused_stays_paused(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3 };
	VmResults *r = NULL;

	dom_suspend("a");
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	assert_int_equal(find(r, "a")->orig_state, VIR_DOMAIN_PAUSED);
	assert_int_equal(vm_rollback(conn, r, "test", NULL, NULL), 0);
	assert_int_equal(dom_state("a"), VIR_DOMAIN_PAUSED);
	assert_int_equal(dom_has_image("a"), 0);
	assert_int_equal(dom_state("b"), VIR_DOMAIN_RUNNING);
	vm_results_free(r);
}

static void test_shutdown_strategy(void **state) {
	const VmPlanEntry e[] = {
		{ "a", VM_STRATEGY_SHUTDOWN },
		{ "b", VM_STRATEGY_IGNORE },
		{ "test", VM_STRATEGY_CHECKPOINT },
	};
	VmPlan plan = { .entries = e, .n_entries = 3 };
	VmResults *r = NULL;

	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	assert_int_equal(find(r, "a")->outcome, VM_OUTCOME_SHUT_DOWN);
	assert_int_equal(find(r, "b")->outcome, VM_OUTCOME_IGNORED);
	assert_int_equal(dom_state("a"), VIR_DOMAIN_SHUTOFF);
	assert_int_equal(dom_state("b"), VIR_DOMAIN_RUNNING);
	assert_int_equal(vm_restore_all(conn, NULL, r, NULL, NULL), 0);
	assert_int_equal(find(r, "a")->outcome, VM_OUTCOME_RESUMED);
	assert_int_equal(find(r, "b")->outcome, VM_OUTCOME_IGNORED);
	assert_all_running_no_image();
	dump_results(r, "shutdown-ignore");
	vm_results_free(r);
}

static void test_shutdown_timeout_rolls_back(void **state) {
	const VmPlanEntry e[] = { { "a", VM_STRATEGY_SHUTDOWN }, { "b", VM_STRATEGY_CHECKPOINT } };
	VmPlan plan = { .entries = e, .n_entries = 2, .shutdown_timeout_usec = 300000 };
	VmResults *r = NULL;

	inj.target[OP_SHUTDOWN_IGNORED] = "a";
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -ETIMEDOUT);
	assert_error_contains(find(r, "a"), "did not shut down within 0.3 s");
	assert_all_running_no_image();
	vm_results_free(r);

	inj.target[OP_SHUTDOWN_IGNORED] = NULL;
	inj.target[OP_SHUTDOWN] = "a";
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EIO);
	assert_error_contains(find(r, "a"), "graceful shutdown request failed");
	assert_all_running_no_image();
	vm_results_free(r);
}

static void test_not_running_is_ignored(void **state) {
	const VmPlanEntry e[] = { { "off", VM_STRATEGY_CHECKPOINT },
		                  { "a", VM_STRATEGY_CHECKPOINT } };
	VmPlan plan = { .entries = e, .n_entries = 2 };
	VmResults *r = NULL;

	define_domain("off", "", false);
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	assert_int_equal(find(r, "off")->outcome, VM_OUTCOME_IGNORED);
	assert_int_equal(find(r, "off")->paused_at, 0);
	assert_int_equal(dom_state("off"), VIR_DOMAIN_SHUTOFF);
	assert_int_equal(dom_has_image("off"), 0);
	assert_int_equal(vm_restore_all(conn, NULL, r, NULL, NULL), 0);
	assert_int_equal(dom_state("off"), VIR_DOMAIN_SHUTOFF);
	assert_int_equal(dom_state("a"), VIR_DOMAIN_RUNNING);
	vm_results_free(r);
}

static void test_restore_fails_keeps_image(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3 };
	VmResults *r = NULL;
	VmResult *b;

	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	inj.target[OP_CREATE] = "b";
	assert_int_equal(vm_restore_all(conn, &plan, r, on_progress, &conn), -EIO);
	b = (VmResult *)find(r, "b");
	assert_int_equal(b->outcome, VM_OUTCOME_FAILED);
	assert_error_contains(b, "image is kept, retry with 'upgradectl restore-vm b'");
	assert_int_equal(b->resumed_at, 0);
	assert_int_equal(vm_result_downtime(b), 0);
	assert_int_equal(dom_has_image("b"), 1);
	assert_int_equal(find(r, "a")->outcome, VM_OUTCOME_RESUMED);
	assert_int_equal(dom_state("a"), VIR_DOMAIN_RUNNING);
	assert_true(progress_index("b:failed", false) >= 0);
	dump_results(r, "restore-failed");

	/* Restore fails again on the same image: still kept. */
	assert_int_equal(vm_restore_one(conn, "b", b), -EIO);
	assert_int_equal(dom_has_image("b"), 1);

	inj.target[OP_CREATE] = NULL;
	assert_int_equal(vm_restore_one(conn, "b", b), 0);
	assert_int_equal(b->outcome, VM_OUTCOME_RESUMED);
	assert_true(vm_result_downtime(b) > 0);
	assert_all_running_no_image();
	vm_results_free(r);
}

/* libvirtd killed during a restore on the new kernel: the VM ends running, or with its saved
 * state kept and reported; never paused and reported restored (docs/reliability.md). */
static void test_restore_libvirtd_lost(void **state) {
	const VmPlanEntry b[] = { { "b", VM_STRATEGY_CHECKPOINT } };
	VmPlan plan = { .entries = plan_ab, .n_entries = 3 },
	       only_b = { .entries = b, .n_entries = 1 };
	VmResults *r = NULL;
	int k;

	/* The restarted libvirtd finished the restore: the VM is there, paused, its image
	 * gone. The daemon looks again and resumes it. */
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	inj.target[OP_CREATE_LOST] = "a";
	k = vm_restore_all(conn, &plan, r, NULL, NULL);
	dump_results(r, "libvirtd-lost");
	assert_int_equal(k, 0);
	assert_int_equal(inj.calls[OP_CREATE_LOST], 1);
	assert_int_equal(find(r, "a")->outcome, VM_OUTCOME_RESUMED);
	assert_null(find(r, "a")->error);
	assert_all_running_no_image();
	vm_results_free(r);
	inj.target[OP_CREATE_LOST] = NULL;

	/* It did not: the image is still there, restored once libvirtd is back. */
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	inj.target[OP_CREATE_LOST_UNDONE] = "b";
	assert_int_equal(vm_restore_all(conn, &plan, r, NULL, NULL), 0);
	assert_int_equal(inj.calls[OP_CREATE_LOST_UNDONE], 1);
	assert_int_equal(find(r, "b")->outcome, VM_OUTCOME_RESUMED);
	assert_all_running_no_image();
	vm_results_free(r);
	inj.target[OP_CREATE_LOST_UNDONE] = NULL;

	/* Gone and not back in time: failed, the image kept and named. */
	assert_int_equal(vm_checkpoint_all(conn, &only_b, NULL, NULL, &r), 0);
	inj.target[OP_CREATE_LOST_UNDONE] = "b";
	inj.lost_for_good = true;
	assert_int_equal(vm_restore_all(conn, &only_b, r, NULL, NULL), -EIO);
	assert_int_equal(find(r, "b")->outcome, VM_OUTCOME_FAILED);
	assert_error_contains(find(r, "b"), "the image is kept");
	assert_int_equal(dom_has_image("b"), 1);
	inj.connect_failures = 0;
	inj.lost_for_good = false;
	inj.target[OP_CREATE_LOST_UNDONE] = NULL;
	assert_int_equal(vm_restore_one(conn, "b", (VmResult *)find(r, "b")), 0);
	assert_all_running_no_image();
	vm_results_free(r);
}

static void test_restore_resume_fails(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3 };
	VmResults *r = NULL;

	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	/* test is active and paused at the restore (it survived): only resumed, and that fails */
	dom_start_paused("test");
	inj.target[OP_RESUME] = "test";
	assert_int_equal(vm_restore_all(conn, &plan, r, NULL, NULL), -EIO);
	assert_int_equal(find(r, "test")->outcome, VM_OUTCOME_FAILED);
	assert_error_contains(find(r, "test"), "resume failed");
	assert_int_equal(find(r, "a")->outcome, VM_OUTCOME_RESUMED);
	assert_int_equal(find(r, "b")->outcome, VM_OUTCOME_RESUMED);
	vm_results_free(r);
}

static void test_restore_state_not_preserved(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3 };
	VmResults *r = NULL;
	virDomainPtr d;

	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	/* test's and a's images are gone. */
	d = virDomainLookupByName(conn, "test");
	assert_int_equal(virDomainManagedSaveRemove(d, 0), 0);
	virDomainFree(d);
	d = virDomainLookupByName(conn, "a");
	assert_int_equal(virDomainManagedSaveRemove(d, 0), 0);
	virDomainFree(d);
	inj.target[OP_HAS_SAVE] = "nobody";
	assert_int_equal(vm_restore_all(conn, &plan, r, NULL, NULL), -ENODATA);
	assert_error_contains(find(r, "test"), "state was not preserved");
	assert_error_contains(find(r, "a"), "state was not preserved");
	assert_int_equal(find(r, "b")->outcome, VM_OUTCOME_RESUMED);
	vm_results_free(r);
}

static void test_restore_one_errors(void **state) {
	VmResult other = { .name = (char *)"b" };

	assert_int_equal(vm_restore_one(conn, NULL, NULL), -EINVAL);
	assert_int_equal(vm_restore_one(conn, "", NULL), -EINVAL);
	assert_int_equal(vm_restore_one(NULL, "a", NULL), -EINVAL);
	assert_int_equal(vm_restore_one(conn, "a", &other), -EINVAL);
	assert_int_equal(vm_restore_one(conn, "nope", NULL), -ENOENT);
	assert_int_equal(vm_restore_one(conn, "a", NULL), -EBUSY);
	define_domain("off", "", false);
	assert_int_equal(vm_restore_one(conn, "off", NULL), -ENODATA);
	assert_int_equal(dom_state("off"), VIR_DOMAIN_SHUTOFF);
}

static void test_restore_one_without_record(void **state) {
	virDomainPtr d = virDomainLookupByName(conn, "a");

	assert_int_equal(virDomainManagedSave(d, 0), 0);
	virDomainFree(d);
	assert_int_equal(vm_restore_one(conn, "a", NULL), 0);
	assert_all_running_no_image();
}

static void test_results_json_roundtrip(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3 };
	VmResults *r = NULL, *back = NULL;
	struct json_object *j, *j2;

	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	r->items[0].saved_bytes = 593920;
	j = vm_results_to_json(r);
	assert_int_equal(vm_results_from_json(j, &back), 0);
	assert_int_equal(back->n, 3);
	for (size_t i = 0; i < 3; i++) {
		assert_string_equal(back->items[i].name, r->items[i].name);
		assert_string_equal(back->items[i].uuid, r->items[i].uuid);
		assert_int_equal(back->items[i].strategy, r->items[i].strategy);
		assert_int_equal(back->items[i].outcome, r->items[i].outcome);
		assert_int_equal(back->items[i].orig_state, r->items[i].orig_state);
		assert_int_equal(back->items[i].paused_at, r->items[i].paused_at);
		assert_int_equal(back->items[i].save_time, r->items[i].save_time);
		assert_int_equal(back->items[i].saved_bytes, r->items[i].saved_bytes);
	}
	/* The record read back drives the restore, as after a real handoff. */
	assert_int_equal(vm_restore_all(conn, NULL, back, NULL, NULL), 0);
	assert_all_running_no_image();
	j2 = vm_results_to_json(back);
	assert_non_null(strstr(json_object_to_json_string_ext(j2, JSON_C_TO_STRING_PLAIN),
	                       "\"result\":\"resumed\""));
	assert_non_null(strstr(json_object_to_json_string_ext(j2, JSON_C_TO_STRING_PLAIN),
	                       "\"downtime\":"));
	assert_non_null(strstr(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN),
	                       "\"saved_bytes\":593920"));
	assert_non_null(strstr(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN),
	                       "\"resumed_at\":null"));
	json_object_put(j);
	json_object_put(j2);
	vm_results_free(r);
	vm_results_free(back);
}

static void test_results_json_malformed(void **state) {
	static const char *const bad[] = {
		"{}",
		"[1]",
		"[{}]",
		"[{\"name\":\"a\",\"uuid\":\"x\",\"strategy\":\"checkpoint\",\"result\":\"saved\","
		"\"original_state\":\"running\"}]",
		"[{\"name\":\"a\",\"uuid\":\"6695eb01-f6a4-8304-79aa-97f2502e193f\","
		"\"strategy\":\"teleport\",\"result\":\"saved\",\"original_state\":\"running\"}]",
		"[{\"name\":\"a\",\"uuid\":\"6695eb01-f6a4-8304-79aa-97f2502e193f\","
		"\"strategy\":\"keep-ram\",\"result\":\"saved\",\"original_state\":\"running\","
		"\"paused_at\":-5}]",
		"[{\"name\":\"a\",\"uuid\":\"6695eb01-f6a4-8304-79aa-97f2502e193f\","
		"\"strategy\":\"keep-ram\",\"result\":\"saved\",\"original_state\":\"running\","
		"\"paused_at\":\"soon\"}]",
		"[{\"name\":\"\",\"uuid\":\"6695eb01-f6a4-8304-79aa-97f2502e193f\","
		"\"strategy\":\"keep-ram\",\"result\":\"saved\",\"original_state\":\"running\"}]",
		"[{\"name\":\"a\",\"uuid\":\"6695eb01-f6a4-8304-79aa-97f2502e193f\","
		"\"strategy\":\"keep-ram\",\"result\":\"saved\",\"original_state\":\"running\"},"
		"{\"name\":\"a\",\"uuid\":\"6695eb01-f6a4-8304-79aa-97f2502e193f\","
		"\"strategy\":\"keep-ram\",\"result\":\"saved\",\"original_state\":\"running\"}]",
	};
	VmResults *r = (VmResults *)0x1;

	assert_int_equal(vm_results_from_json(NULL, &r), -EBADMSG);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct json_object *j = json_tokener_parse(bad[i]);

		assert_non_null(j);
		assert_int_equal(vm_results_from_json(j, &r), -EBADMSG);
		assert_ptr_equal(r, (VmResults *)0x1); /* untouched on failure */
		json_object_put(j);
	}
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
	const struct CMUnitTest tests[] = {
		T(test_strategy_strings),
		T(test_inventory_facts),
		T(test_checkpoint_restore_ok),
		T(test_events_at_the_moment),
		T(test_events_not_on_failure),
		T(test_checkpoint_bypass_cache),
		T(test_checkpoint_parallel_limit),
		T(test_null_arguments),
		T(test_checkpoint_bad_plan),
		T(test_checkpoint_suspend_fails),
		T(test_checkpoint_save_fails),
		T(test_checkpoint_save_fails_parallel),
		T(test_checkpoint_save_timeout),
		T(test_checkpoint_connect_fails),
		T(test_checkpoint_pause_timeout),
		T(test_rollback_connect_retry),
		T(test_rollback_restore_fails_keeps_image),
		T(test_rollback_removes_stale_image),
		T(test_rollback_resume_fails),
		T(test_rollback_after_success),
		T(test_originally_paused_stays_paused),
		T(test_shutdown_strategy),
		T(test_shutdown_timeout_rolls_back),
		T(test_not_running_is_ignored),
		T(test_restore_fails_keeps_image),
		T(test_restore_libvirtd_lost),
		T(test_restore_resume_fails),
		T(test_restore_state_not_preserved),
		T(test_restore_one_errors),
		T(test_restore_one_without_record),
		T(test_results_json_roundtrip),
		T(test_results_json_malformed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
