/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The loader's memory ranges: persistent memory from /proc/iomem, and the
 * overlay that carves it out of the RAM the next kernel gets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bootparam.h"
#include "fileio.h"
#include "macros.h"
#include "memrange.h"

/* The top of a q35 lab host's /proc/iomem booted with memmap=2G!5G (6 GiB of
 * RAM: 0-2G and 4G-8G), in the kernel's layout. */
static const char lab_iomem[] = "00000000-00000fff : Reserved\n"
                                "00001000-0009fbff : System RAM\n"
                                "0009fc00-0009ffff : Reserved\n"
                                "00100000-7ffdefff : System RAM\n"
                                "  1a000000-1b001fff : Kernel code\n"
                                "7ffdf000-7fffffff : Reserved\n"
                                "b0000000-bfffffff : PCI MMCONFIG 0000 [bus 00-ff]\n"
                                "100000000-13fffffff : System RAM\n"
                                "140000000-1bfffffff : Persistent Memory (legacy)\n"
                                "  140000000-1bfffffff : namespace0.0\n"
                                "1c0000000-1ffffffff : System RAM\n";

static void test_memrange_parse_lab(void **state) {
	struct mem_range r[4];
	size_t n = 99;

	assert_int_equal(memrange_parse_iomem_pmem(lab_iomem, strlen(lab_iomem), r, 4, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(r[0].start, 0x140000000);
	assert_int_equal(r[0].end, 0x1bfffffff);
	assert_int_equal(r[0].type, E820_TYPE_PRAM);
}

/* An NVDIMM's region, unsorted input, and no trailing newline. */
static void test_memrange_parse_nvdimm_unsorted(void **state) {
	static const char t[] = "200000000-2ffffffff : Persistent Memory (legacy)\n"
	                        "00100000-bfffffff : System RAM\n"
	                        "100000000-17fffffff : Persistent Memory";
	struct mem_range r[4];
	size_t n = 0;

	assert_int_equal(memrange_parse_iomem_pmem(t, strlen(t), r, 4, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(r[0].start, 0x100000000);
	assert_int_equal(r[0].type, E820_TYPE_PMEM);
	assert_int_equal(r[1].start, 0x200000000);
	assert_int_equal(r[1].type, E820_TYPE_PRAM);
}

/* Children, wrong names and malformed lines are not regions; an inverted one
 * is an error; hidden addresses are -EPERM; too many is -E2BIG. */
static void test_memrange_parse_refusals(void **state) {
	static const char children[] = "  100000000-17fffffff : Persistent Memory (legacy)\n"
	                               "100000000-17fffffff : Persistent Memory (legacyX)\n"
	                               "100000000-17fffffff: Persistent Memory\n"
	                               "1000000000000000000-17fffffff : Persistent Memory\n"
	                               "x-17fffffff : Persistent Memory\n"
	                               "100000000 : Persistent Memory\n"
	                               "-\n\n";
	static const char inverted[] = "200000000-1ffffffff : Persistent Memory\n";
	static const char hidden[] = "00000000-00000000 : System RAM\n"
	                             "00000000-00000000 : Persistent Memory (legacy)\n";
	static const char two[] = "1000-1fff : Persistent Memory\n"
	                          "3000-3fff : Persistent Memory\n";
	struct mem_range r[1];
	size_t n = 99;

	assert_int_equal(memrange_parse_iomem_pmem(children, strlen(children), r, 1, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(memrange_parse_iomem_pmem(inverted, strlen(inverted), r, 1, &n), -EBADMSG);
	assert_int_equal(memrange_parse_iomem_pmem(hidden, strlen(hidden), r, 1, &n), -EPERM);
	assert_int_equal(memrange_parse_iomem_pmem(two, strlen(two), r, 1, &n), -E2BIG);
	/* Not NUL-terminated: the size bounds it. */
	assert_int_equal(memrange_parse_iomem_pmem(two, 10, r, 1, &n), 0);
	assert_int_equal(n, 0);
}

static void assert_range(const struct mem_range *r, uint64_t start, uint64_t end, uint32_t type) {
	assert_int_equal(r->start, start);
	assert_int_equal(r->end, end);
	assert_int_equal(r->type, type);
}

/* Regions in the middle, at the start, at the end and over a whole RAM range,
 * one spanning a hole: RAM is split, nothing else changes. */
/* What the running kernel keeps from the firmware's RAM: top-level ranges not named
 * System RAM or persistent memory, cut to the RAM they overlap; nothing outside RAM. */
static void test_memrange_parse_kept(void **state) {
	static const char t[] = "00000000-00000fff : Reserved\n"
	                        "00001000-0009fbff : System RAM\n"
	                        "00100000-3fffffff : System RAM\n"
	                        "  1a000000-1b001fff : Kernel code\n"
	                        "40000000-400fffff : Reserved\n"
	                        "40100000-7ffdefff : System RAM\n"
	                        "7ff00000-8000ffff : ACPI Tables\n"
	                        "b0000000-bfffffff : PCI MMCONFIG 0000 [bus 00-ff]\n"
	                        "00000000-00000000 : Reserved\n"
	                        "140000000-1bfffffff : Persistent Memory (legacy)\n"
	                        "ffffffff-00000000 : Reserved\n"
	                        "1c0000000-1ffffffff : System RAM";
	const struct mem_range map[] = {
		{ 0x0, 0x9fbff, E820_TYPE_RAM },
		{ 0x100000, 0x7ffdefff, E820_TYPE_RAM },
		{ 0x7ffdf000, 0x7fffffff, E820_TYPE_RESERVED },
		{ 0x80000000, 0x8000ffff, E820_TYPE_RAM },
		{ 0x100000000, 0x1ffffffff, E820_TYPE_RAM },
	};
	struct mem_range r[8];
	size_t n = 99;

	(void)state;
	assert_int_equal(memrange_parse_iomem_kept(t, strlen(t), map, ELEMENTSOF(map), r, 8, &n),
	                 0);
	assert_int_equal(n, 4);
	assert_int_equal(r[0].start, 0x0);
	assert_int_equal(r[0].end, 0xfff);
	assert_int_equal(r[1].start, 0x40000000);
	assert_int_equal(r[1].end, 0x400fffff);
	assert_int_equal(r[1].type, E820_TYPE_RESERVED);
	/* One line over two RAM ranges, around a reserved one: two pieces. */
	assert_int_equal(r[2].start, 0x7ff00000);
	assert_int_equal(r[2].end, 0x7ffdefff);
	assert_int_equal(r[3].start, 0x80000000);
	assert_int_equal(r[3].end, 0x8000ffff);

	n = 99;
	assert_int_equal(memrange_parse_iomem_kept(t, strlen(t), map, ELEMENTSOF(map), r, 3, &n),
	                 -E2BIG);
	assert_int_equal(n, 99);
	assert_int_equal(memrange_parse_iomem_kept(t, strlen(t), map, 0, r, 8, &n), 0);
	assert_int_equal(n, 0);
}

static void test_memrange_keep_out(void **state) {
	const struct mem_range map[] = {
		{ 0x0, 0x9fbff, E820_TYPE_RAM },
		{ 0x100000, 0x7fffffff, E820_TYPE_RAM },
		{ 0x80000000, 0x8fffffff, E820_TYPE_RESERVED },
		{ 0x100000000, 0x1ffffffff, E820_TYPE_RAM },
		{ 0x200000000, 0x2ffffffff, E820_TYPE_RAM },
	};
	const struct mem_range keep[] = {
		{ 0x100000, 0xfffff0, E820_TYPE_PRAM },       /* start of a range */
		{ 0x40000000, 0x4fffffff, E820_TYPE_PRAM },   /* middle */
		{ 0x7f000000, 0x8800ffff, E820_TYPE_PRAM },   /* end, into reserved */
		{ 0x1c0000000, 0x2ffffffff, E820_TYPE_PMEM }, /* end of one, all of the next */
	};
	struct mem_range out[16];
	size_t n = 0;

	assert_int_equal(
	        memrange_keep_out(map, ELEMENTSOF(map), keep, ELEMENTSOF(keep), out, 16, &n), 0);
	assert_int_equal(n, 10);
	assert_range(&out[0], 0x0, 0x9fbff, E820_TYPE_RAM);
	assert_range(&out[1], 0x100000, 0xfffff0, E820_TYPE_PRAM);
	assert_range(&out[2], 0xfffff1, 0x3fffffff, E820_TYPE_RAM);
	assert_range(&out[3], 0x40000000, 0x4fffffff, E820_TYPE_PRAM);
	assert_range(&out[4], 0x50000000, 0x7effffff, E820_TYPE_RAM);
	assert_range(&out[5], 0x7f000000, 0x7fffffff, E820_TYPE_PRAM);
	assert_range(&out[6], 0x80000000, 0x8fffffff, E820_TYPE_RESERVED);
	assert_range(&out[7], 0x100000000, 0x1bfffffff, E820_TYPE_RAM);
	assert_range(&out[8], 0x1c0000000, 0x1ffffffff, E820_TYPE_PMEM);
	assert_range(&out[9], 0x200000000, 0x2ffffffff, E820_TYPE_PMEM);
}

/* No region: the map unchanged. A result that does not fit: -E2BIG. */
static void test_memrange_keep_out_edges(void **state) {
	const struct mem_range map[] = { { 0x100000, 0xffffffffffffffff, E820_TYPE_RAM } };
	const struct mem_range keep[] = { { 0xfffffffffffff000, 0xffffffffffffffff,
		                            E820_TYPE_PRAM } };
	struct mem_range out[2];
	size_t n = 0;

	assert_int_equal(memrange_keep_out(map, 1, NULL, 0, out, 2, &n), 0);
	assert_int_equal(n, 1);
	assert_range(&out[0], 0x100000, 0xffffffffffffffff, E820_TYPE_RAM);
	/* A region at the very top of the address space: no wrap-around. */
	assert_int_equal(memrange_keep_out(map, 1, keep, 1, out, 2, &n), 0);
	assert_int_equal(n, 2);
	assert_range(&out[0], 0x100000, 0xffffffffffffefff, E820_TYPE_RAM);
	assert_range(&out[1], 0xfffffffffffff000, 0xffffffffffffffff, E820_TYPE_PRAM);
	assert_int_equal(memrange_keep_out(map, 1, keep, 1, out, 1, &n), -E2BIG);
}

/* Stage saves the running kernel's persistent memory beside the saved map; the loader
 * (out of the crash kernel) reads it back and merges it with what it sees itself. */
static void test_memrange_saved_pmem(void **state) {
	char root[] = "/tmp/test-memrange.XXXXXX", dir[64], path[80], proc[64], iomem[80];
	struct mem_range r[4];
	size_t n = 9;

	assert_non_null(mkdtemp(root));
	snprintf(dir, sizeof(dir), "%s/memmap-1", root);
	snprintf(path, sizeof(path), "%s%s", dir, MEMRANGE_PMEM_SUFFIX);
	snprintf(proc, sizeof(proc), "%s/proc", root);
	snprintf(iomem, sizeof(iomem), "%s/iomem", proc);
	/* Nothing saved: no range. */
	assert_int_equal(memrange_read_saved_pmem(dir, r, 4, &n), 0);
	assert_int_equal(n, 0);
	/* No /proc/iomem or no region: no file. */
	assert_int_equal(memrange_write_saved_pmem(root, dir), 0);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(mkdir(proc, 0755), 0);
	assert_int_equal(write_file_atomic(iomem, lab_iomem, sizeof(lab_iomem) - 1, 0644), 0);
	assert_int_equal(memrange_write_saved_pmem(root, dir), 0);
	assert_int_equal(memrange_read_saved_pmem(dir, r, 4, &n), 0);
	assert_int_equal(n, 1);
	assert_range(&r[0], 0x140000000, 0x1bfffffff, E820_TYPE_PRAM);

	/* Merge: the live kernel's ranges, then the saved ones; one seen by both once. */
	r[0] = (struct mem_range){ 0x300000000, 0x3ffffffff, E820_TYPE_PMEM };
	r[1] = (struct mem_range){ 0x140000000, 0x1bfffffff, E820_TYPE_PRAM };
	r[2] = (struct mem_range){ 0x300000000, 0x3ffffffff, E820_TYPE_PMEM };
	assert_int_equal(memrange_merge(r, 1, 2), 2);
	assert_range(&r[0], 0x140000000, 0x1bfffffff, E820_TYPE_PRAM);
	assert_range(&r[1], 0x300000000, 0x3ffffffff, E820_TYPE_PMEM);

	/* The region gone from /proc/iomem: the stale file goes too. */
	assert_int_equal(write_file_atomic(iomem, "00100000-7ffdefff : System RAM\n", 31, 0644), 0);
	assert_int_equal(memrange_write_saved_pmem(root, dir), 0);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(unlink(iomem), 0);
	assert_int_equal(rmdir(proc), 0);
	assert_int_equal(rmdir(root), 0);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_memrange_parse_lab),
		cmocka_unit_test(test_memrange_parse_nvdimm_unsorted),
		cmocka_unit_test(test_memrange_parse_refusals),
		cmocka_unit_test(test_memrange_parse_kept),
		cmocka_unit_test(test_memrange_keep_out),
		cmocka_unit_test(test_memrange_keep_out_edges),
		cmocka_unit_test(test_memrange_saved_pmem),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
