/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* machine-memory.c: the machine's memory as the loader reads it. Private to the loader. */

#include <stddef.h>
#include <stdint.h>

#include "loader.h"
#include "memrange.h"
#include "placer.h"
#include "sha256.h"

/* The crashkernel= reservation(s), from root/proc/iomem ("  a-b : Crash kernel"),
 * at most max. A reservation listed at 0-0 (read without CAP_SYS_ADMIN) is -EPERM. */
int machine_memory_read_crash(const char *root, struct mem_range *ret, size_t max, size_t *ret_n);

/* The placement inputs (firmware map + crash reservation), field by field. */
void machine_memory_digest(const struct mem_range *map, size_t nr_map,
                           const struct mem_range *crash, size_t nr_crash,
                           uint8_t ret[static SHA256_DIGEST_SIZE]);

/* *map with the running kernel's persistent memory (and, with memmap_dir, the ranges
 * saved beside that map) carved out of its RAM with their own types. */
int machine_memory_keep_persistent(const char *root, const char *memmap_dir, struct mem_range **map,
                                   size_t *n);

/* The placer over ram[] with everything blocked where nothing may go (machine-memory.c). */
int machine_memory_new_placer(const struct loader_options *o, const struct mem_range *map,
                              size_t nr_map, const struct mem_range *crash, size_t nr_crash,
                              const struct mem_range *ram, size_t nr_ram, struct placer **ret);
