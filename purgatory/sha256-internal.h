/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What sha256.c shares with sha256-mb.c, and nothing else includes: the FIPS
 * 180-4 constants and the single-stream block functions the multi-buffer
 * manager falls back to.
 */

#include "sha256.h"

/* FIPS 180-4 section 4.2.2 (round constants) and 5.3.3 (initial hash value).
 * Hidden: referenced RIP-relative, never through a GOT entry holding an
 * absolute address, which purgatory (run without relocation) cannot use. */
extern const uint32_t sha256_k[64] __attribute__((visibility("hidden")));
extern const uint32_t sha256_h0[8] __attribute__((visibility("hidden")));

/* nblocks 64-byte blocks of one stream into state, with impl (supported). */
void sha256_blocks_impl(Sha256Impl impl, uint32_t state[8], const uint8_t *data, size_t nblocks);

/* sha256-sse2.S: the rounds unrolled, the schedule in xmm0-xmm15. */
void sha256_blocks_sse2(uint32_t state[8], const uint8_t *data, size_t nblocks)
        __attribute__((visibility("hidden")));

/* SHA-NI, two independent streams of nblocks blocks each. */
void sha256_blocks_shani_x2(uint32_t state0[8], const uint8_t *p0, uint32_t state1[8],
                            const uint8_t *p1, size_t nblocks);

/* The TSC, serialized by lfence (calibration). */
uint64_t sha256_tsc_read(void);
