/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Multi-buffer SHA-256 (sha256-mb.c, the code purgatory verifies with):
 * known answers from the standards placed in every lane, next to lanes of
 * other lengths; every chunk of random messages against OpenSSL's libcrypto;
 * the chunk numbering the loader<->purgatory contract relies on. Every
 * implementation this CPU offers; the others are reported and skipped.
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "macros.h"
#include "sha256-mb.h"
#include "sha256-test-util.h"
#include "sha256.h"

/*
 * Provenance: FIPS 180-4 examples (NIST CSRC "Examples with Intermediate
 * Values", SHA256.pdf and SHA256_2.pdf; FIPS 180-2 Appendix B): "abc", the
 * 448-bit message (56 bytes: the length no longer fits its block, two padding
 * blocks) and one million 'a'; the 896-bit message (112 bytes) from the NIST
 * SHA-2 additional examples; the empty message and the one- to four-byte
 * messages are the Len = 0, 8, 16, 24, 32 lines of NIST CAVP SHA256ShortMsg.rsp.
 */
static const struct kat {
	const char *msg; /* NULL: one million 'a' */
	size_t len;
	const char *md;
} kats[] = {
	{ "", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
	{ "\xd3", 1, "28969cdfa74a12c82f3bad960b0b000aca2ac329deea5c2328ebc6f2ba9802c1" },
	{ "\x11\xaf", 2, "5ca7133fa735326081558ac312c620eeca9970d1e70a4b95533d956f072d1f98" },
	{ "abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
	{ "\xb4\x19\x0e", 3, "dff2e73091f6c05e528896c4c831b9448653dc2ff043528f6769437bc7b975c2" },
	{ "\x74\xba\x25\x21", 4,
	  "b16aa56be3880d18cd41e68384cf1ec8c17680c45a02b1575dc1518923ae8b0e" },
	{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
	  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
	{ "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqr"
	  "lmnopqrsmnopqrstnopqrstu",
	  112, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1" },
	{ NULL, 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0" },
};

/* Every rotation of the vector list, so each vector starts in each lane, beside
 * lanes of very different lengths (0 bytes to 1 MB). */
static void test_sha256_mb_known_answers_in_every_lane(void **state) {
	_cleanup_free_ char *million = malloc(1000000);
	const size_t n = ELEMENTSOF(kats);

	assert_non_null(million);
	memset(million, 'a', 1000000);
	for (Sha256Impl impl = 0; impl < _SHA256_IMPL_MAX; impl++) {
		if (!impl_usable(impl))
			continue;
		for (size_t rot = 0; rot < n; rot++) {
			struct sha256_mb_msg msgs[ELEMENTSOF(kats)];
			uint8_t got[ELEMENTSOF(kats)][SHA256_DIGEST_SIZE];

			for (size_t i = 0; i < n; i++) {
				const struct kat *k = &kats[(i + rot) % n];

				msgs[i] = (struct sha256_mb_msg){ k->msg ?: million, k->len };
			}
			sha256_mb_digest_all(impl, msgs, n, 0, got);
			for (size_t i = 0; i < n; i++) {
				char s[2 * SHA256_DIGEST_SIZE + 1];

				hex(got[i], SHA256_DIGEST_SIZE, s);
				if (!streq(s, kats[(i + rot) % n].md))
					fail_msg("%s: vector %zu (%zu bytes) in position %zu: %s",
					         sha256_impl_to_string(impl), (i + rot) % n,
					         kats[(i + rot) % n].len, i, s);
			}
		}
	}
}

/* The lengths around block edges, all in one run, every lane a different one. */
static void test_sha256_mb_block_edges(void **state) {
	static const size_t lens[] = {
		0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 1000
	};
	uint8_t buf[1024 + 3], got[ELEMENTSOF(lens)][SHA256_DIGEST_SIZE];
	struct sha256_mb_msg msgs[ELEMENTSOF(lens)];

	fill(buf, sizeof(buf), 77);
	for (Sha256Impl impl = 0; impl < _SHA256_IMPL_MAX; impl++) {
		if (!impl_usable(impl))
			continue;
		for (size_t i = 0; i < ELEMENTSOF(lens); i++)
			msgs[i] =
			        (struct sha256_mb_msg){ buf + 3 - i % 4, lens[i] }; /* unaligned */
		sha256_mb_digest_all(impl, msgs, ELEMENTSOF(lens), 0, got);
		for (size_t i = 0; i < ELEMENTSOF(lens); i++) {
			uint8_t want[SHA256_DIGEST_SIZE];

			reference_sha256(msgs[i].data, lens[i], want);
			if (memcmp(got[i], want, sizeof(want)) != 0)
				fail_msg("%s: %zu bytes differ from libcrypto",
				         sha256_impl_to_string(impl), lens[i]);
		}
	}
}

/* Random messages cut into random chunk sizes: every chunk's digest is
 * libcrypto's SHA-256 of those bytes, and every chunk index comes back once. */
static void test_sha256_mb_random_chunks_vs_openssl(void **state) {
	const size_t size = 256 << 10;
	_cleanup_free_ uint8_t *buf = malloc(size);
	_cleanup_free_ uint8_t(*got)[SHA256_DIGEST_SIZE] = NULL;
	uint32_t x = 0x5eed;

	assert_non_null(buf);
	fill(buf, size, x);
	for (Sha256Impl impl = 0; impl < _SHA256_IMPL_MAX; impl++) {
		if (!impl_usable(impl))
			continue;
		for (unsigned round = 0; round < 40; round++) {
			struct sha256_mb_msg msgs[12];
			size_t nr = 1 + xorshift(&x) % ELEMENTSOF(msgs), total = 0;
			uint64_t chunk = round % 5 == 0 ? 0 : 64 * (1 + xorshift(&x) % 100);
			struct sha256_mb mb;
			uint8_t d[SHA256_DIGEST_SIZE];
			uint64_t idx, seen = 0, k = 0;

			for (size_t i = 0; i < nr; i++) {
				size_t len = xorshift(&x) % (20000 + 1);
				size_t off = xorshift(&x) % (size - len);

				msgs[i] = (struct sha256_mb_msg){ buf + off, len };
				total += sha256_mb_chunks(len, chunk);
			}
			free(got);
			got = calloc(total, SHA256_DIGEST_SIZE);
			assert_non_null(got);
			sha256_mb_start(&mb, impl, msgs, nr, chunk);
			while (sha256_mb_next(&mb, &idx, d)) {
				assert_true(idx < total);
				memcpy(got[idx], d, sizeof(d));
				seen++;
			}
			assert_int_equal(seen, total);
			/* In order: message 0's chunks first, each chunk_size long. */
			for (size_t i = 0; i < nr; i++) {
				uint64_t nc = sha256_mb_chunks(msgs[i].size, chunk);

				for (uint64_t c = 0; c < nc; c++, k++) {
					uint64_t off = c * chunk;
					uint64_t len = chunk == 0 ? msgs[i].size
					                          : MIN(chunk, msgs[i].size - off);
					uint8_t want[SHA256_DIGEST_SIZE];

					reference_sha256((const uint8_t *)msgs[i].data + off, len,
					                 want);
					if (memcmp(got[k], want, sizeof(want)) != 0)
						fail_msg("%s: round %u message %zu chunk %" PRIu64
						         " differs from libcrypto",
						         sha256_impl_to_string(impl), round, i, c);
				}
			}
		}
	}
}

static void test_sha256_mb_chunk_count_and_lanes(void **state) {
	assert_int_equal(sha256_mb_chunks(0, 4096), 1);
	assert_int_equal(sha256_mb_chunks(1, 4096), 1);
	assert_int_equal(sha256_mb_chunks(4096, 4096), 1);
	assert_int_equal(sha256_mb_chunks(4097, 4096), 2);
	assert_int_equal(sha256_mb_chunks(1 << 30, 0), 1);

	assert_int_equal(sha256_mb_lanes(SHA256_IMPL_GENERIC), 1);
	assert_int_equal(sha256_mb_lanes(SHA256_IMPL_SHANI), 2);
	assert_int_equal(sha256_mb_lanes(SHA256_IMPL_AVX2), 16);
	assert_true(sha256_mb_lanes(_SHA256_IMPL_INVALID) == 1);

	/* Calibration picks an implementation this CPU runs. */
	Sha256Impl picked = sha256_mb_calibrate();
	assert_true(sha256_impl_supported(picked));
	print_message("[ INFO     ] multi-buffer calibration picks %s (%u lanes)\n",
	              sha256_impl_to_string(picked), sha256_mb_lanes(picked));
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sha256_mb_known_answers_in_every_lane),
		cmocka_unit_test(test_sha256_mb_block_edges),
		cmocka_unit_test(test_sha256_mb_random_chunks_vs_openssl),
		cmocka_unit_test(test_sha256_mb_chunk_count_and_lanes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
