/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Physical memory ranges: the firmware memory map (/sys/firmware/memmap) the
 * loader places segments in and hands to the new kernel, and the
 * persistent-memory ranges (/proc/iomem) that must survive the kexec.
 *
 * A persistent-memory region made with memmap=SIZE!OFFSET is usable RAM in the
 * firmware map: only the running kernel's /proc/iomem names it. The loader
 * therefore reads /proc/iomem too and turns those ranges into type-12 (or
 * type-7) ranges of the map before placing anything (loader_memmap_keep_out()):
 * no segment lands in them and the new kernel's e820 table keeps them out of
 * its RAM, even when its command line lacks the memmap= word.
 */

#include <stddef.h>
#include <stdint.h>

#define MEMRANGE_MAX_RANGES   1024
#define MEMRANGE_MAX_PMEM     32
#define MEMRANGE_MAX_KEPT     64 /* memrange_parse_iomem_kept() */
#define IOMEM_SYSTEM_RAM      "System RAM"
#define E820_TYPE_PRAM        12 /* "Persistent Memory (legacy)": memmap=! or e820 type 12 */
#define IOMEM_PMEM_LEGACY     "Persistent Memory (legacy)"
#define IOMEM_PMEM            "Persistent Memory"
#define IOMEM_MAX_SIZE        (1u << 20)
#define E820_TYPE_SOFT_RESERV 0xefffffff

struct mem_range {
	uint64_t start;
	uint64_t end; /* inclusive, as /sys/firmware/memmap and /proc/iomem print it */
	uint32_t type;
};

/* The E820 type of a /sys/firmware/memmap "type" string; unknown names are
 * reserved (nothing is ever placed there). */
uint32_t memrange_type_from_name(const char *s);

/*
 * Reads root/sys/firmware/memmap (or dir_override, not prefixed: a saved copy
 * laid out like it): N/start, N/end, N/type. Sorted by start. -EBADMSG when a
 * range is malformed or there is none, -E2BIG past MEMRANGE_MAX_RANGES.
 */
int memrange_read_memmap(const char *root, const char *dir_override, struct mem_range **ret,
                         size_t *ret_n);

/*
 * The persistent-memory ranges of an /proc/iomem text (data, size; need not be
 * NUL-terminated): top-level lines (no indentation) named IOMEM_PMEM_LEGACY
 * (type E820_TYPE_PRAM) or IOMEM_PMEM (type E820_TYPE_PMEM), sorted. A listing
 * whose addresses are all hidden (0-0: read without CAP_SYS_ADMIN) is -EPERM.
 * Lines it does not recognise are skipped; more than max ranges is -E2BIG.
 */
int memrange_parse_iomem_pmem(const char *data, size_t size, struct mem_range *ret, size_t max,
                              size_t *ret_n);

/* The same from root/proc/iomem; a missing file gives no range. */
int memrange_read_iomem_pmem(const char *root, struct mem_range *ret, size_t max, size_t *ret_n);

/*
 * What the running kernel keeps out of RAM that the firmware map calls RAM: the
 * top-level /proc/iomem ranges not named "System RAM" that overlap a RAM range of
 * map[0..n) (a memmap=SIZE$OFFSET reservation shows as "Reserved", memmap=SIZE#OFFSET
 * as "ACPI Tables"), cut to that overlap, sorted. The loader places nothing there;
 * it does not retype them in the new kernel's e820 table, which stays the
 * firmware's, as the kernel's own kexec_file_load hands it on (the same memmap=
 * word on the new command line reserves them again). Persistent memory is left to
 * memrange_parse_iomem_pmem(); hidden addresses (0-0) are skipped; more than max
 * ranges is -E2BIG.
 */
int memrange_parse_iomem_kept(const char *data, size_t size, const struct mem_range *map, size_t n,
                              struct mem_range *ret, size_t max, size_t *ret_n);
/* The same from root/proc/iomem; a missing file gives no range. */
int memrange_read_iomem_kept(const char *root, const struct mem_range *map, size_t n,
                             struct mem_range *ret, size_t max, size_t *ret_n);

/*
 * A saved memory map (memrange_read_memmap()'s dir_override) carries the running kernel's
 * persistent-memory ranges beside it, in "<dir>" MEMRANGE_PMEM_SUFFIX, as /proc/iomem lines:
 * the crash kernel's own /proc/iomem does not show them, and the kernel it loads must keep
 * out of them all the same. memrange_write_saved_pmem() writes that file from root's
 * /proc/iomem (none when there is no range); memrange_read_saved_pmem() reads it (a missing
 * file gives no range).
 */
/* r[0..n) and r[n..n+m), each sorted: r[0..ret) sorted, a range in both once. */
size_t memrange_merge(struct mem_range *r, size_t n, size_t m);

#define MEMRANGE_PMEM_SUFFIX ".pmem"
int memrange_write_saved_pmem(const char *root, const char *dir);
int memrange_read_saved_pmem(const char *dir, struct mem_range *ret, size_t max, size_t *ret_n);

/*
 * out = map with every part of a RAM range that lies in one of keep[] turned
 * into keep's type (ranges split where needed), sorted. Non-RAM ranges are
 * copied as they are. -E2BIG when the result has more than max ranges.
 */
int memrange_keep_out(const struct mem_range *map, size_t n, const struct mem_range *keep,
                      size_t nk, struct mem_range *out, size_t max, size_t *ret_n);

/* The same into a new map of up to MEMRANGE_MAX_RANGES ranges that replaces *map (a
 * calloc'd array of *n): *map is left as it was on error. */
int memrange_keep_out_map(struct mem_range **map, size_t *n, const struct mem_range *keep,
                          size_t nk);

/* True when [start, end] (inclusive) and r overlap. */
static inline int memrange_overlaps(const struct mem_range *r, uint64_t start, uint64_t end) {
	return start <= r->end && r->start <= end;
}
