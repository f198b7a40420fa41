/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * What purgatory checks, recorded at stage time: for every segment, the bytes
 * loaded from the file in fixed-size chunks, each with its SHA-256 (hashed
 * here with the same multi-buffer code purgatory runs), and the zero-filled
 * rest up to memsz, which purgatory checks for zeros. Which SHA-256
 * implementation purgatory runs is decided here too, by timing each one this
 * CPU offers on the staged bytes: purgatory then skips its own calibration,
 * which under an emulated CPU costs more than a run (each candidate's code is
 * translated before its first block).
 */

#include <errno.h>
#include <time.h>

#include "loader.h"
#include "sha256-mb.h"

/* The smallest power-of-two chunk size (>= PURGATORY_CHUNK_SIZE_MIN) with
 * which the segments need at most PURGATORY_MAX_CHUNKS digests. */
static uint64_t pick_chunk_size(const struct loader_segment *segs, size_t n) {
	for (uint64_t c = PURGATORY_CHUNK_SIZE_MIN;; c *= 2) {
		uint64_t total = 0;

		for (size_t i = 0; i < n; i++)
			if (segs[i].memsz > 0)
				total += sha256_mb_chunks(segs[i].bufsz, c);
		if (total <= PURGATORY_MAX_CHUNKS)
			return c;
	}
}

#define PICK_LANES      16 /* as many chunks as the widest implementation has lanes */
#define PICK_CHUNK_SIZE (UINT64_C(64) << 10) /* a lane: 1 MiB a timed run */
#define PICK_RUNS       2 /* timed runs after the untimed one; the fastest counts */

static uint64_t thread_cpu_ns(void) {
	struct timespec ts;

	(void)clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * The implementation that hashes the first MiB of the largest segment fastest
 * here, as PICK_LANES chunks of PICK_CHUNK_SIZE (so that multi-lane code runs
 * full): each candidate once untimed (its code and the bytes warm), then the
 * best of PICK_RUNS by this thread's CPU time, which other processes do not
 * stretch. A segment smaller than that is sampled as it is.
 */
Sha256Impl loader_sha256_pick(const struct loader_segment *segs, size_t n) {
	struct sha256_mb_msg msgs[PICK_LANES];
	uint8_t digests[PICK_LANES][SHA256_DIGEST_SIZE];
	const struct loader_segment *big = NULL;
	Sha256Impl best = SHA256_IMPL_GENERIC;
	uint64_t best_ns = UINT64_MAX, each;
	unsigned k;

	for (size_t i = 0; i < n; i++)
		if (segs[i].memsz > 0 && (!big || segs[i].bufsz > big->bufsz))
			big = &segs[i];
	if (!big || big->bufsz == 0)
		return sha256_impl_best();
	each = big->bufsz / PICK_LANES < PICK_CHUNK_SIZE ? big->bufsz / PICK_LANES
	                                                 : PICK_CHUNK_SIZE;
	each -= each % SHA256_BLOCK_SIZE;
	if (each == 0)
		return sha256_impl_best();
	for (k = 0; k < PICK_LANES; k++)
		msgs[k] = (struct sha256_mb_msg){ .data = (const uint8_t *)big->buf + k * each,
			                          .size = each };

	for (int impl = 0; impl < _SHA256_IMPL_MAX; impl++) {
		uint64_t fastest = UINT64_MAX;

		if (!sha256_impl_supported(impl))
			continue;
		for (int run = 0; run <= PICK_RUNS; run++) {
			uint64_t t0 = thread_cpu_ns(), t;

			sha256_mb_digest_all(impl, msgs, PICK_LANES, 0, digests);
			t = thread_cpu_ns() - t0;
			if (run > 0 && t < fastest)
				fastest = t;
		}
		if (fastest < best_ns) {
			best_ns = fastest;
			best = impl;
		}
	}
	return best;
}

int loader_params_set_digests(struct purgatory_params *p, const struct loader_segment *segs,
                              size_t n) {
	struct sha256_mb_msg msgs[PURGATORY_MAX_SEGMENTS];
	unsigned k = 0;
	uint32_t next = 0;
	Sha256Impl impl;

	for (size_t i = 0; i < n; i++)
		if (segs[i].memsz > 0) {
			if (k == PURGATORY_MAX_SEGMENTS)
				return -E2BIG;
			if (segs[i].bufsz > segs[i].memsz)
				return -EINVAL;
			k++;
		}

	p->chunk_size = pick_chunk_size(segs, n);
	k = 0;
	for (size_t i = 0; i < n; i++) {
		const struct loader_segment *s = &segs[i];
		uint32_t chunks;

		if (s->memsz == 0)
			continue;
		chunks = (uint32_t)sha256_mb_chunks(s->bufsz, p->chunk_size);
		p->segments[k] = (struct purgatory_segment){
			.addr = s->mem,
			.filesz = s->bufsz,
			.memsz = s->memsz,
			.first_chunk = next,
			.nr_chunks = chunks,
		};
		msgs[k++] = (struct sha256_mb_msg){ .data = s->buf, .size = s->bufsz };
		next += chunks;
	}
	p->nr_segments = (uint16_t)k;
	p->nr_chunks = next;
	impl = loader_sha256_pick(segs, n);
	p->sha256_impl_request = (uint32_t)impl + 1;
	sha256_mb_digest_all(impl, msgs, k, p->chunk_size, p->chunk_sha256);
	return 0;
}

uint64_t loader_params_verified_bytes(const struct purgatory_params *p) {
	uint64_t n = 0;

	for (unsigned i = 0; i < p->nr_segments && i < PURGATORY_MAX_SEGMENTS; i++)
		n += p->segments[i].memsz;
	return n;
}
