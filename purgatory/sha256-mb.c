/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Multi-buffer SHA-256 (see sha256-mb.h): the lane manager, on every
 * architecture; the multi-lane block functions are the architecture's
 * (sha256-mb-x86_64.c). Freestanding, like sha256.c.
 */

#include "sha256-internal.h"
#include "sha256-mb.h"

unsigned sha256_mb_lanes(Sha256Impl impl) {
	switch (impl) {
	case SHA256_IMPL_SHANI:
		return 2;
	case SHA256_IMPL_AVX2:
		return 16;
	default:
		return 1;
	}
}

uint64_t sha256_mb_chunks(uint64_t size, uint64_t chunk_size) {
	if (size == 0 || chunk_size == 0)
		return 1;
	return size / chunk_size + (size % chunk_size != 0);
}

/* FIPS 180-4 section 5.1.1 for the lane's chunk: its last partial block, a one
 * bit, zeros, the length in bits; one block, or two when the tail leaves no
 * room for the length. The tail is read from the lane's current pointer. */
static void lane_tail(struct sha256_mb_lane *l) {
	uint64_t bits = l->size * 8;
	unsigned n = l->tail + 1 + 8 > SHA256_BLOCK_SIZE ? 2 : 1;
	unsigned end = n * SHA256_BLOCK_SIZE;

	for (unsigned i = 0; i < l->tail; i++)
		l->pad[i] = l->p[i];
	l->pad[l->tail] = 0x80;
	for (unsigned i = l->tail + 1; i < end - 8; i++)
		l->pad[i] = 0;
	for (unsigned j = 0; j < 8; j++)
		l->pad[end - 1 - j] = (uint8_t)(bits >> (8 * j));
	l->p = l->pad;
	l->blocks = n;
	l->phase = LANE_TAIL;
}

static void lane_start(struct sha256_mb_lane *l, const uint8_t *p, uint64_t size, uint64_t index) {
	for (unsigned i = 0; i < 8; i++)
		l->state[i] = sha256_h0[i];
	l->p = p;
	l->size = size;
	l->index = index;
	l->tail = (uint32_t)(size % SHA256_BLOCK_SIZE);
	l->blocks = size / SHA256_BLOCK_SIZE;
	if (l->blocks > 0)
		l->phase = LANE_BODY;
	else
		lane_tail(l);
}

/* Gives l the next chunk; false when none is left. */
static bool take_chunk(struct sha256_mb *mb, struct sha256_mb_lane *l) {
	const struct sha256_mb_msg *m;
	uint64_t len;
	const uint8_t *p;

	if (mb->msg >= mb->nr_msgs)
		return false;
	m = &mb->msgs[mb->msg];
	len = m->size - mb->offset;
	if (mb->chunk_size != 0 && len > mb->chunk_size)
		len = mb->chunk_size;
	p = (const uint8_t *)m->data + mb->offset;
	mb->offset += len;
	if (mb->offset >= m->size) {
		mb->msg++;
		mb->offset = 0;
	}
	lane_start(l, p, len, mb->next_index++);
	return true;
}

/* n blocks of every active lane (each has at least n left). */
static void run_lanes(struct sha256_mb *mb, uint64_t n) {
	if (!sha256_mb_arch_run(mb, n))
		sha256_blocks_impl(mb->impl, mb->lane[0].state, mb->lane[0].p, n);
}

/* sha256_mb_start() without the CPUID check (impl is supported). */
static void mb_init(struct sha256_mb *mb, Sha256Impl impl, const struct sha256_mb_msg *msgs,
                    size_t nr_msgs, uint64_t chunk_size) {
	mb->impl = impl;
	mb->lanes = sha256_mb_lanes(mb->impl);
	mb->msgs = msgs;
	mb->nr_msgs = nr_msgs;
	mb->chunk_size = chunk_size;
	mb->msg = 0;
	mb->offset = 0;
	mb->next_index = 0;
	for (unsigned i = 0; i < SHA256_MB_MAX_LANES; i++)
		mb->lane[i].phase = LANE_IDLE;
}

void sha256_mb_start(struct sha256_mb *mb, Sha256Impl impl, const struct sha256_mb_msg *msgs,
                     size_t nr_msgs, uint64_t chunk_size) {
	mb_init(mb, sha256_impl_supported(impl) ? impl : SHA256_IMPL_GENERIC, msgs, nr_msgs,
	        chunk_size);
}

bool sha256_mb_next(struct sha256_mb *mb, uint64_t *ret_index,
                    uint8_t ret_digest[static SHA256_DIGEST_SIZE]) {
	for (;;) {
		uint64_t n = UINT64_MAX;

		/* 1. A finished chunk first; then every idle lane takes a chunk. */
		for (unsigned i = 0; i < mb->lanes; i++) {
			struct sha256_mb_lane *l = &mb->lane[i];

			if (l->phase != LANE_DONE)
				continue;
			for (unsigned j = 0; j < 8; j++) {
				ret_digest[4 * j + 0] = (uint8_t)(l->state[j] >> 24);
				ret_digest[4 * j + 1] = (uint8_t)(l->state[j] >> 16);
				ret_digest[4 * j + 2] = (uint8_t)(l->state[j] >> 8);
				ret_digest[4 * j + 3] = (uint8_t)l->state[j];
			}
			*ret_index = l->index;
			l->phase = LANE_IDLE;
			return true;
		}
		for (unsigned i = 0; i < mb->lanes; i++)
			if (mb->lane[i].phase == LANE_IDLE)
				(void)take_chunk(mb, &mb->lane[i]);

		/* 2. Run all lanes as far as the shortest goes. */
		for (unsigned i = 0; i < mb->lanes; i++)
			if (sha256_mb_lane_active(&mb->lane[i]) && mb->lane[i].blocks < n)
				n = mb->lane[i].blocks;
		if (n == UINT64_MAX)
			return false;
		run_lanes(mb, n);

		/* 3. Body done: on to the tail; tail done: the digest is ready. */
		for (unsigned i = 0; i < mb->lanes; i++) {
			struct sha256_mb_lane *l = &mb->lane[i];

			if (!sha256_mb_lane_active(l))
				continue;
			l->blocks -= n;
			l->p += n * SHA256_BLOCK_SIZE;
			if (l->blocks > 0)
				continue;
			if (l->phase == LANE_BODY)
				lane_tail(l);
			else
				l->phase = LANE_DONE;
		}
	}
}

void sha256_mb_digest_all(Sha256Impl impl, const struct sha256_mb_msg *msgs, size_t nr_msgs,
                          uint64_t chunk_size, uint8_t (*ret_digests)[SHA256_DIGEST_SIZE]) {
	struct sha256_mb mb;
	uint8_t d[SHA256_DIGEST_SIZE];
	uint64_t i;

	sha256_mb_start(&mb, impl, msgs, nr_msgs, chunk_size);
	while (sha256_mb_next(&mb, &i, d))
		for (unsigned j = 0; j < SHA256_DIGEST_SIZE; j++)
			ret_digests[i][j] = d[j];
}

Sha256Impl sha256_mb_calibrate(void) {
	uint8_t buf[4096];
	struct sha256_mb_msg msgs[8];
	Sha256Impl fastest = SHA256_IMPL_GENERIC;
	uint64_t fastest_ticks = UINT64_MAX;

	for (unsigned i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)i;
	for (unsigned i = 0; i < 8; i++)
		msgs[i] = (struct sha256_mb_msg){ .data = buf + 512 * i, .size = 512 };
	for (int impl = 0; impl < _SHA256_IMPL_MAX; impl++) {
		uint64_t best = UINT64_MAX;

		/* CPUID runs here, outside the timed part: it traps in a VM. */
		if (!sha256_impl_supported(impl))
			continue;
		for (int run = 0; run < 3; run++) {
			struct sha256_mb mb;
			uint8_t d[SHA256_DIGEST_SIZE];
			uint64_t idx, t0, t;

			t0 = sha256_ticks();
			mb_init(&mb, impl, msgs, 8, 0);
			while (sha256_mb_next(&mb, &idx, d))
				;
			t = sha256_ticks() - t0;
			if (t < best)
				best = t;
		}
		if (best < fastest_ticks) {
			fastest_ticks = best;
			fastest = impl;
		}
	}
	return fastest;
}
