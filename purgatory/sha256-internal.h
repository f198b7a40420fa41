/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What the SHA-256 sources share with each other, and nothing else includes: the FIPS
 * 180-4 constants and the single-stream block functions the multi-buffer
 * manager falls back to.
 */

#include "sha256-mb.h"
#include "sha256.h"

/* FIPS 180-4 section 4.2.2 (round constants) and 5.3.3 (initial hash value).
 * Hidden: referenced RIP-relative, never through a GOT entry holding an
 * absolute address, which purgatory (run without relocation) cannot use. */
extern const uint32_t sha256_k[64] __attribute__((visibility("hidden")));
extern const uint32_t sha256_h0[8] __attribute__((visibility("hidden")));

/* nblocks 64-byte blocks of one stream into state, with impl (supported). */
void sha256_blocks_impl(Sha256Impl impl, uint32_t state[8], const uint8_t *data, size_t nblocks);

/* FIPS 180-4 section 4.1.2 functions, and one round, for every block function
 * written in C. */
static inline uint32_t ror32(uint32_t x, unsigned n) {
	return (x >> n) | (x << (32 - n));
}

#define CH(x, y, z) ((((y) ^ (z)) & (x)) ^ (z))
#define BSIG0(x)    (ror32((x), 2) ^ ror32((x), 13) ^ ror32((x), 22))
#define BSIG1(x)    (ror32((x), 6) ^ ror32((x), 11) ^ ror32((x), 25))
#define SSIG0(x)    (ror32((x), 7) ^ ror32((x), 18) ^ ((x) >> 3))
#define SSIG1(x)    (ror32((x), 17) ^ ror32((x), 19) ^ ((x) >> 10))

/*
 * One round with the working variables renamed instead of shifted. wk is
 * W[t] + K[t]. Maj(a,b,c) = b ^ ((a ^ b) & (b ^ c)), and this round's b ^ c is
 * the previous round's a ^ b, carried in `bc`: two operations instead of five.
 */
#define ROUND(a, b, c, d, e, f, g, h, wk)                                \
	do {                                                             \
		uint32_t t1 = (h) + BSIG1(e) + CH((e), (f), (g)) + (wk); \
		uint32_t ab = (a) ^ (b);                                 \
		uint32_t t2 = BSIG0(a) + ((b) ^ (ab & bc));              \
		bc = ab;                                                 \
		(d) += t1;                                               \
		(h) = t1 + t2;                                           \
	} while (0)

/* The end of a block: the working variables added into the state. */
#define SHA256_STATE_ADD(state, a, b, c, d, e, f, g, h) \
	do {                                            \
		(state)[0] += (a);                      \
		(state)[1] += (b);                      \
		(state)[2] += (c);                      \
		(state)[3] += (d);                      \
		(state)[4] += (e);                      \
		(state)[5] += (f);                      \
		(state)[6] += (g);                      \
		(state)[7] += (h);                      \
	} while (0)

/* The architecture's block functions (sha256-x86_64.c, sha256-arm64.c): false
 * when impl is not one of them (the caller uses the generic one). */
bool sha256_arch_blocks(Sha256Impl impl, uint32_t state[8], const uint8_t *data, size_t nblocks);

/* sha256-sse2.S: the rounds unrolled, the schedule in xmm0-xmm15. */
void sha256_blocks_sse2(uint32_t state[8], const uint8_t *data, size_t nblocks)
        __attribute__((visibility("hidden")));

/* SHA-NI, two independent streams of nblocks blocks each. */
void sha256_blocks_shani_x2(uint32_t state0[8], const uint8_t *p0, uint32_t state1[8],
                            const uint8_t *p1, size_t nblocks);

/* sha256-ce.S: the ARMv8 SHA-2 instructions, one stream. */
void sha256_blocks_ce(uint32_t state[8], const uint8_t *data, size_t nblocks)
        __attribute__((visibility("hidden")));

/* arm64: ID_AA64ISAR0_EL1 says the CPU has the SHA-256 instructions. */
bool sha256_arm64_isar0_has_sha256(uint64_t isar0);

/* The CPU's counter for calibration: the TSC serialized by lfence (x86_64),
 * CNTVCT_EL0 after an isb (arm64). */
uint64_t sha256_ticks(void);

/* The lane manager's phases (sha256-mb.c), and the multi-lane block functions
 * it runs where the architecture has them. */
enum {
	LANE_IDLE,
	LANE_BODY, /* full blocks straight from the message */
	LANE_TAIL, /* the last partial block and the padding, from lane->pad */
	LANE_DONE, /* digest ready, not yet returned */
};

static inline bool sha256_mb_lane_active(const struct sha256_mb_lane *l) {
	return l->phase == LANE_BODY || l->phase == LANE_TAIL;
}

/* n blocks of every active lane of mb, when mb->impl has a multi-lane block
 * function here; false otherwise (the manager runs lane 0 alone). */
bool sha256_mb_arch_run(struct sha256_mb *mb, uint64_t n);
