/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * What the running machine says about its memory, as the loader needs it: the
 * crashkernel= reservation, the persistent memory to keep out of the next kernel's
 * RAM, the ranges the running kernel reserved in RAM, the placer built from them,
 * and the digest of the placement inputs that a commit checks again. Private to
 * the loader (machine-memory.h).
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootparam.h"
#include "fileio.h"
#include "loader-internal.h"
#include "loader.h"
#include "machine-memory.h"
#include "macros.h"
#include "path-util.h"
#include "sha256.h"
#include "string-util.h"

#define IOMEM_CRASH_KERNEL "Crash kernel"

/* The crashkernel= reservation(s), from /proc/iomem ("  a-b : Crash kernel").
 * The kernel prints every address as 0 unless the reader opened the file with
 * CAP_SYS_ADMIN: a reservation listed at 0-0 is -EPERM, not "none". */
int machine_memory_read_crash(const char *root, struct mem_range *ret, size_t max, size_t *ret_n) {
	_cleanup_free_ char *p = NULL, *data = NULL;
	size_t size, n = 0;
	char *line, *save = NULL;
	bool hidden = false;
	int r;

	r = path_prefix_root(root, "/proc/iomem", &p);
	if (r < 0)
		return r;
	r = read_file_full(p, 1 << 20, &data, &size);
	if (r < 0)
		return r;
	for (line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long a, b;
		char name[64];

		if (sscanf(line, " %llx-%llx : %63[^\n]", &a, &b, name) != 3)
			continue;
		if (streq(name, IOMEM_CRASH_KERNEL) && a == 0 && b == 0)
			hidden = true;
		if (!streq(name, IOMEM_CRASH_KERNEL) || b <= a || n >= max)
			continue;
		ret[n++] = (struct mem_range){ .start = a, .end = b, .type = E820_TYPE_RAM };
	}
	*ret_n = n;
	return n == 0 && hidden ? -EPERM : 0;
}

/* The placement inputs (firmware map + crash reservation), field by field. */
void machine_memory_digest(const struct mem_range *map, size_t nr_map,
                           const struct mem_range *crash, size_t nr_crash,
                           uint8_t ret[static SHA256_DIGEST_SIZE]) {
	struct sha256_ctx c;

	sha256_init(&c);
	for (size_t k = 0; k < 2; k++) {
		const struct mem_range *r = k == 0 ? map : crash;
		size_t n = k == 0 ? nr_map : nr_crash;

		sha256_update(&c, &n, sizeof(n));
		for (size_t i = 0; i < n; i++) {
			sha256_update(&c, &r[i].start, sizeof(r[i].start));
			sha256_update(&c, &r[i].end, sizeof(r[i].end));
			sha256_update(&c, &r[i].type, sizeof(r[i].type));
		}
	}
	sha256_final(&c, ret);
}

int loader_memory_map_digest(const char *root, uint8_t ret[static SHA256_DIGEST_SIZE]) {
	_cleanup_free_ struct mem_range *map = NULL;
	struct mem_range crash[8];
	size_t nr_map = 0, nr_crash = 0;
	int r;

	/* arm64 has no firmware map in /sys: its inputs are /proc/iomem's. */
	if (LOADER_ARCH_NATIVE == LOADER_ARCH_ARM64)
		return loader_arm64_memory_map_digest(root, ret);
	r = memrange_read_memmap(root, NULL, &map, &nr_map);
	if (r < 0)
		return r;
	(void)machine_memory_read_crash(root, crash, ELEMENTSOF(crash), &nr_crash);
	machine_memory_digest(map, nr_map, crash, nr_crash, ret);
	return 0;
}

/* Replaces *map with a copy whose RAM has every persistent-memory range of the
 * running kernel (/proc/iomem) carved out with that range's type: nothing is
 * placed there, and the new kernel's e820 table does not hand it out as RAM.
 * With a saved map (memmap_dir, out of the crash kernel), the ranges saved with
 * it too: the crash kernel does not see them. */
int machine_memory_keep_persistent(const char *root, const char *memmap_dir, struct mem_range **map,
                                   size_t *n) {
	struct mem_range keep[2 * MEMRANGE_MAX_PMEM];
	size_t nk = 0, ns = 0;
	int r;

	r = memrange_read_iomem_pmem(root, keep, MEMRANGE_MAX_PMEM, &nk);
	if (r < 0)
		return r;
	if (memmap_dir) {
		r = memrange_read_saved_pmem(memmap_dir, keep + nk, MEMRANGE_MAX_PMEM, &ns);
		if (r < 0)
			return r;
		nk = memrange_merge(keep, nk, ns);
	}
	return memrange_keep_out_map(map, n, keep, nk);
}

/*
 * The placer over ram[], blocked where nothing may go: low memory, the map's non-RAM
 * ranges, the crash reservation (for a normal image), and what the running kernel keeps
 * out of the firmware's RAM (memmap=SIZE$OFFSET, e.g. a pstore area). The last not from a
 * saved map: the crash kernel's own /proc/iomem calls all but its reservation reserved.
 * An unreadable /proc/iomem leaves the firmware map alone, as before; -E2BIG past
 * MEMRANGE_MAX_KEPT such ranges.
 */
int machine_memory_new_placer(const struct loader_options *o, const struct mem_range *map,
                              size_t nr_map, const struct mem_range *crash, size_t nr_crash,
                              const struct mem_range *ram, size_t nr_ram, struct placer **ret) {
	_cleanup_free_ struct placer *pl = NULL;
	struct mem_range kept[MEMRANGE_MAX_KEPT];
	size_t nr_kept = 0;

	if (!o->panic && !o->memmap_dir &&
	    memrange_read_iomem_kept(o->root, map, nr_map, kept, ELEMENTSOF(kept), &nr_kept) ==
	            -E2BIG)
		return -E2BIG;
	pl = calloc(1, sizeof(*pl));
	if (!pl)
		return -ENOMEM;
	pl->ram = ram;
	pl->nr_ram = nr_ram;
	placer_block(pl, 0, PLACER_LOW_MEMORY_END - 1);
	for (size_t i = 0; i < nr_map; i++)
		if (map[i].type != E820_TYPE_RAM)
			placer_block(pl, map[i].start, map[i].end);
	if (!o->panic)
		for (size_t i = 0; i < nr_crash; i++)
			placer_block(pl, crash[i].start, crash[i].end);
	for (size_t i = 0; i < nr_kept; i++)
		placer_block(pl, kept[i].start, kept[i].end);
	*ret = TAKE_PTR(pl);
	return 0;
}
