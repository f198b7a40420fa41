/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* spawn_wait(): the exit status, a child killed at its deadline, a program that is not there. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "process-util.h"
#include "time-util.h"

static void test_spawn_wait_status(void **state) {
	char *ok[] = { (char *)"/bin/sh", (char *)"-c", (char *)"exit 0", NULL };
	char *three[] = { (char *)"/bin/sh", (char *)"-c", (char *)"echo to-stderr; exit 3", NULL };
	char *killed[] = { (char *)"/bin/sh", (char *)"-c", (char *)"kill -TERM $$", NULL };
	int status = -1;

	(void)state;
	assert_int_equal(spawn_wait(ok, 10 * 1000000ULL, &status), 0);
	assert_int_equal(status, 0);
	assert_int_equal(spawn_wait(three, 10 * 1000000ULL, &status), 0);
	assert_int_equal(status, 3);
	assert_int_equal(spawn_wait(killed, 10 * 1000000ULL, &status), 0);
	assert_int_equal(status, 128 + 15);
}

static void test_spawn_wait_deadline(void **state) {
	char *slow[] = { (char *)"/bin/sleep", (char *)"30", NULL };
	uint64_t t = now_monotonic_usec();
	int status = -1;

	(void)state;
	assert_int_equal(spawn_wait(slow, 200 * 1000ULL, &status), -ETIMEDOUT);
	/* Killed at the deadline, not after the child's 30 s. */
	assert_true(now_monotonic_usec() - t < 20 * 1000000ULL);
	assert_int_equal(status, -1);
}

static void test_spawn_wait_bad(void **state) {
	char *missing[] = { (char *)"/nonexistent/kdump-config", (char *)"load", NULL };
	char *relative[] = { (char *)"sh", NULL };
	int status = -1;

	(void)state;
	assert_int_equal(spawn_wait(missing, 10 * 1000000ULL, &status), 0);
	assert_int_equal(status, 127);
	assert_int_equal(spawn_wait(relative, 10 * 1000000ULL, &status), -EINVAL);
	assert_int_equal(spawn_wait(NULL, 10 * 1000000ULL, &status), -EINVAL);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spawn_wait_status),
		cmocka_unit_test(test_spawn_wait_deadline),
		cmocka_unit_test(test_spawn_wait_bad),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
