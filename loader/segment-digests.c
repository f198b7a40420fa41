/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * What purgatory checks, recorded at stage time: for every segment, the bytes
 * loaded from the file in fixed-size chunks, each with its SHA-256 (hashed
 * here with the same multi-buffer code purgatory runs), and the zero-filled
 * rest up to memsz, which purgatory checks for zeros.
 */

#include <errno.h>

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

int loader_params_set_digests(struct purgatory_params *p, const struct loader_segment *segs,
                              size_t n) {
	struct sha256_mb_msg msgs[PURGATORY_MAX_SEGMENTS];
	unsigned k = 0;
	uint32_t next = 0;

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
	sha256_mb_digest_all(sha256_impl_best(), msgs, k, p->chunk_size, p->chunk_sha256);
	return 0;
}

uint64_t loader_params_verified_bytes(const struct purgatory_params *p) {
	uint64_t n = 0;

	for (unsigned i = 0; i < p->nr_segments && i < PURGATORY_MAX_SEGMENTS; i++)
		n += p->segments[i].memsz;
	return n;
}
