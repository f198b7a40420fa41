/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Multi-buffer SHA-256 on x86_64 (see sha256-mb.h): the 16-lane AVX2 block
 * function and the two-stream SHA-NI one, run by the lane manager in
 * sha256-mb.c. The AVX2 code is enabled per function with a target attribute,
 * the rest builds with -mgeneral-regs-only for purgatory.
 */

#include <immintrin.h>

#include "sha256-internal.h"
#include "sha256-mb.h"

/*
 * AVX2, groups of 8 lanes: element i of every ymm register belongs to lane i, so one
 * instruction does one step of eight independent hashes, and the rounds are
 * the plain FIPS 180-4 formulas on vectors. The state and the message words
 * are transposed on the way in (eight 8x8 transposes per block of 8 lanes) and
 * the state on the way out. AVX2 has no vector rotate: two shifts and an xor.
 */
#define X8_TARGET __attribute__((target("avx2")))

#define X8_ADD(a, b)   _mm256_add_epi32((a), (b))
#define X8_XOR(a, b)   _mm256_xor_si256((a), (b))
#define X8_AND(a, b)   _mm256_and_si256((a), (b))
#define X8_SHR(x, n)   _mm256_srli_epi32((x), (n))
#define X8_SHL(x, n)   _mm256_slli_epi32((x), (n))
#define X8_ROR(x, n)   X8_XOR(X8_SHR((x), (n)), X8_SHL((x), 32 - (n)))
#define X8_BSIG0(x)    X8_XOR(X8_XOR(X8_ROR((x), 2), X8_ROR((x), 13)), X8_ROR((x), 22))
#define X8_BSIG1(x)    X8_XOR(X8_XOR(X8_ROR((x), 6), X8_ROR((x), 11)), X8_ROR((x), 25))
#define X8_SSIG0(x)    X8_XOR(X8_XOR(X8_ROR((x), 7), X8_ROR((x), 18)), X8_SHR((x), 3))
#define X8_SSIG1(x)    X8_XOR(X8_XOR(X8_ROR((x), 17), X8_ROR((x), 19)), X8_SHR((x), 10))
#define X8_CH(e, f, g) X8_XOR(X8_AND(X8_XOR((f), (g)), (e)), (g))

/* Round t; bc carries the previous round's a ^ b, which is this round's b ^ c
 * (Maj(a,b,c) = b ^ ((a ^ b) & (b ^ c))). */
#define X8_ROUND(wk, bc, a, b, c, d, e, f, g, h, t)                                              \
	do {                                                                                     \
		__m256i t1 =                                                                     \
		        X8_ADD(X8_ADD((h), X8_BSIG1(e)), X8_ADD(X8_CH((e), (f), (g)), wk[(t)])); \
		__m256i ab = X8_XOR((a), (b));                                                   \
		__m256i t2 = X8_ADD(X8_BSIG0(a), X8_XOR((b), X8_AND(ab, bc)));                   \
		bc = ab;                                                                         \
		(d) = X8_ADD((d), t1);                                                           \
		(h) = X8_ADD(t1, t2);                                                            \
	} while (0)

/* W[t] for t >= 16 from the words before it. */
#define X8_SCHEDULE(t)                                           \
	(w[(t)] = X8_ADD(X8_ADD(w[(t)-16], X8_SSIG0(w[(t)-15])), \
	                 X8_ADD(w[(t)-7], X8_SSIG1(w[(t)-2]))))

/* Round t of both groups of 8 lanes: two independent chains for the
 * out-of-order core to overlap. */
#define X8_ROUND2(t, a, b, c, d, e, f, g, h)                                             \
	do {                                                                             \
		X8_ROUND(wk0, bc0, a##0, b##0, c##0, d##0, e##0, f##0, g##0, h##0, (t)); \
		X8_ROUND(wk1, bc1, a##1, b##1, c##1, d##1, e##1, f##1, g##1, h##1, (t)); \
	} while (0)

#define X8_ROUNDS8(t)                                       \
	do {                                                \
		X8_ROUND2((t) + 0, a, b, c, d, e, f, g, h); \
		X8_ROUND2((t) + 1, h, a, b, c, d, e, f, g); \
		X8_ROUND2((t) + 2, g, h, a, b, c, d, e, f); \
		X8_ROUND2((t) + 3, f, g, h, a, b, c, d, e); \
		X8_ROUND2((t) + 4, e, f, g, h, a, b, c, d); \
		X8_ROUND2((t) + 5, d, e, f, g, h, a, b, c); \
		X8_ROUND2((t) + 6, c, d, e, f, g, h, a, b); \
		X8_ROUND2((t) + 7, b, c, d, e, f, g, h, a); \
	} while (0)

/* r[i] holds 8 words of lane i; afterwards r[j] holds word j of every lane. */
X8_TARGET static inline void x8_transpose(__m256i r[8]) {
	__m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
	__m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
	__m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]), t5 = _mm256_unpackhi_epi32(r[4], r[5]);
	__m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]), t7 = _mm256_unpackhi_epi32(r[6], r[7]);
	__m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
	__m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
	__m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
	__m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);

	r[0] = _mm256_permute2x128_si256(u0, u4, 0x20);
	r[1] = _mm256_permute2x128_si256(u1, u5, 0x20);
	r[2] = _mm256_permute2x128_si256(u2, u6, 0x20);
	r[3] = _mm256_permute2x128_si256(u3, u7, 0x20);
	r[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
	r[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
	r[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
	r[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
}

/* The message schedule of one block of 8 lanes (lane i at p[i] + off):
 * W[t] + K[t] for all 64 rounds, W computed in place first (no second array
 * on purgatory's stack). */
X8_TARGET static inline void x8_schedule(const uint8_t *const p[8], uint64_t off, __m256i w[64]) {
	const __m256i bswap = _mm256_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3,
	                                      12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);

	for (unsigned half = 0; half < 2; half++) {
		for (unsigned i = 0; i < 8; i++)
			w[8 * half + i] = _mm256_shuffle_epi8(
			        _mm256_loadu_si256((const __m256i *)(p[i] + off + 32 * half)),
			        bswap);
		x8_transpose(&w[8 * half]);
	}
	for (unsigned t = 16; t < 64; t++)
		X8_SCHEDULE(t);
	for (unsigned t = 0; t < 64; t++)
		w[t] = X8_ADD(w[t], _mm256_set1_epi32((int)sha256_k[t]));
}

/*
 * nblocks blocks of each of 16 lanes (lane i reads from p[i]), as two groups
 * of 8 whose rounds are interleaved: one group's round t depends on its round
 * t - 1, so a second, independent group fills the cycles that chain leaves.
 * The schedule of a block is computed before its rounds: apart, each fits the
 * 16 ymm registers better.
 */
X8_TARGET static void sha256_blocks_avx2_x16(struct sha256_mb_lane *lane, const uint8_t *p[16],
                                             uint64_t nblocks) {
	__m256i s0[8], s1[8], wk0[64], wk1[64];

	for (unsigned i = 0; i < 8; i++) {
		s0[i] = _mm256_loadu_si256((const __m256i *)lane[i].state);
		s1[i] = _mm256_loadu_si256((const __m256i *)lane[8 + i].state);
	}
	x8_transpose(s0);
	x8_transpose(s1);

	for (uint64_t n = 0; n < nblocks; n++) {
		x8_schedule(p, n * SHA256_BLOCK_SIZE, wk0);
		x8_schedule(p + 8, n * SHA256_BLOCK_SIZE, wk1);

		__m256i a0 = s0[0], b0 = s0[1], c0 = s0[2], d0 = s0[3];
		__m256i e0 = s0[4], f0 = s0[5], g0 = s0[6], h0 = s0[7];
		__m256i a1 = s1[0], b1 = s1[1], c1 = s1[2], d1 = s1[3];
		__m256i e1 = s1[4], f1 = s1[5], g1 = s1[6], h1 = s1[7];
		__m256i bc0 = X8_XOR(b0, c0), bc1 = X8_XOR(b1, c1);

		for (unsigned t = 0; t < 64; t += 8)
			X8_ROUNDS8(t);

		s0[0] = X8_ADD(s0[0], a0);
		s0[1] = X8_ADD(s0[1], b0);
		s0[2] = X8_ADD(s0[2], c0);
		s0[3] = X8_ADD(s0[3], d0);
		s0[4] = X8_ADD(s0[4], e0);
		s0[5] = X8_ADD(s0[5], f0);
		s0[6] = X8_ADD(s0[6], g0);
		s0[7] = X8_ADD(s0[7], h0);
		s1[0] = X8_ADD(s1[0], a1);
		s1[1] = X8_ADD(s1[1], b1);
		s1[2] = X8_ADD(s1[2], c1);
		s1[3] = X8_ADD(s1[3], d1);
		s1[4] = X8_ADD(s1[4], e1);
		s1[5] = X8_ADD(s1[5], f1);
		s1[6] = X8_ADD(s1[6], g1);
		s1[7] = X8_ADD(s1[7], h1);
	}

	/* The transpose is its own inverse. */
	x8_transpose(s0);
	x8_transpose(s1);
	for (unsigned i = 0; i < 8; i++) {
		_mm256_storeu_si256((__m256i *)lane[i].state, s0[i]);
		_mm256_storeu_si256((__m256i *)lane[8 + i].state, s1[i]);
	}
	_mm256_zeroupper();
}

bool sha256_mb_arch_run(struct sha256_mb *mb, uint64_t n) {
	struct sha256_mb_lane *l = mb->lane;

	switch (mb->impl) {
	case SHA256_IMPL_AVX2: {
		const uint8_t *p[16];
		const uint8_t *any = NULL;

		for (unsigned i = 0; i < 16; i++)
			if (sha256_mb_lane_active(&l[i]))
				any = l[i].p;
		/* Idle lanes hash an active lane's blocks; their state is discarded. */
		for (unsigned i = 0; i < 16; i++)
			p[i] = sha256_mb_lane_active(&l[i]) ? l[i].p : any;
		sha256_blocks_avx2_x16(l, p, n);
		return true;
	}
	case SHA256_IMPL_SHANI:
		if (sha256_mb_lane_active(&l[0]) && sha256_mb_lane_active(&l[1])) {
			sha256_blocks_shani_x2(l[0].state, l[0].p, l[1].state, l[1].p, n);
			return true;
		}
		for (unsigned i = 0; i < 2; i++)
			if (sha256_mb_lane_active(&l[i]))
				sha256_blocks_impl(SHA256_IMPL_SHANI, l[i].state, l[i].p, n);
		return true;
	default:
		return false;
	}
}
