/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Segment placement for the loader (placer.h). */

#include "macros.h"
#include "placer.h"

static uint64_t align_up(uint64_t v, uint64_t a) {
	return (v + a - 1) & ~(a - 1);
}

static uint64_t align_down(uint64_t v, uint64_t a) {
	return v & ~(a - 1);
}

void placer_block(struct placer *pl, uint64_t start, uint64_t end) {
	if (pl->nr_blockers < PLACER_MAX_BLOCKERS)
		pl->blockers[pl->nr_blockers++] = (struct mem_range){ start, end, 0 };
}

/* The blocker overlapping [a, a+size), or NULL. */
static const struct mem_range *placer_conflict(const struct placer *pl, uint64_t a, uint64_t size) {
	for (size_t i = 0; i < pl->nr_blockers; i++)
		if (a <= pl->blockers[i].end && pl->blockers[i].start <= a + size - 1)
			return &pl->blockers[i];
	return NULL;
}

bool placer_fits(const struct placer *pl, uint64_t a, uint64_t size, uint64_t lo, uint64_t hi) {
	if (a < lo || a + size > hi || a + size < a)
		return false;
	for (size_t i = 0; i < pl->nr_ram; i++)
		if (a >= pl->ram[i].start && a + size - 1 <= pl->ram[i].end)
			return !placer_conflict(pl, a, size);
	return false;
}

/* Lowest (or highest) aligned address where [a, a+size) lies in one RAM range,
 * within [lo, hi), clear of every blocker. */
bool placer_find(const struct placer *pl, uint64_t size, uint64_t align, uint64_t lo, uint64_t hi,
                 bool top_down, uint64_t *ret) {
	bool found = false;
	uint64_t best = 0;

	for (size_t i = 0; i < pl->nr_ram; i++) {
		uint64_t rs = MAX(pl->ram[i].start, lo);
		uint64_t re = MIN(pl->ram[i].end + 1, hi); /* exclusive */

		if (re <= rs || re - rs < size)
			continue;
		if (!top_down) {
			uint64_t a = align_up(rs, align);
			while (a + size <= re && a >= rs) {
				const struct mem_range *c = placer_conflict(pl, a, size);
				if (!c) {
					if (!found || a < best)
						best = a, found = true;
					break;
				}
				a = align_up(c->end + 1, align);
			}
		} else {
			uint64_t a = align_down(re - size, align);
			while (a >= rs && a + size <= re) {
				const struct mem_range *c = placer_conflict(pl, a, size);
				if (!c) {
					if (!found || a > best)
						best = a, found = true;
					break;
				}
				if (c->start < rs + size)
					break;
				a = align_down(c->start - size, align);
			}
		}
	}
	if (found)
		*ret = best;
	return found;
}
