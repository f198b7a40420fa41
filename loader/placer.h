/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Where the loader puts its segments (loader.c): free space inside the RAM ranges it is
 * given, outside every blocker (non-RAM ranges, low memory, persistent memory, the crash
 * reservation, what the running kernel reserved in RAM, segments already placed). Private to the loader.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memrange.h"

#define PLACER_LOW_MEMORY_END 0x100000ULL /* below 1 MiB: BIOS, real-mode, never used */
#define PLACER_MAX_BLOCKERS   (MEMRANGE_MAX_RANGES + MEMRANGE_MAX_KEPT + 8)

struct placer {
	const struct mem_range *ram;
	size_t nr_ram;
	struct mem_range blockers[PLACER_MAX_BLOCKERS];
	size_t nr_blockers;
};

/* [start, end] (inclusive) is not free; past PLACER_MAX_BLOCKERS blockers are dropped. */
void placer_block(struct placer *pl, uint64_t start, uint64_t end);
/* [a, a+size) lies in one RAM range, within [lo, hi), clear of every blocker. */
bool placer_fits(const struct placer *pl, uint64_t a, uint64_t size, uint64_t lo, uint64_t hi);
/* Lowest (or highest, top_down) address aligned to align where [a, a+size) fits. */
bool placer_find(const struct placer *pl, uint64_t size, uint64_t align, uint64_t lo, uint64_t hi,
                 bool top_down, uint64_t *ret);
