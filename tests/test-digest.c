/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "digest.h"
#include "macros.h"

/* Known answers from FIPS 180-2, Appendix B (SHA-256 examples B.1-B.3) and the
 * empty message from NIST's CAVS SHA256ShortMsg (Len = 0), through a file:
 * digest_file() reads in 64 KiB chunks, so the million 'a' crosses many. */
static void check_file(const void *data, size_t len, const char *expected) {
	char path[] = "/tmp/test-digest.XXXXXX", out[DIGEST_SHA256_HEX_SIZE];
	_cleanup_close_ int fd = mkstemp(path);
	uint64_t size = UINT64_MAX;

	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	/* The fd offset is at the end: digest_file must not depend on it. */
	assert_int_equal(digest_file(fd, out, &size), 0);
	assert_int_equal(size, len);
	assert_string_equal(out, expected);
	assert_int_equal(lseek(fd, 0, SEEK_CUR), (off_t)len);
}

static void test_digest_file_known_answers(void **state) {
	check_file("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	check_file("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	check_file("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
	           "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

static void test_digest_file_million_a(void **state) {
	_cleanup_free_ char *buf = malloc(1000000);

	assert_non_null(buf);
	memset(buf, 'a', 1000000);
	check_file(buf, 1000000,
	           "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void test_digest_file_bad_input(void **state) {
	char out[DIGEST_SHA256_HEX_SIZE] = "untouched";
	uint64_t size = 7;

	assert_int_equal(digest_file(-1, out, &size), -EINVAL);
	assert_int_equal(digest_file(0, NULL, &size), -EINVAL);
	assert_string_equal(out, "untouched");
	assert_int_equal(size, 7);
	assert_non_null(digest_implementation());
}

/* The bounded digest: a file past the limit stops at the chunk that crosses it, a file at
 * the limit passes, a raised cancel flag stops before the first read. */
static void test_digest_file_bounded(void **state) {
	char path[] = "/tmp/test-digest.XXXXXX", out[DIGEST_SHA256_HEX_SIZE];
	_cleanup_close_ int fd = mkstemp(path);
	_cleanup_free_ char *buf = calloc(1, 200000);
	atomic_bool cancel = false;
	uint64_t size = 0;

	assert_true(fd >= 0);
	assert_non_null(buf);
	unlink(path);
	assert_int_equal(write(fd, buf, 200000), 200000);
	assert_int_equal(digest_file_bounded(fd, 199999, NULL, out, &size), -EFBIG);
	assert_int_equal(digest_file_bounded(fd, 200000, &cancel, out, &size), 0);
	assert_int_equal(size, 200000);
	cancel = true;
	assert_int_equal(digest_file_bounded(fd, 200000, &cancel, out, &size), -ECANCELED);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_digest_file_known_answers),
		cmocka_unit_test(test_digest_file_million_a),
		cmocka_unit_test(test_digest_file_bad_input),
		cmocka_unit_test(test_digest_file_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
