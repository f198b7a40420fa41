/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * SHA-256's x86_64 block functions and their CPUID dispatch (see sha256.h):
 * AVX2, SHA-NI (one and two streams), and sha256-sse2.S. Freestanding like
 * sha256.c: the SIMD functions are compiled with per-function target
 * attributes, so the rest builds with -mgeneral-regs-only for purgatory.
 */

#include <cpuid.h>
#include <immintrin.h>

#include "sha256-internal.h"

/* 64 rounds over a precomputed W[t] + K[t] (the AVX2 schedule feeds this). */
static inline __attribute__((always_inline)) void sha256_rounds_wk(uint32_t state[8],
                                                                   const uint32_t wk[64]) {
	uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
	uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
	uint32_t bc = b ^ c;

	for (unsigned t = 0; t < 64; t += 8) {
		ROUND(a, b, c, d, e, f, g, h, wk[t + 0]);
		ROUND(h, a, b, c, d, e, f, g, wk[t + 1]);
		ROUND(g, h, a, b, c, d, e, f, wk[t + 2]);
		ROUND(f, g, h, a, b, c, d, e, wk[t + 3]);
		ROUND(e, f, g, h, a, b, c, d, wk[t + 4]);
		ROUND(d, e, f, g, h, a, b, c, wk[t + 5]);
		ROUND(c, d, e, f, g, h, a, b, wk[t + 6]);
		ROUND(b, c, d, e, f, g, h, a, wk[t + 7]);
	}

	SHA256_STATE_ADD(state, a, b, c, d, e, f, g, h);
}

/*
 * AVX2: the message schedule of two consecutive blocks is computed together,
 * one block per 128-bit lane of a ymm register (lane-wise instructions only),
 * and stored as W[t] + K[t]; the rounds then run in general registers, where
 * BMI2 gives three-operand rotates. AVX2 has no 32-bit vector rotate, so each
 * rotate is two shifts and an or.
 */
#define AVX2_TARGET __attribute__((target("avx2,bmi2")))

AVX2_TARGET static inline __m256i avx2_ror(__m256i x, int n) {
	return _mm256_or_si256(_mm256_srli_epi32(x, n), _mm256_slli_epi32(x, 32 - n));
}

AVX2_TARGET static inline __m256i avx2_ssig0(__m256i x) {
	return _mm256_xor_si256(_mm256_xor_si256(avx2_ror(x, 7), avx2_ror(x, 18)),
	                        _mm256_srli_epi32(x, 3));
}

AVX2_TARGET static inline __m256i avx2_ssig1(__m256i x) {
	return _mm256_xor_si256(_mm256_xor_si256(avx2_ror(x, 17), avx2_ror(x, 19)),
	                        _mm256_srli_epi32(x, 10));
}

/* Schedules blocks p0 and p1 (p1 may equal p0 when there is a single block left)
 * into wk0 and wk1. */
AVX2_TARGET static void sha256_schedule2_avx2(const uint8_t *p0, const uint8_t *p1,
                                              uint32_t wk0[64], uint32_t wk1[64]) {
	const __m256i bswap = _mm256_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3,
	                                      12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);
	/* Lanes 0,1 (low half) and lanes 2,3 (high half) of each 128-bit lane. */
	const __m256i lo_mask = _mm256_set_epi32(0, 0, -1, -1, 0, 0, -1, -1);
	const __m256i hi_mask = _mm256_set_epi32(-1, -1, 0, 0, -1, -1, 0, 0);
	__m256i x[4];

	for (unsigned j = 0; j < 4; j++) {
		__m128i a = _mm_loadu_si128((const __m128i *)(p0 + 16 * j));
		__m128i b = _mm_loadu_si128((const __m128i *)(p1 + 16 * j));
		x[j] = _mm256_shuffle_epi8(_mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1),
		                           bswap);
	}

	for (unsigned j = 0; j < 16; j++) {
		__m256i k = _mm256_broadcastsi128_si256(
		        _mm_load_si128((const __m128i *)(sha256_k + 4 * j)));
		__m256i cur;

		if (j < 4)
			cur = x[j];
		else {
			/* x[j&3] holds W[4j-16..4j-13]; its neighbours give the taps. */
			__m256i w16 = x[j & 3];
			__m256i w15 = _mm256_alignr_epi8(x[(j + 1) & 3], x[j & 3], 4);
			__m256i w7 = _mm256_alignr_epi8(x[(j + 3) & 3], x[(j + 2) & 3], 4);
			__m256i w2 = x[(j + 3) & 3];
			__m256i t = _mm256_add_epi32(_mm256_add_epi32(w16, avx2_ssig0(w15)), w7);

			/* W[4j], W[4j+1] need W[4j-2], W[4j-1]: the high words of w2. */
			t = _mm256_add_epi32(
			        t, _mm256_and_si256(avx2_ssig1(_mm256_shuffle_epi32(w2, 0xEE)),
			                            lo_mask));
			/* W[4j+2], W[4j+3] need the two words just computed. */
			t = _mm256_add_epi32(
			        t, _mm256_and_si256(avx2_ssig1(_mm256_shuffle_epi32(t, 0x44)),
			                            hi_mask));
			x[j & 3] = t;
			cur = t;
		}

		__m256i s = _mm256_add_epi32(cur, k);
		_mm_store_si128((__m128i *)(wk0 + 4 * j), _mm256_castsi256_si128(s));
		_mm_store_si128((__m128i *)(wk1 + 4 * j), _mm256_extracti128_si256(s, 1));
	}
}

AVX2_TARGET static void sha256_rounds_avx2(uint32_t state[8], const uint32_t wk[64]) {
	sha256_rounds_wk(state, wk);
}

AVX2_TARGET static void sha256_blocks_avx2(uint32_t state[8], const uint8_t *data, size_t nblocks) {
	uint32_t wk0[64] __attribute__((aligned(32)));
	uint32_t wk1[64] __attribute__((aligned(32)));

	for (; nblocks >= 2; nblocks -= 2, data += 2 * SHA256_BLOCK_SIZE) {
		sha256_schedule2_avx2(data, data + SHA256_BLOCK_SIZE, wk0, wk1);
		sha256_rounds_avx2(state, wk0);
		sha256_rounds_avx2(state, wk1);
	}
	if (nblocks > 0) {
		sha256_schedule2_avx2(data, data, wk0, wk1);
		sha256_rounds_avx2(state, wk0);
	}
	/* Leave no upper ymm state behind (avoids SSE/AVX transition stalls). */
	_mm256_zeroupper();
}

/*
 * SHA-NI: the state lives in two xmm registers as ABEF and CDGH, the order
 * sha256rnds2 expects. Each group of four rounds feeds W+K through two
 * sha256rnds2, while sha256msg1/msg2 extend the schedule a few groups ahead.
 */
#define SHANI_TARGET __attribute__((target("sha,sse4.1")))

/* Group g of four rounds of the stream whose state is (s0, s1) = (ABEF, CDGH)
 * on message words m = W[4g..4g+3]; n is the slot of W[4g+4..] being finished,
 * p the slot whose msg1 part starts here. */
#define SHANI_GROUP(s0, s1, g, m, n, p)                                                            \
	do {                                                                                       \
		__m128i wk =                                                                       \
		        _mm_add_epi32((m), _mm_load_si128((const __m128i *)(sha256_k + 4 * (g)))); \
		(s1) = _mm_sha256rnds2_epu32((s1), (s0), wk);                                      \
		if ((g) >= 3 && (g) <= 14) {                                                       \
			(n) = _mm_add_epi32((n), _mm_alignr_epi8((m), (p), 4));                    \
			(n) = _mm_sha256msg2_epu32((n), (m));                                      \
		}                                                                                  \
		wk = _mm_shuffle_epi32(wk, 0x0E);                                                  \
		(s0) = _mm_sha256rnds2_epu32((s0), (s1), wk);                                      \
		if ((g) >= 1 && (g) <= 12)                                                         \
			(p) = _mm_sha256msg1_epu32((p), (m));                                      \
	} while (0)

/* The 16 groups of one block; slots rotate: group g uses slot g%4, finishes
 * slot (g+1)%4 and starts msg1 in slot (g+3)%4. */
#define SHANI_BLOCK(s0, s1, m0, m1, m2, m3)          \
	do {                                         \
		SHANI_GROUP(s0, s1, 0, m0, m1, m3);  \
		SHANI_GROUP(s0, s1, 1, m1, m2, m0);  \
		SHANI_GROUP(s0, s1, 2, m2, m3, m1);  \
		SHANI_GROUP(s0, s1, 3, m3, m0, m2);  \
		SHANI_GROUP(s0, s1, 4, m0, m1, m3);  \
		SHANI_GROUP(s0, s1, 5, m1, m2, m0);  \
		SHANI_GROUP(s0, s1, 6, m2, m3, m1);  \
		SHANI_GROUP(s0, s1, 7, m3, m0, m2);  \
		SHANI_GROUP(s0, s1, 8, m0, m1, m3);  \
		SHANI_GROUP(s0, s1, 9, m1, m2, m0);  \
		SHANI_GROUP(s0, s1, 10, m2, m3, m1); \
		SHANI_GROUP(s0, s1, 11, m3, m0, m2); \
		SHANI_GROUP(s0, s1, 12, m0, m1, m3); \
		SHANI_GROUP(s0, s1, 13, m1, m2, m0); \
		SHANI_GROUP(s0, s1, 14, m2, m3, m1); \
		SHANI_GROUP(s0, s1, 15, m3, m0, m2); \
	} while (0)

/* Loads a block's four message slots, byte-swapped to big-endian words. */
#define SHANI_LOAD(p, m0, m1, m2, m3)                                                          \
	do {                                                                                   \
		const __m128i bswap_ =                                                         \
		        _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);          \
		(m0) = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)((p) + 0)), bswap_);  \
		(m1) = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)((p) + 16)), bswap_); \
		(m2) = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)((p) + 32)), bswap_); \
		(m3) = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)((p) + 48)), bswap_); \
	} while (0)

/* state[8] (a..h) to the ABEF and CDGH registers sha256rnds2 works on, and back. */
SHANI_TARGET static inline void shani_state_load(const uint32_t state[8], __m128i *ret_abef,
                                                 __m128i *ret_cdgh) {
	__m128i cdab = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&state[0]), 0xB1);
	__m128i efgh = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&state[4]), 0x1B);

	*ret_abef = _mm_alignr_epi8(cdab, efgh, 8);
	*ret_cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
}

SHANI_TARGET static inline void shani_state_store(uint32_t state[8], __m128i abef, __m128i cdgh) {
	__m128i feba = _mm_shuffle_epi32(abef, 0x1B);
	__m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);

	_mm_storeu_si128((__m128i *)&state[0], _mm_blend_epi16(feba, dchg, 0xF0));
	_mm_storeu_si128((__m128i *)&state[4], _mm_alignr_epi8(dchg, feba, 8));
}

SHANI_TARGET static void sha256_blocks_shani(uint32_t state[8], const uint8_t *data,
                                             size_t nblocks) {
	__m128i st0, st1;

	shani_state_load(state, &st0, &st1);
	for (; nblocks > 0; nblocks--, data += SHA256_BLOCK_SIZE) {
		__m128i save0 = st0, save1 = st1, m0, m1, m2, m3;

		SHANI_LOAD(data, m0, m1, m2, m3);
		SHANI_BLOCK(st0, st1, m0, m1, m2, m3);
		st0 = _mm_add_epi32(st0, save0);
		st1 = _mm_add_epi32(st1, save1);
	}
	shani_state_store(state, st0, st1);
}

/*
 * Two independent streams, block by block in one loop: sha256rnds2 has a
 * latency of several cycles and each stream's rounds depend on the previous
 * ones, so a second stream fills the cycles a single one leaves idle. Both
 * streams' registers (16 xmm) fit the SSE register file without spills.
 */
SHANI_TARGET void sha256_blocks_shani_x2(uint32_t state0[8], const uint8_t *p0, uint32_t state1[8],
                                         const uint8_t *p1, size_t nblocks) {
	__m128i a0, a1, b0, b1;

	shani_state_load(state0, &a0, &a1);
	shani_state_load(state1, &b0, &b1);
	for (; nblocks > 0; nblocks--, p0 += SHA256_BLOCK_SIZE, p1 += SHA256_BLOCK_SIZE) {
		__m128i sa0 = a0, sa1 = a1, sb0 = b0, sb1 = b1;
		__m128i am0, am1, am2, am3, bm0, bm1, bm2, bm3;

		SHANI_LOAD(p0, am0, am1, am2, am3);
		SHANI_LOAD(p1, bm0, bm1, bm2, bm3);
		SHANI_BLOCK(a0, a1, am0, am1, am2, am3);
		SHANI_BLOCK(b0, b1, bm0, bm1, bm2, bm3);
		a0 = _mm_add_epi32(a0, sa0);
		a1 = _mm_add_epi32(a1, sa1);
		b0 = _mm_add_epi32(b0, sb0);
		b1 = _mm_add_epi32(b1, sb1);
	}
	shani_state_store(state0, a0, a1);
	shani_state_store(state1, b0, b1);
}

/* XCR0 bits 1 (SSE) and 2 (AVX): the OS saves ymm state, so AVX may be used. */
static bool cpu_ymm_enabled(void) {
	unsigned a, b, c, d;
	uint32_t lo, hi;

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || !(c & bit_AVX))
		return false;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return (lo & 0x6) == 0x6;
}

bool sha256_impl_supported(Sha256Impl impl) {
	unsigned a, b, c, d;

	switch (impl) {
	case SHA256_IMPL_GENERIC:
		return true;
	case SHA256_IMPL_SSE2:
		/* Part of x86_64; purgatory's entry enables it, as user space has it. */
		return __get_cpuid(1, &a, &b, &c, &d) && (d & bit_SSE2);
	case SHA256_IMPL_AVX2:
		if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
			return false;
		return (b & bit_AVX2) && (b & bit_BMI2) && cpu_ymm_enabled();
	case SHA256_IMPL_SHANI:
		if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSE4_1) || !(c & bit_SSSE3))
			return false;
		if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
			return false;
		return b & bit_SHA;
	default:
		return false;
	}
}

Sha256Impl sha256_impl_best(void) {
	if (sha256_impl_supported(SHA256_IMPL_SHANI))
		return SHA256_IMPL_SHANI;
	if (sha256_impl_supported(SHA256_IMPL_AVX2))
		return SHA256_IMPL_AVX2;
	return SHA256_IMPL_GENERIC;
}

uint64_t sha256_ticks(void) {
	uint32_t lo, hi;

	__asm__ volatile("lfence; rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}

bool sha256_arch_blocks(Sha256Impl impl, uint32_t state[8], const uint8_t *data, size_t nblocks) {
	switch (impl) {
	case SHA256_IMPL_SHANI:
		sha256_blocks_shani(state, data, nblocks);
		return true;
	case SHA256_IMPL_AVX2:
		sha256_blocks_avx2(state, data, nblocks);
		return true;
	case SHA256_IMPL_SSE2:
		sha256_blocks_sse2(state, data, nblocks);
		return true;
	default:
		return false;
	}
}
