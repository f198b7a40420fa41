/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>

#include "fileio.h"
#include "log.h"
#include "macros.h"

/* Runs fn with stderr redirected to a temporary file and returns what it wrote. */
static char *capture_stderr(void (*fn)(void)) {
	char path[] = "/tmp/test-log.XXXXXX";
	int fd = mkstemp(path), saved = dup(STDERR_FILENO);
	char *out = NULL;

	assert_true(fd >= 0 && saved >= 0);
	fflush(stderr);
	assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
	fn();
	fflush(stderr);
	assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
	close(saved);
	close(fd);
	assert_int_equal(read_file_full(path, 4096, &out, NULL), 0);
	unlink(path);
	return out;
}

static void log_something(void) {
	unsetenv("JOURNAL_STREAM");
	log_set_max_level(LOG_INFO);
	assert_int_equal(log_error_errno(-ENOENT, "Failed to open '%s': %m", "/boot/x"), -ENOENT);
	assert_int_equal(log_debug_errno(-EPERM, "hidden"), -EPERM);
	log_info("plain");
}

static void test_log_errno_formats_and_returns(void **state) {
	_cleanup_free_ char *out = capture_stderr(log_something);

	assert_string_equal(out, "Failed to open '/boot/x': No such file or directory\nplain\n");
}

static void log_journal(void) {
	setenv("JOURNAL_STREAM", "8:1", 1);
	log_warning("careful");
	unsetenv("JOURNAL_STREAM");
}

static void test_log_journal_prefix(void **state) {
	_cleanup_free_ char *out = capture_stderr(log_journal);

	assert_string_equal(out, "<4>careful\n");
}

static void test_log_return_values(void **state) {
	log_set_max_level(LOG_EMERG); /* silence */
	assert_int_equal(log_error_errno(EINVAL, "positive errno is normalized"), -EINVAL);
	assert_int_equal(log_error_errno(0, "no errno at error level still fails"), -EIO);
	assert_int_equal(log_info_errno(0, "no errno at info level"), 0);
	log_set_max_level(LOG_INFO);
}

static void test_log_level_from_string(void **state) {
	assert_int_equal(log_level_from_string("debug"), LOG_DEBUG);
	assert_int_equal(log_level_from_string("err"), LOG_ERR);
	assert_int_equal(log_level_from_string("3"), 3);
	assert_int_equal(log_level_from_string("8"), -EINVAL);
	assert_int_equal(log_level_from_string("loud"), -EINVAL);
	assert_int_equal(log_level_from_string(NULL), -EINVAL);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_log_errno_formats_and_returns),
		cmocka_unit_test(test_log_journal_prefix),
		cmocka_unit_test(test_log_return_values),
		cmocka_unit_test(test_log_level_from_string),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
