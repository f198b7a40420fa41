/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The measurement's VM API (daemon/measure/measure.c) as the VM steps and the restore
 * workers call it: the marks each step stamps, the exact moment winning over a later
 * progress report, concurrent callers, and a probe that does not open in time never
 * holding up the caller. The report these marks end up in is test-measure.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "daemon-test-util.h"
#include "measure.h"
#include "probe-open-bounded.h"

void measure_set_probe_open_func(Measure *m, ProbeOpenFunc f, uint64_t timeout_usec);

typedef struct World {
	char *root;
} World;

static int setup(void **state) {
	World *w = calloc(1, sizeof(World));
	w->root = test_mkroot();
	assert_non_null(w->root);
	*state = w;
	return 0;
}

static int teardown(void **state) {
	World *w = *state;
	test_rmroot(w->root);
	free(w);
	return 0;
}

static void test_measure_vm_outcome_marks(void **state) {
	World *w = *state;
	_cleanup_(measure_freep) Measure *m = NULL;
	ProbeVmResult r;

	assert_int_equal(
	        measure_new(&(MeasureOptions){ .root = w->root, .probe_disabled = true }, &m), 0);
	assert_int_equal(measure_vm_outcome(m, "web1", "saving"), 0);
	assert_int_equal(measure_vm_outcome(m, "web1", "paused"), 0);
	assert_int_equal(measure_vm_outcome(m, "web1", "saved"), 0);
	assert_int_equal(measure_vm_outcome(m, "web1", "bogus"), -EINVAL);
	assert_int_equal(measure_vm_outcome(m, NULL, "paused"), -EINVAL);
	assert_int_equal(probe_result(measure_probe(m), 0, &r), 0);
	assert_true(r.marks[PROBE_MARK_PAUSE] > 0);
	assert_true(r.marks[PROBE_MARK_SAVE_COMPLETE] >= r.marks[PROBE_MARK_PAUSE]);
	assert_int_equal(r.marks[PROBE_MARK_RESUME], 0);
	assert_false(r.available);
}

static void test_measure_exact_marks_win(void **state) {
	World *w = *state;
	_cleanup_(measure_freep) Measure *m = NULL;
	ProbeVmResult r;
	uint64_t pause, resume;

	/* The VM steps stamp the moment itself (VmEvent); the progress report of the same
	 * step arrives later on the daemon's thread and must not move the mark. */
	assert_int_equal(
	        measure_new(&(MeasureOptions){ .root = w->root, .probe_disabled = true }, &m), 0);
	assert_int_equal(measure_mark(m, "web1", PROBE_MARK_PAUSE), 0);
	assert_int_equal(measure_mark(m, "web1", PROBE_MARK_RESUME), 0);
	assert_int_equal(probe_result(measure_probe(m), 0, &r), 0);
	pause = r.marks[PROBE_MARK_PAUSE];
	resume = r.marks[PROBE_MARK_RESUME];
	assert_true(pause > 0 && resume >= pause);
	usleep(2000);
	assert_int_equal(measure_vm_outcome(m, "web1", "paused"), 0);
	assert_int_equal(measure_vm_outcome(m, "web1", "resumed"), 0);
	assert_int_equal(measure_vm_outcome(m, "web1", "restored"), 0);
	assert_int_equal(probe_result(measure_probe(m), 0, &r), 0);
	assert_int_equal(r.marks[PROBE_MARK_PAUSE], pause);
	assert_int_equal(r.marks[PROBE_MARK_RESUME], resume);
	/* A mark the steps did not stamp comes from the outcome. */
	assert_true(r.marks[PROBE_MARK_RESTORE] > resume);
	/* measure_mark() itself restamps: it is the exact moment. */
	assert_int_equal(measure_mark(m, "web1", PROBE_MARK_PAUSE), 0);
	assert_int_equal(probe_result(measure_probe(m), 0, &r), 0);
	assert_true(r.marks[PROBE_MARK_PAUSE] > pause);
}

#define N_THREADS 8
#define N_ROUNDS  200

typedef struct Racer {
	Measure *m;
	char name[16];
	unsigned failed; /* cmocka's asserts belong to the main thread */
} Racer;

static void *racer(void *arg) {
	Racer *x = arg;

	for (unsigned i = 0; i < N_ROUNDS; i++) {
		x->failed += measure_window_start(x->m, x->name) != 0;
		x->failed += measure_mark(x->m, x->name, PROBE_MARK_RESTORE) != 0;
		x->failed += measure_vm_outcome(x->m, x->name, "resumed") != 0;
		x->failed += measure_vm_tracking(x->m, x->name, getpid()) != 0;
	}
	return NULL;
}

static void test_measure_vm_api_threads(void **state) {
	World *w = *state;
	_cleanup_(measure_freep) Measure *m = NULL;
	pthread_t t[N_THREADS];
	Racer x[N_THREADS];
	json_object *j = NULL, *vms;

	/* The restore workers call the VM API concurrently: every VM is registered once and
	 * keeps its marks (the registry grows by realloc under the callers). */
	assert_int_equal(
	        measure_new(&(MeasureOptions){ .root = w->root, .probe_disabled = true }, &m), 0);
	for (size_t i = 0; i < N_THREADS; i++) {
		x[i] = (Racer){ .m = m };
		snprintf(x[i].name, sizeof(x[i].name), "vm%zu", i);
		assert_int_equal(pthread_create(&t[i], NULL, racer, &x[i]), 0);
	}
	for (size_t i = 0; i < N_THREADS; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_int_equal(x[i].failed, 0);
	}
	assert_int_equal(probe_to_json(measure_probe(m), &j), 0);
	assert_true(json_object_object_get_ex(j, "vms", &vms));
	assert_int_equal(json_object_array_length(vms), N_THREADS);
	for (uint32_t i = 0; i < N_THREADS; i++) {
		ProbeVmResult r;
		assert_int_equal(probe_result(measure_probe(m), i, &r), 0);
		assert_true(r.marks[PROBE_MARK_RESTORE] > 0 && r.marks[PROBE_MARK_RESUME] > 0);
		assert_true(r.window_ns > 0);
	}
	json_object_put(j);
}

/* An opener that hangs until released, like a bpf() that never returns. */
static pthread_mutex_t hang_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hang_cond = PTHREAD_COND_INITIALIZER;
static bool hang_released, hang_returned;
static unsigned hang_calls;

static int hanging_probe_open(const ProbeOptions *opts, Probe **ret) {
	int r;

	pthread_mutex_lock(&hang_lock);
	hang_calls++;
	while (!hang_released)
		pthread_cond_wait(&hang_cond, &hang_lock);
	pthread_mutex_unlock(&hang_lock);
	r = probe_open(opts, ret); /* disabled: a degraded probe, no bpf() */
	pthread_mutex_lock(&hang_lock);
	hang_returned = true;
	pthread_mutex_unlock(&hang_lock);
	return r;
}

static uint64_t now_ms(void) {
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The probe never stands between the new kernel and the VMs' restore: a probe that does not
 * open within its deadline is given up (and not tried again), the caller goes on at once,
 * and the late opener closes what it opened by itself. */
static void test_measure_probe_open_bounded(void **state) {
	World *w = *state;
	Measure *m = NULL;
	Probe *p = NULL;
	uint64_t t0;

	/* The primitive: a prompt opener's result comes back as it is. */
	assert_int_equal(probe_open_bounded(NULL, &(ProbeOptions){ .disabled = true }, 1000000, &p),
	                 0);
	assert_non_null(p);
	p = probe_close(p);

	assert_int_equal(
	        measure_new(&(MeasureOptions){ .root = w->root, .probe_disabled = true }, &m), 0);
	measure_set_probe_open_func(m, hanging_probe_open, 200 * 1000);
	t0 = now_ms();
	assert_true(measure_mark(m, "web1", PROBE_MARK_RESUME) < 0);
	assert_true(now_ms() - t0 < 2000);
	assert_null(measure_probe(m));
	t0 = now_ms();
	assert_true(measure_mark(m, "web1", PROBE_MARK_PAUSE) < 0);
	assert_true(now_ms() - t0 < 100); /* given up: no second wait */
	assert_int_equal(hang_calls, 1);
	m = measure_free(m);

	/* Released after its caller went: the opener finishes and frees alone. */
	pthread_mutex_lock(&hang_lock);
	hang_released = true;
	pthread_cond_broadcast(&hang_cond);
	pthread_mutex_unlock(&hang_lock);
	for (int i = 0; i < 200; i++) {
		bool done;

		pthread_mutex_lock(&hang_lock);
		done = hang_returned;
		pthread_mutex_unlock(&hang_lock);
		if (done)
			break;
		usleep(10000);
	}
	assert_true(hang_returned);
	usleep(100000); /* its last unref */
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_measure_vm_outcome_marks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_measure_exact_marks_win, setup, teardown),
		cmocka_unit_test_setup_teardown(test_measure_vm_api_threads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_measure_probe_open_bounded, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
