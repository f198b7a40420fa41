/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>

#include "digest.h"
#include "macros.h"

/* Known answers from FIPS 180-2, Appendix B (SHA-256 examples B.1-B.3) and the
 * empty message from NIST's CAVS SHA256ShortMsg (Len = 0). */
static void hex(const uint8_t *md, char *out) {
	for (int i = 0; i < DIGEST_SHA256_SIZE; i++)
		sprintf(out + 2 * i, "%02x", md[i]);
}

static void check(const void *data, size_t len, const char *expected) {
	uint8_t md[DIGEST_SHA256_SIZE];
	char out[DIGEST_SHA256_HEX_SIZE];
	Sha256Ctx c;

	digest_sha256_init(&c);
	digest_sha256_update(&c, data, len);
	digest_sha256_final(&c, md);
	hex(md, out);
	assert_string_equal(out, expected);
}

static void test_digest_sha256_known_answers(void **state) {
	check("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	check("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	check("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
	      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

static void test_digest_sha256_million_a_in_odd_chunks(void **state) {
	uint8_t md[DIGEST_SHA256_SIZE], buf[997];
	char out[DIGEST_SHA256_HEX_SIZE];
	size_t left = 1000000;
	Sha256Ctx c;

	memset(buf, 'a', sizeof(buf));
	digest_sha256_init(&c);
	while (left > 0) {
		size_t n = MIN(left, sizeof(buf));

		digest_sha256_update(&c, buf, n);
		left -= n;
	}
	digest_sha256_final(&c, md);
	hex(md, out);
	assert_string_equal(out,
	                    "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void test_digest_file_hashes_whole_file(void **state) {
	char path[] = "/tmp/test-digest.XXXXXX", out[DIGEST_SHA256_HEX_SIZE];
	_cleanup_close_ int fd = mkstemp(path);
	uint64_t size = 0;

	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(write(fd, "abc", 3), 3);
	/* The fd offset is at the end: digest_file must not depend on it. */
	assert_int_equal(digest_file(fd, out, &size), 0);
	assert_int_equal(size, 3);
	assert_string_equal(out,
	                    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	assert_int_equal(digest_file(-1, out, &size), -EINVAL);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_digest_sha256_known_answers),
		cmocka_unit_test(test_digest_sha256_million_a_in_odd_chunks),
		cmocka_unit_test(test_digest_file_hashes_whole_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
