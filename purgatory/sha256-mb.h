/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Multi-buffer SHA-256: many independent messages hashed at once, one per lane.
 * A single SHA-256 stream is a chain of dependent rounds; independent streams
 * fill the cycles it leaves idle:
 *   SHA256_IMPL_SHANI    2 lanes, two sha256rnds2 chains interleaved
 *   SHA256_IMPL_AVX2     16 lanes: two groups of 8, one 32-bit word of each
 *                        lane per ymm element (state and message schedule
 *                        transposed), the two groups' rounds interleaved
 *   SHA256_IMPL_GENERIC  1 lane, the portable block function
 *   SHA256_IMPL_ARMV8_CE 1 lane, the ARMv8 SHA-2 instructions
 * Each message may be cut into fixed-size chunks; every chunk gets its own,
 * ordinary SHA-256 digest (the one `sha256sum` gives for those bytes). The
 * manager keeps every lane busy: a lane that finishes a chunk takes the next
 * one, from the same message or the next, until all are done.
 *
 * Freestanding like sha256.c (purgatory runs it): no libc, no pointers in
 * static data; the manager lives in the caller's memory (about 3.7 KiB).
 */

#include "sha256.h"

#define SHA256_MB_MAX_LANES 16

struct sha256_mb_msg {
	const void *data;
	uint64_t size;
};

struct sha256_mb_lane {
	uint32_t state[8];
	const uint8_t *p; /* next block */
	uint64_t blocks;  /* blocks left at p */
	uint64_t index;   /* chunk index over all messages */
	uint32_t phase;   /* idle, body (blocks of the message), tail (pad), done */
	uint32_t tail;    /* bytes of the chunk after its last full block */
	uint64_t size;    /* the chunk's length */
	uint8_t pad[2 * SHA256_BLOCK_SIZE] __attribute__((aligned(32)));
};

struct sha256_mb {
	Sha256Impl impl;
	unsigned lanes;
	const struct sha256_mb_msg *msgs;
	size_t nr_msgs;
	uint64_t chunk_size;
	size_t msg;          /* the message the next chunk comes from */
	uint64_t offset;     /* where the next chunk starts in it */
	uint64_t next_index; /* the next chunk's index */
	struct sha256_mb_lane lane[SHA256_MB_MAX_LANES];
};

/* Lanes impl hashes at once (1 for an invalid or unsupported one: generic). */
unsigned sha256_mb_lanes(Sha256Impl impl);

/* Chunks of size bytes: ceil(size / chunk_size), and 1 for an empty message
 * (its digest is that of the empty string). chunk_size 0: the whole message. */
uint64_t sha256_mb_chunks(uint64_t size, uint64_t chunk_size);

/*
 * Starts hashing msgs[0..nr_msgs) cut into chunks of chunk_size bytes (0: one
 * chunk per message). Chunks are numbered in order: message 0's first, ...
 * impl must be supported (else generic is used). msgs must outlive the run.
 */
void sha256_mb_start(struct sha256_mb *mb, Sha256Impl impl, const struct sha256_mb_msg *msgs,
                     size_t nr_msgs, uint64_t chunk_size);

/* Hashes until a chunk is complete: its index and digest. False when every
 * chunk was returned (in no particular order). */
bool sha256_mb_next(struct sha256_mb *mb, uint64_t *ret_index,
                    uint8_t ret_digest[static SHA256_DIGEST_SIZE]);

/* One call for all chunks: ret_digests[i] for chunk i (tests, the loader). */
void sha256_mb_digest_all(Sha256Impl impl, const struct sha256_mb_msg *msgs, size_t nr_msgs,
                          uint64_t chunk_size, uint8_t (*ret_digests)[SHA256_DIGEST_SIZE]);

/* The supported implementation that hashes eight 512-byte messages fastest in
 * multi-buffer mode, timed with the TSC (best of three). On hardware: SHA-NI
 * where present, else AVX2. Under an emulator it measures what the emulator
 * makes of each. */
Sha256Impl sha256_mb_calibrate(void);
