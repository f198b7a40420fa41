/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * SHA-256: known answers from the standards, then every implementation this CPU
 * can run compared with OpenSSL's libcrypto (an independent implementation) over
 * every length 0..1024, unaligned buffers and incremental updates split at every
 * offset. Implementations the CPU (or valgrind's synthetic CPUID, which hides
 * SHA-NI) does not offer are reported and skipped, never silently passed.
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "macros.h"
#include "sha256-test-util.h"
#include "sha256.h"

static void assert_digest_hex(Sha256Impl impl, const void *data, size_t size,
                              const char *expected) {
	uint8_t d[SHA256_DIGEST_SIZE];
	char s[2 * SHA256_DIGEST_SIZE + 1];

	sha256_digest_impl(impl, data, size, d);
	hex(d, sizeof(d), s);
	if (!streq(s, expected))
		print_message("impl %s, %zu bytes\n", sha256_impl_to_string(impl), size);
	assert_string_equal(s, expected);
}

/*
 * FIPS 180-4 examples (NIST CSRC "Cryptographic Standards and Guidelines,
 * Examples with Intermediate Values", SHA256.pdf and SHA256_2.pdf, also
 * FIPS 180-2 Appendix B.1-B.3): "abc", the 448-bit message, one million 'a'.
 * The empty message is the well-known e3b0c442... value (SHA256ShortMsg.rsp,
 * Len = 0).
 */
static void test_sha256_fips_examples(void **state) {
	_cleanup_free_ char *million = malloc(1000000);

	assert_non_null(million);
	memset(million, 'a', 1000000);

	for (Sha256Impl i = 0; i < _SHA256_IMPL_MAX; i++) {
		if (!impl_usable(i))
			continue;
		assert_digest_hex(
		        i, "", 0,
		        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
		assert_digest_hex(
		        i, "abc", 3,
		        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
		assert_digest_hex(
		        i, "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
		        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
		assert_digest_hex(
		        i, million, 1000000,
		        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	}
}

/* NIST CAVP SHA256ShortMsg.rsp (byte-oriented, shabytetestvectors.zip): the
 * Len = 8, 16, 24 and 32 lines. */
static void test_sha256_cavp_short_msg(void **state) {
	static const struct {
		uint8_t msg[4];
		size_t len;
		const char *md;
	} vectors[] = {
		{ { 0xd3 }, 1, "28969cdfa74a12c82f3bad960b0b000aca2ac329deea5c2328ebc6f2ba9802c1" },
		{ { 0x11, 0xaf },
		  2,
		  "5ca7133fa735326081558ac312c620eeca9970d1e70a4b95533d956f072d1f98" },
		{ { 0xb4, 0x19, 0x0e },
		  3,
		  "dff2e73091f6c05e528896c4c831b9448653dc2ff043528f6769437bc7b975c2" },
		{ { 0x74, 0xba, 0x25, 0x21 },
		  4,
		  "b16aa56be3880d18cd41e68384cf1ec8c17680c45a02b1575dc1518923ae8b0e" },
	};

	for (Sha256Impl i = 0; i < _SHA256_IMPL_MAX; i++) {
		if (!impl_usable(i))
			continue;
		for (size_t v = 0; v < ELEMENTSOF(vectors); v++)
			assert_digest_hex(i, vectors[v].msg, vectors[v].len, vectors[v].md);
	}
}

/* Every length 0..1024 at every alignment 0..7 (one shot) against libcrypto. */
static void test_sha256_all_lengths_unaligned(void **state) {
	_cleanup_free_ uint8_t *buf = malloc(1024 + 8);

	assert_non_null(buf);
	fill(buf, 1024 + 8, 0x5eed);

	for (Sha256Impl i = 0; i < _SHA256_IMPL_MAX; i++) {
		if (!impl_usable(i))
			continue;
		for (size_t off = 0; off < 8; off++)
			for (size_t len = 0; len <= 1024; len++) {
				uint8_t got[SHA256_DIGEST_SIZE], want[SHA256_DIGEST_SIZE];

				sha256_digest_impl(i, buf + off, len, got);
				reference_sha256(buf + off, len, want);
				if (memcmp(got, want, sizeof(got)) != 0)
					fail_msg("impl %s, offset %zu, length %zu differs from "
					         "libcrypto",
					         sha256_impl_to_string(i), off, len);
			}
	}
}

/* Two updates split at every offset of a 1024-byte message, plus byte-at-a-time
 * and odd-sized chunks, must equal the one-shot reference. */
static void test_sha256_incremental_every_split(void **state) {
	uint8_t buf[1024 + 3], want[SHA256_DIGEST_SIZE];
	const size_t n = 1024;
	const uint8_t *msg = buf + 3; /* also unaligned */

	fill(buf, sizeof(buf), 0xabcdef);
	reference_sha256(msg, n, want);

	for (Sha256Impl i = 0; i < _SHA256_IMPL_MAX; i++) {
		if (!impl_usable(i))
			continue;
		for (size_t split = 0; split <= n; split++) {
			struct sha256_ctx ctx;
			uint8_t got[SHA256_DIGEST_SIZE];

			sha256_init_impl(&ctx, i);
			sha256_update(&ctx, msg, split);
			sha256_update(&ctx, msg + split, n - split);
			sha256_final(&ctx, got);
			if (memcmp(got, want, sizeof(got)) != 0)
				fail_msg("impl %s, split at %zu differs", sha256_impl_to_string(i),
				         split);
		}

		for (size_t chunk = 1; chunk <= 130; chunk++) {
			struct sha256_ctx ctx;
			uint8_t got[SHA256_DIGEST_SIZE];

			sha256_init_impl(&ctx, i);
			for (size_t p = 0; p < n; p += chunk)
				sha256_update(&ctx, msg + p, MIN(chunk, n - p));
			sha256_final(&ctx, got);
			if (memcmp(got, want, sizeof(got)) != 0)
				fail_msg("impl %s, chunks of %zu differ", sha256_impl_to_string(i),
				         chunk);
		}
	}
}

/* Large buffers with odd block counts (the AVX2 path hashes blocks in pairs). */
static void test_sha256_large_buffers(void **state) {
	const size_t n = (4u << 20) + 64 * 3 + 17;
	_cleanup_free_ uint8_t *buf = malloc(n);
	uint8_t want[SHA256_DIGEST_SIZE];

	assert_non_null(buf);
	fill(buf, n, 0x1234);

	for (size_t len = n - 64 * 3; len <= n; len += 64) {
		reference_sha256(buf, len, want);
		for (Sha256Impl i = 0; i < _SHA256_IMPL_MAX; i++) {
			uint8_t got[SHA256_DIGEST_SIZE];

			if (!impl_usable(i))
				continue;
			sha256_digest_impl(i, buf, len, got);
			if (memcmp(got, want, sizeof(got)) != 0)
				fail_msg("impl %s, %zu bytes differs", sha256_impl_to_string(i),
				         len);
		}
	}
}

/* The best implementation is one the CPU supports; names round-trip; an invalid
 * implementation falls back to generic instead of calling an unsupported path. */
static void test_sha256_impl_selection(void **state) {
	Sha256Impl best = sha256_impl_best();
	struct sha256_ctx ctx;

	assert_true(sha256_impl_supported(best));
	assert_true(sha256_impl_supported(SHA256_IMPL_GENERIC));
	print_message("[ INFO     ] best implementation here: %s\n", sha256_impl_to_string(best));

	for (Sha256Impl i = 0; i < _SHA256_IMPL_MAX; i++)
		assert_int_equal(sha256_impl_from_string(sha256_impl_to_string(i)), i);
	assert_int_equal(sha256_impl_from_string("sha3"), _SHA256_IMPL_INVALID);
	assert_int_equal(sha256_impl_from_string(NULL), _SHA256_IMPL_INVALID);
	assert_null(sha256_impl_to_string(_SHA256_IMPL_MAX));
	assert_false(sha256_impl_supported(_SHA256_IMPL_INVALID));

	sha256_init_impl(&ctx, _SHA256_IMPL_INVALID);
	assert_int_equal(ctx.impl, SHA256_IMPL_GENERIC);
	sha256_init(&ctx);
	assert_int_equal(ctx.impl, best);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sha256_fips_examples),
		cmocka_unit_test(test_sha256_cavp_short_msg),
		cmocka_unit_test(test_sha256_all_lengths_unaligned),
		cmocka_unit_test(test_sha256_incremental_every_split),
		cmocka_unit_test(test_sha256_large_buffers),
		cmocka_unit_test(test_sha256_impl_selection),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
