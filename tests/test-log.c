/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>

#include <pthread.h>
#include <string.h>

#include "fileio.h"
#include "log-ids.h"
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

/* ---- structured entries ---- */

static char entry[2048]; /* the last entry, its fields joined by '\n' */
static int sender_result;

static int capture_entry(const struct iovec *iov, int n) {
	size_t len = 0;

	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(entry + len, sizeof(entry) - len, "%.*s\n",
		                        (int)iov[i].iov_len, (const char *)iov[i].iov_base);
	return sender_result;
}

static bool has_field(const char *field) {
	char line[256];

	snprintf(line, sizeof(line), "%s\n", field);
	return strstr(entry, line) != NULL;
}

static void *log_from_other_thread(void *arg) {
	log_info("from another thread");
	return arg;
}

static void test_log_journal_entries(void **state) {
	pthread_t t;

	log_set_journal(true);
	log_journal_sender = capture_entry;
	sender_result = 0;

	/* An ordinary line of a thread working on an update: its id, no MESSAGE_ID. */
	log_set_update_id("0123456789abcdef");
	log_info("Saved %d VM(s)", 2);
	assert_true(has_field("MESSAGE=Saved 2 VM(s)"));
	assert_true(has_field("PRIORITY=6"));
	assert_true(has_field("UPGRADED_ID=0123456789abcdef"));
	assert_true(has_field("SYSLOG_IDENTIFIER=test-log"));
	assert_true(has_field("CODE_FUNC=test_log_journal_entries"));
	assert_null(strstr(entry, "MESSAGE_ID="));

	/* An event: its MESSAGE_ID, and the id given beats the thread's. */
	log_event(LOG_NOTICE, LOG_MID_HANDOFF, "fedcba9876543210", "requesting kexec: %s", "now");
	assert_true(has_field("MESSAGE=requesting kexec: now"));
	assert_true(has_field("MESSAGE_ID=" LOG_MID_HANDOFF));
	assert_true(has_field("UPGRADED_ID=fedcba9876543210"));
	assert_true(has_field("PRIORITY=5"));

	/* %m is the error passed in. */
	assert_int_equal(log_error_errno(-ENOENT, "open: %m"), -ENOENT);
	assert_true(has_field("MESSAGE=open: No such file or directory"));

	/* The id is the thread's own: another thread's lines do not carry it. */
	assert_int_equal(pthread_create(&t, NULL, log_from_other_thread, NULL), 0);
	pthread_join(t, NULL);
	assert_true(has_field("MESSAGE=from another thread"));
	assert_null(strstr(entry, "UPGRADED_ID="));

	log_set_update_id(NULL);
	log_info("no update");
	assert_null(strstr(entry, "UPGRADED_ID="));
}

static void log_refused(void) {
	sender_result = -ECONNREFUSED;
	log_warning("the journal is gone");
}

static void test_log_journal_refused_falls_back(void **state) {
	_cleanup_free_ char *out = NULL;

	log_set_journal(true);
	log_journal_sender = capture_entry;
	out = capture_stderr(log_refused);
	/* Not lost: on stderr, with its priority. */
	assert_string_equal(out, "<4>the journal is gone\n");
	log_set_journal(false);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_log_errno_formats_and_returns),
		cmocka_unit_test(test_log_journal_prefix),
		cmocka_unit_test(test_log_return_values),
		cmocka_unit_test(test_log_level_from_string),
		cmocka_unit_test(test_log_journal_entries),
		cmocka_unit_test(test_log_journal_refused_falls_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
