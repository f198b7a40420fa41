/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Jobs (daemon/core/job.c) on a real sd-event loop: the loop keeps dispatching while a worker
 * waits in a blocking section, a deadline abandons a job (its done callback gets -ETIMEDOUT at
 * once, the worker learns it when its blocking call returns), job_defer() runs on the loop in
 * order, and a cancel reaches a running worker.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <systemd/sd-event.h>

#include "job.h"
#include "macros.h"

static sd_event *event;

/* One loop a case: a loop that exited cannot run again. */
static int setup(void **state) {
	sd_event *old = event;

	/* The new loop first: at the old one's address job.c would take it for the old. */
	if (sd_event_new(&event) < 0 || job_attach_event(event) < 0)
		return -1;
	sd_event_unref(old);
	return 0;
}
static unsigned ticks, ticks_at_done;
static int done_result;
static uint64_t done_after_usec;
static atomic_int worker_saw = 1; /* 1: not yet */
static char order[8];

static uint64_t now_usec(void) {
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000ULL;
}

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata) {
	ticks++;
	(void)sd_event_source_set_time_relative(s, 20 * 1000);
	return sd_event_source_set_enabled(s, SD_EVENT_ON);
}

static void on_done(Job *j, int r, void *userdata) {
	done_result = r;
	ticks_at_done = ticks;
	done_after_usec = now_usec() - *(uint64_t *)userdata;
	(void)sd_event_exit(event, 0);
}

/* Blocks 600 ms outside the state lock, returns 7. */
static int run_block(Job *j, void *userdata) {
	job_blocking_begin();
	usleep(600 * 1000);
	atomic_store(&worker_saw, job_blocking_end());
	return 7;
}

static void test_job_loop_answers_while_worker_blocks(void **state) {
	uint64_t t0 = now_usec();
	sd_event_source *tick = NULL;

	ticks = 0;
	assert_int_equal(sd_event_add_time_relative(event, &tick, CLOCK_MONOTONIC, 20 * 1000, 1,
	                                            on_tick, NULL),
	                 0);
	assert_int_equal(job_start("block", 0, run_block, on_done, &t0, NULL), 0);
	assert_int_equal(job_count(), 1u);
	assert_int_equal(job_loop_run(event), 0);
	sd_event_source_disable_unref(tick);
	assert_int_equal(done_result, 7);
	assert_int_equal(atomic_load(&worker_saw), 0);
	/* 600 ms of blocking, a tick every 20 ms: the loop was not held up. */
	printf("# %u ticks while the worker blocked for %llu us\n", ticks_at_done,
	       (unsigned long long)done_after_usec);
	assert_true(ticks_at_done >= 10);
	assert_int_equal(job_count(), 0u);
}

static int on_poll_worker(sd_event_source *s, uint64_t usec, void *userdata) {
	if (atomic_load(&worker_saw) != 1)
		return sd_event_exit(event, 0);
	(void)sd_event_source_set_time_relative(s, 10 * 1000);
	return sd_event_source_set_enabled(s, SD_EVENT_ON);
}

static void on_done_keep_running(Job *j, int r, void *userdata) {
	done_result = r;
	done_after_usec = now_usec() - *(uint64_t *)userdata;
}

static void test_job_deadline_abandons(void **state) {
	uint64_t t0 = now_usec();
	sd_event_source *poll = NULL;

	atomic_store(&worker_saw, 1);
	assert_int_equal(sd_event_add_time_relative(event, &poll, CLOCK_MONOTONIC, 10 * 1000, 1,
	                                            on_poll_worker, NULL),
	                 0);
	assert_int_equal(
	        job_start("deadline", 100 * 1000, run_block, on_done_keep_running, &t0, NULL), 0);
	assert_int_equal(job_loop_run(event), 0);
	sd_event_source_disable_unref(poll);
	/* done came at the deadline, long before the worker returned... */
	assert_int_equal(done_result, -ETIMEDOUT);
	assert_true(done_after_usec < 500 * 1000);
	/* ...and the worker learnt it was abandoned. */
	assert_int_equal(atomic_load(&worker_saw), -ETIMEDOUT);
	assert_int_equal(job_count(), 0u);
	usleep(50 * 1000); /* the worker's last reference goes with its deferred end */
}

static void append(void *userdata) {
	strncat(order, userdata, sizeof(order) - strlen(order) - 1);
}

static Job *cancel_me;

/* The second deferred call cancels the job: it ran after the first, on the loop. */
static void append_and_cancel(void *userdata) {
	append(userdata);
	job_cancel(cancel_me);
}

/* Defers two calls, then waits (off the lock) until cancelled. */
static int run_until_cancelled(Job *j, void *userdata) {
	assert_int_equal(job_defer(append, "1", NULL), 0);
	assert_int_equal(job_defer(append_and_cancel, "2", NULL), 0);
	while (!job_is_cancelled(j)) {
		job_blocking_begin();
		usleep(10 * 1000);
		if (job_blocking_end() < 0)
			return -ETIMEDOUT;
	}
	return -EINTR;
}

static void test_job_defer_in_order_and_cancel(void **state) {
	uint64_t t0 = now_usec();

	order[0] = '\0';
	assert_int_equal(job_start("cancel", 0, run_until_cancelled, on_done, &t0, &cancel_me), 0);
	assert_int_equal(job_loop_run(event), 0);
	assert_int_equal(done_result, -EINTR);
	assert_string_equal(order, "12");
}

static void test_job_blocking_outside_jobs_is_a_no_op(void **state) {
	assert_null(job_current());
	job_blocking_begin();
	assert_int_equal(job_blocking_end(), 0);
	assert_true(job_on_loop());
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_job_blocking_outside_jobs_is_a_no_op),
		cmocka_unit_test_setup(test_job_loop_answers_while_worker_blocks, setup),
		cmocka_unit_test_setup(test_job_deadline_abandons, setup),
		cmocka_unit_test_setup(test_job_defer_in_order_and_cancel, setup),
	};
	int r;

	r = cmocka_run_group_tests(tests, NULL, NULL);
	sd_event_unref(event);
	return r;
}
