/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The segment builder against crafted /sys and /proc trees (opts.root): where
 * each segment lands for a given memory map, what boot_params and the command
 * line contain, that chunk digests cover the file part of every segment (its
 * zero-filled rest is left to purgatory's zero check), the panic image's
 * confinement to the crash reservation, and the real Debian kernel through the
 * whole builder. Its refusals and usability checks: test-loader-checks.c.
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "loader-test-util.h"
#include "memrange.h"
#include "sha256.h"

static void test_loader_build_machine_map(void **state) {
	struct fixture *f = *state;
	struct loader_options o = opts_for(f);
	struct loader_image *img = NULL;
	const struct loader_segment *s;
	const struct purgatory_params *pp;
	LoaderError e = _LOADER_ERR_MAX;
	const uint64_t ram[][2] = { { 0x100000, 0xbfffffff }, { 0x100000000, 0x63fffffff } };
	const uint8_t *zp;
	const char *cmdline;

	assert_int_equal(loader_image_build(&o, &img, &e, NULL), 0);
	assert_int_equal(e, LOADER_OK);
	assert_int_equal(loader_image_segments(img, &s), _LOADER_SEG_MAX);
	assert_segments_sane(img, ram, ELEMENTSOF(ram));

	/* Kernel at its preferred address, sized for init_size. */
	assert_int_equal(s[LOADER_SEG_KERNEL].mem, PREF_ADDRESS);
	assert_int_equal(s[LOADER_SEG_KERNEL].memsz, INIT_SIZE);
	assert_int_equal(s[LOADER_SEG_KERNEL].bufsz, KERNEL_CODE_SIZE);
	/* Initrd as high as initrd_addr_max allows. */
	assert_int_equal(s[LOADER_SEG_INITRD].bufsz, INITRD_SIZE);
	assert_true(s[LOADER_SEG_INITRD].mem + s[LOADER_SEG_INITRD].memsz <= 0x80000000ULL);
	assert_true(s[LOADER_SEG_INITRD].mem >= 0x80000000ULL - 2 * s[LOADER_SEG_INITRD].memsz);
	/* boot_params and purgatory below 4 GiB. */
	assert_true(s[LOADER_SEG_PARAMS].mem + s[LOADER_SEG_PARAMS].memsz <= 0x100000000ULL);
	assert_true(s[LOADER_SEG_PURGATORY].mem + s[LOADER_SEG_PURGATORY].memsz <= 0x100000000ULL);

	/* The contract purgatory reads. */
	pp = loader_image_params(img);
	assert_int_equal(loader_image_entry(img), s[LOADER_SEG_PURGATORY].mem);
	assert_int_equal(pp->magic, PURGATORY_ABI_MAGIC);
	assert_int_equal(pp->abi_version, PURGATORY_ABI_VERSION);
	assert_int_equal(pp->size, sizeof(*pp));
	assert_int_equal(pp->entry_rip, PREF_ADDRESS + KERNEL_ENTRY64_OFFSET);
	assert_int_equal(pp->entry_rsi, s[LOADER_SEG_PARAMS].mem);
	assert_int_equal(pp->mode, PURGATORY_MODE_VERIFIED);
	assert_int_equal(pp->flags, 0);
	assert_int_equal(pp->console_port, 0x3f8);
	assert_int_equal(pp->nr_segments, 3);
	/* The params live inside the purgatory segment at the agreed offset. */
	assert_ptr_equal((const uint8_t *)pp,
	                 (const uint8_t *)s[LOADER_SEG_PURGATORY].buf + PURGATORY_PARAMS_OFFSET);

	/* Each segment's file part in chunks of chunk_size, numbered in order,
	 * each chunk's digest the plain SHA-256 of its bytes; memsz as placed. */
	assert_true(pp->chunk_size >= PURGATORY_CHUNK_SIZE_MIN);
	for (unsigned i = 0, next = 0; i < pp->nr_segments; i++) {
		const struct loader_segment *seg = &s[i];
		const struct purgatory_segment *ps = &pp->segments[i];

		assert_int_equal(ps->addr, seg->mem);
		assert_int_equal(ps->filesz, seg->bufsz);
		assert_int_equal(ps->memsz, seg->memsz);
		assert_int_equal(ps->first_chunk, next);
		assert_int_equal(ps->nr_chunks, (seg->bufsz + pp->chunk_size - 1) / pp->chunk_size);
		for (unsigned k = 0; k < ps->nr_chunks; k++) {
			uint64_t off = k * pp->chunk_size;
			uint8_t d[SHA256_DIGEST_SIZE];

			sha256_digest_impl(SHA256_IMPL_GENERIC, (const uint8_t *)seg->buf + off,
			                   MIN(pp->chunk_size, seg->bufsz - off), d);
			assert_memory_equal(pp->chunk_sha256[next + k], d, sizeof(d));
		}
		next += ps->nr_chunks;
		assert_int_equal(pp->nr_chunks, i + 1 == pp->nr_segments ? next : pp->nr_chunks);
	}
	/* Purgatory is told which implementation to run: one this CPU has, timed here. */
	assert_in_range(pp->sha256_impl_request, 1, _SHA256_IMPL_MAX);
	assert_true(sha256_impl_supported((Sha256Impl)pp->sha256_impl_request - 1));
	assert_memory_equal(s[LOADER_SEG_INITRD].buf, f->initrd, INITRD_SIZE);

	/* The command line: the user's, the handoff mark, then the stamps placeholder,
	 * where stamps_addr points (as a physical address in the params segment). */
	cmdline = loader_image_cmdline(img);
	assert_string_equal(cmdline, "root=/dev/vda1 console=ttyS0 " LOADER_HANDOFF_CMDLINE_MARK
	                             " " PURGATORY_STAMPS_KEY PURGATORY_STAMPS_TEMPLATE);
	zp = s[LOADER_SEG_PARAMS].buf;
	assert_memory_equal(zp + (pp->stamps_addr - s[LOADER_SEG_PARAMS].mem),
	                    PURGATORY_STAMPS_TEMPLATE, PURGATORY_STAMPS_FIELD_LEN);
	assert_int_equal(pp->stamps_len, PURGATORY_STAMPS_FIELD_LEN);

	/* boot_params: the image's setup header, our pointers, the e820 map. */
	assert_int_equal(get_u32(zp, BP_HEADER), SETUP_HEADER_MAGIC);
	assert_int_equal(zp[BP_TYPE_OF_LOADER], TYPE_OF_LOADER_UNDEFINED);
	assert_int_equal(get_u32(zp, BP_CMD_LINE_PTR), s[LOADER_SEG_PARAMS].mem + BOOT_PARAMS_SIZE);
	assert_int_equal(get_u32(zp, BP_EXT_CMD_LINE_PTR), 0);
	assert_int_equal(get_u32(zp, BP_RAMDISK_IMAGE), s[LOADER_SEG_INITRD].mem);
	assert_int_equal(get_u32(zp, BP_RAMDISK_SIZE), INITRD_SIZE);
	assert_int_equal(zp[BP_E820_ENTRIES], 5);
	assert_int_equal(get_u64(zp, BP_E820_TABLE + 2 * E820_ENTRY_SIZE), 0x100000);
	assert_int_equal(get_u64(zp, BP_E820_TABLE + 2 * E820_ENTRY_SIZE + 8), 0xbff00000);
	assert_int_equal(get_u32(zp, BP_E820_TABLE + 2 * E820_ENTRY_SIZE + 16), E820_TYPE_RAM);
	assert_int_equal(get_u32(zp, BP_E820_TABLE + 3 * E820_ENTRY_SIZE + 16), E820_TYPE_RESERVED);
	assert_string_equal(loader_image_bzimage(img)->release, "6.1.0-loader-test");

	loader_image_free(img);
}

/* pref_address taken by a reserved range inside RAM: the kernel goes to the
 * next aligned hole, and nothing overlaps the reserved range. */
static void test_loader_build_avoids_reserved(void **state) {
	struct fixture *f = *state;
	struct loader_options o = opts_for(f);
	struct loader_image *img = NULL;
	const struct loader_segment *s;
	const uint64_t ram[][2] = { { 0x100000, 0xfffffff } };

	add_memmap(f->root, 5, 0x1100000, 0x11fffff, "Reserved"); /* inside pref..+init_size */
	add_memmap(f->root, 6, 0x1400000, 0x14fffff, "ACPI Tables");
	/* Shrink RAM so the test is about this window. */
	add_memmap(f->root, 2, 0x100000, 0xfffffff, "System RAM");
	add_memmap(f->root, 4, 0x200000000, 0x200000fff, "Reserved");

	assert_int_equal(loader_image_build(&o, &img, NULL, NULL), 0);
	loader_image_segments(img, &s);
	assert_segments_sane(img, ram, ELEMENTSOF(ram));
	assert_int_equal(s[LOADER_SEG_KERNEL].mem % ALIGNMENT, 0);
	assert_int_equal(s[LOADER_SEG_KERNEL].mem, 0x1600000); /* first aligned hole after both */
	for (size_t i = 0; i < _LOADER_SEG_MAX; i++) {
		assert_false(s[i].mem < 0x1200000 && 0x1100000 < s[i].mem + s[i].memsz);
		assert_false(s[i].mem < 0x1500000 && 0x1400000 < s[i].mem + s[i].memsz);
	}
	loader_image_free(img);
}

/* No segment of s overlaps [start, end] (inclusive). */
static void assert_no_segment_in(const struct loader_segment *s, uint64_t start, uint64_t end) {
	for (size_t i = 0; i < _LOADER_SEG_MAX; i++)
		if (s[i].memsz && s[i].mem <= end && start < s[i].mem + s[i].memsz)
			fail_msg("segment %zu at 0x%" PRIx64 " overlaps [0x%" PRIx64 ", 0x%" PRIx64
			         "]",
			         i, s[i].mem, start, end);
}

/* A normal image stays out of the crash reservation (where the panic image
 * lives), even when pref_address falls inside it. */
static void test_loader_build_avoids_crash_reservation(void **state) {
	struct fixture *f = *state;
	struct loader_options o = opts_for(f);
	struct loader_image *img = NULL;
	const struct loader_segment *s;
	const uint64_t ram[][2] = { { 0x100000, 0xbfffffff }, { 0x100000000, 0x63fffffff } };

	write_root_file(f->root, "/proc/iomem",
	                "00100000-bfffffff : System RAM\n"
	                "  01000000-08ffffff : Crash kernel\n"
	                "  70000000-7fffffff : Crash kernel\n");
	assert_int_equal(loader_image_build(&o, &img, NULL, NULL), 0);
	loader_image_segments(img, &s);
	assert_segments_sane(img, ram, ELEMENTSOF(ram));
	assert_no_segment_in(s, 0x01000000, 0x08ffffff);
	assert_no_segment_in(s, 0x70000000, 0x7fffffff);
	assert_int_equal(s[LOADER_SEG_KERNEL].mem, 0x09000000);
	/* The initrd, below initrd_addr_max (2 GiB), under the upper reservation. */
	assert_true(s[LOADER_SEG_INITRD].mem + s[LOADER_SEG_INITRD].memsz <= 0x70000000);
	/* The normal image's e820 still shows all RAM. */
	assert_int_equal(((const uint8_t *)s[LOADER_SEG_PARAMS].buf)[BP_E820_ENTRIES], 5);
	loader_image_free(img);
}

/* The e820 entry of zp's table that starts at start: its size and type. */
static bool e820_find(const uint8_t *zp, uint64_t start, uint64_t *ret_size, uint32_t *ret_type) {
	for (unsigned i = 0; i < zp[BP_E820_ENTRIES]; i++) {
		size_t off = BP_E820_TABLE + i * E820_ENTRY_SIZE;

		if (get_u64(zp, off) == start) {
			*ret_size = get_u64(zp, off + 8);
			*ret_type = get_u32(zp, off + 16);
			return true;
		}
	}
	return false;
}

/* RAM the running kernel reserved on its command line (memmap=SIZE$OFFSET: "Reserved"
 * in /proc/iomem, RAM in the firmware map), where the kernel and the initrd would go:
 * nothing is placed there, and the e820 table handed on stays the firmware's. A crash
 * kernel's /proc/iomem (a saved map) is not read for it. */
static void test_loader_build_avoids_kernel_reserved(void **state) {
	struct fixture *f = *state;
	struct loader_options o = opts_for(f);
	struct loader_image *img = NULL;
	const struct loader_segment *s;
	const uint64_t ram[][2] = { { 0x100000, 0xbfffffff }, { 0x100000000, 0x63fffffff } };
	uint64_t size;
	uint32_t type;

	write_root_file(f->root, "/proc/iomem",
	                "00000000-00000fff : Reserved\n"
	                "00100000-00ffffff : System RAM\n"
	                "01000000-01ffffff : Reserved\n"
	                "02000000-afffffff : System RAM\n"
	                "  1a000000-1b001fff : Kernel code\n"
	                "b0000000-bfffffff : Reserved\n"
	                "100000000-63fffffff : System RAM\n");
	assert_int_equal(loader_image_build(&o, &img, NULL, NULL), 0);
	loader_image_segments(img, &s);
	assert_segments_sane(img, ram, ELEMENTSOF(ram));
	assert_no_segment_in(s, 0x01000000, 0x01ffffff);
	assert_no_segment_in(s, 0xb0000000, 0xbfffffff);
	assert_true(s[LOADER_SEG_KERNEL].mem >= 0x02000000);
	assert_true(e820_find(s[LOADER_SEG_PARAMS].buf, 0x100000, &size, &type));
	assert_int_equal(size, 0xbfffffff - 0x100000 + 1);
	assert_int_equal(type, E820_TYPE_RAM);
	loader_image_free(img);
	img = NULL;

	/* More such ranges than the loader tracks: refused, not placed blind. */
	{
		_cleanup_free_ char *many = NULL;
		size_t len = 0;

		many = calloc(MEMRANGE_MAX_KEPT + 1, 64);
		assert_non_null(many);
		for (unsigned i = 0; i <= MEMRANGE_MAX_KEPT; i++)
			len += (size_t)snprintf(many + len, 64, "%08x-%08x : Reserved\n",
			                        0x10000000 + i * 0x2000, 0x10000fff + i * 0x2000);
		write_root_file(f->root, "/proc/iomem", many);
		assert_int_equal(loader_image_build(&o, &img, NULL, NULL), -E2BIG);
		assert_null(img);
	}
}

/* Persistent memory (memmap=! regions are RAM in the firmware map; only
 * /proc/iomem names them) where the kernel and the initrd would go: nothing is
 * placed there, and the new kernel's e820 marks them persistent, not RAM. */
static void test_loader_build_keeps_persistent_memory(void **state) {
	struct fixture *f = *state;
	struct loader_options o = opts_for(f);
	struct loader_image *img = NULL;
	const struct loader_segment *s;
	const uint64_t ram[][2] = { { 0x100000, 0xbfffffff }, { 0x100000000, 0x63fffffff } };
	const uint64_t pmem[][2] = { { 0x1000000, 0x1ffffff },
		                     { 0x70000000, 0x7fffffff },
		                     { 0x200000000, 0x2ffffffff } };
	const uint8_t *zp;
	uint64_t size;
	uint32_t type;
	LoaderError e;

	write_root_file(f->root, "/proc/iomem",
	                "00100000-bfffffff : System RAM\n"
	                "01000000-01ffffff : Persistent Memory (legacy)\n"
	                "  01000000-01ffffff : namespace0.0\n"
	                "70000000-7fffffff : Persistent Memory (legacy)\n"
	                "200000000-2ffffffff : Persistent Memory\n");
	assert_int_equal(loader_image_build(&o, &img, &e, NULL), 0);
	loader_image_segments(img, &s);
	assert_segments_sane(img, ram, ELEMENTSOF(ram));
	for (size_t i = 0; i < _LOADER_SEG_MAX; i++)
		for (size_t k = 0; k < ELEMENTSOF(pmem) && s[i].memsz; k++)
			if (s[i].mem <= pmem[k][1] && pmem[k][0] < s[i].mem + s[i].memsz)
				fail_msg("segment %zu at 0x%" PRIx64 " lies in persistent memory",
				         i, s[i].mem);
	assert_true(s[LOADER_SEG_KERNEL].mem >= 0x2000000);
	assert_true(s[LOADER_SEG_INITRD].mem + s[LOADER_SEG_INITRD].memsz <= 0x70000000);

	zp = s[LOADER_SEG_PARAMS].buf;
	assert_true(e820_find(zp, 0x1000000, &size, &type));
	assert_int_equal(size, 0x1000000);
	assert_int_equal(type, E820_TYPE_PRAM);
	assert_true(e820_find(zp, 0x70000000, &size, &type));
	assert_int_equal(type, E820_TYPE_PRAM);
	assert_true(e820_find(zp, 0x200000000, &size, &type));
	assert_int_equal(size, 0x100000000);
	assert_int_equal(type, E820_TYPE_PMEM);
	/* The RAM around them is still RAM, split where they cut it. */
	assert_true(e820_find(zp, 0x2000000, &size, &type));
	assert_int_equal(size, 0x70000000 - 0x2000000);
	assert_int_equal(type, E820_TYPE_RAM);
	assert_true(e820_find(zp, 0x300000000, &size, &type));
	assert_int_equal(size, 0x640000000 - 0x300000000);
	assert_int_equal(type, E820_TYPE_RAM);
	loader_image_free(img);
	img = NULL;

	/* The crash kernel gets the regions too (as persistent memory), so its
	 * own kexec into the staged kernel keeps out of them as well. */
	write_root_file(f->root, "/proc/iomem",
	                "00100000-bfffffff : System RAM\n"
	                "  30000000-3fffffff : Crash kernel\n"
	                "70000000-7fffffff : Persistent Memory (legacy)\n");
	o.panic = true;
	assert_int_equal(loader_image_build(&o, &img, &e, NULL), 0);
	loader_image_segments(img, &s);
	zp = s[LOADER_SEG_PARAMS].buf;
	assert_true(e820_find(zp, 0x70000000, &size, &type));
	assert_int_equal(type, E820_TYPE_PRAM);
	loader_image_free(img);
	img = NULL;
	o.panic = false;

	/* Present but hidden (read without CAP_SYS_ADMIN): refused, not ignored. */
	write_root_file(f->root, "/proc/iomem",
	                "00000000-00000000 : System RAM\n"
	                "00000000-00000000 : Persistent Memory (legacy)\n");
	assert_int_equal(loader_image_build(&o, &img, &e, NULL), -EPERM);
	assert_int_equal(e, LOADER_ERR_PMEM_HIDDEN);
	assert_null(img);
}

/* On a crash kernel /sys/firmware/memmap is the reservation only; with the full
 * map saved at stage (memmap_dir) the image is placed in and hands over the
 * whole machine. */
static void test_loader_build_saved_memmap(void **state) {
	struct fixture *f = *state;
	struct loader_options o = opts_for(f);
	struct loader_image *img = NULL;
	const struct loader_segment *s;
	const uint8_t *zp;
	LoaderError e;
	_cleanup_free_ char *mm = NULL, *saved = NULL, *cmd = NULL;

	/* Keep the machine's map aside, then confine the live one. */
	assert_int_equal(path_join(f->root, "sys/firmware/memmap", &mm), 0);
	assert_int_equal(path_join(f->root, "saved-memmap", &saved), 0);
	assert_true(asprintf(&cmd, "cp -a '%s' '%s' && rm -rf '%s'", mm, saved, mm) >= 0);
	assert_int_equal(system(cmd), 0);
	add_memmap(f->root, 0, 0x0, 0x9fbff, "System RAM");
	add_memmap(f->root, 1, 0x30000000, 0x47ffffff, "System RAM");

	/* The live (confined) map: everything inside the reservation. */
	assert_int_equal(loader_image_build(&o, &img, &e, NULL), 0);
	loader_image_segments(img, &s);
	assert_true(inside(s[LOADER_SEG_KERNEL].mem, s[LOADER_SEG_KERNEL].memsz, 0x30000000,
	                   0x47ffffff));
	img = loader_image_free(img);

	/* The saved map: the kernel at its preferred address, all RAM in e820. */
	o.memmap_dir = saved;
	assert_int_equal(loader_image_build(&o, &img, &e, NULL), 0);
	loader_image_segments(img, &s);
	assert_int_equal(s[LOADER_SEG_KERNEL].mem, PREF_ADDRESS);
	zp = s[LOADER_SEG_PARAMS].buf;
	assert_int_equal(zp[BP_E820_ENTRIES], 5);
	assert_int_equal(get_u64(zp, BP_E820_TABLE + 4 * E820_ENTRY_SIZE), 0x100000000);
	assert_int_equal(get_u64(zp, BP_E820_TABLE + 4 * E820_ENTRY_SIZE + 8), 0x540000000);
	img = loader_image_free(img);

	/* Persistent memory saved beside the map (stage wrote it from the old kernel's
	 * /proc/iomem), over the preferred address: kept out though the live kernel does
	 * not show it. */
	{
		_cleanup_free_ char *pm = NULL;
		uint64_t size;
		uint32_t type;

		assert_true(asprintf(&pm, "%s%s", saved, MEMRANGE_PMEM_SUFFIX) > 0);
		assert_int_equal(
		        write_file_atomic(pm, "01000000-07ffffff : Persistent Memory (legacy)\n",
		                          47, 0644),
		        0);
		assert_int_equal(loader_image_build(&o, &img, &e, NULL), 0);
		loader_image_segments(img, &s);
		for (size_t i = 0; i < _LOADER_SEG_MAX; i++)
			if (s[i].memsz && s[i].mem <= 0x7ffffff &&
			    0x1000000 < s[i].mem + s[i].memsz)
				fail_msg("segment %zu at 0x%" PRIx64
				         " lies in saved persistent memory",
				         i, s[i].mem);
		zp = s[LOADER_SEG_PARAMS].buf;
		assert_true(e820_find(zp, 0x1000000, &size, &type));
		assert_int_equal(size, 0x7000000);
		assert_int_equal(type, E820_TYPE_PRAM);
		img = loader_image_free(img);
		assert_int_equal(unlink(pm), 0);
	}

	/* A missing saved map is named, not replaced by the live one. */
	o.memmap_dir = "/nonexistent/memmap";
	assert_int_equal(loader_image_build(&o, &img, &e, NULL), -ENOENT);
	assert_int_equal(e, LOADER_ERR_MEMMAP);
	assert_null(img);
}

static void test_loader_build_no_room(void **state) {
	struct fixture *f = *state;
	struct loader_options o = opts_for(f);
	struct loader_image *img = NULL;
	LoaderError e;
	_cleanup_free_ char *mm = NULL, *cmd = NULL;

	/* Replace the map: 3 MiB of RAM cannot hold a 4 MiB init_size. */
	assert_int_equal(path_join(f->root, "sys/firmware/memmap", &mm), 0);
	assert_true(asprintf(&cmd, "rm -rf '%s'", mm) >= 0);
	assert_int_equal(system(cmd), 0);
	add_memmap(f->root, 0, 0x100000, 0x3fffff, "System RAM");
	assert_int_equal(loader_image_build(&o, &img, &e, NULL), -ENOSPC);
	assert_int_equal(e, LOADER_ERR_NO_ROOM_KERNEL);
	assert_null(img);

	/* RAM for the kernel, but none below initrd_addr_max for the initrd. */
	add_memmap(f->root, 0, 0x1000000, 0x13fffff, "System RAM");
	add_memmap(f->root, 1, 0x80000000, 0x8fffffff, "System RAM");
	assert_int_equal(loader_image_build(&o, &img, &e, NULL), -ENOSPC);
	assert_int_equal(e, LOADER_ERR_NO_ROOM_INITRD);
	assert_null(img);
}

static void test_loader_build_panic_image(void **state) {
	struct fixture *f = *state;
	struct loader_options o = opts_for(f);
	struct loader_image *img = NULL;
	const struct loader_segment *s;
	const uint64_t crash[][2] = { { 0x30000000, 0x3fffffff } };
	const uint8_t *zp;
	LoaderError e;

	o.panic = true;
	assert_int_equal(loader_image_build(&o, &img, &e, NULL), -ENOENT);
	assert_int_equal(e, LOADER_ERR_NO_CRASH_RESERVATION);

	/* Read without CAP_SYS_ADMIN the kernel prints 0-0: hidden, not absent. */
	write_root_file(f->root, "/proc/iomem",
	                "00000000-00000000 : Reserved\n"
	                "00000000-00000000 : System RAM\n"
	                "  00000000-00000000 : Crash kernel\n");
	assert_int_equal(loader_image_build(&o, &img, &e, NULL), -EPERM);
	assert_int_equal(e, LOADER_ERR_NO_CRASH_RESERVATION);
	assert_null(img);

	write_root_file(f->root, "/proc/iomem",
	                "00000000-00000fff : Reserved\n"
	                "00100000-bfffffff : System RAM\n"
	                "  30000000-3fffffff : Crash kernel\n"
	                "  5e000000-5effffff : Kernel code\n");

	o.mode = HANDOFF_MODE_FAST;
	assert_int_equal(loader_image_build(&o, &img, &e, NULL), -EINVAL);
	assert_int_equal(e, LOADER_ERR_PANIC_NOT_VERIFIED);

	o.mode = HANDOFF_MODE_VERIFIED;
	assert_int_equal(loader_image_build(&o, &img, &e, NULL), 0);
	loader_image_segments(img, &s);
	assert_segments_sane(img, crash, 1);
	assert_int_equal(loader_image_params(img)->flags, PURGATORY_FLAG_PANIC);
	assert_int_equal(loader_image_params(img)->mode, PURGATORY_MODE_VERIFIED);
	assert_non_null(strstr(loader_image_cmdline(img), " reset_devices upgraded.panic=1 "));

	/* The crash kernel sees 640 KiB low RAM, the reservation, and the
	 * non-RAM ranges; no other RAM. */
	zp = s[LOADER_SEG_PARAMS].buf;
	for (unsigned i = 0; i < zp[BP_E820_ENTRIES]; i++) {
		size_t off = BP_E820_TABLE + i * E820_ENTRY_SIZE;
		uint64_t a = get_u64(zp, off), n = get_u64(zp, off + 8);

		if (get_u32(zp, off + 16) == E820_TYPE_RAM)
			assert_true((a == 0 && n == 0xa0000) ||
			            (a == 0x30000000 && n == 0x10000000));
	}
	assert_int_equal(zp[BP_E820_ENTRIES], 4);
	loader_image_free(img);
}

/* The real Debian kernel through the whole builder, when it is cached. */
static void test_loader_build_real_vmlinuz(void **state) {
	static const char *const dirs[] = { TEST_KERNEL_DIRS };
	struct fixture *f = *state;
	struct loader_options o = opts_for(f);
	struct loader_image *img = NULL;
	const struct loader_segment *s;
	const struct bzimage_info *bz;
	const uint64_t ram[][2] = { { 0x100000, 0xbfffffff }, { 0x100000000, 0x63fffffff } };
	_cleanup_free_ char *path = NULL;
	int fd;

	for (size_t i = 0; i < ELEMENTSOF(dirs) && !path; i++) {
		_cleanup_free_ char *p = NULL;

		if (asprintf(&p, "%s/vmlinuz-6.1.0-57-cloud-amd64", dirs[i]) >= 0 &&
		    access(p, R_OK) == 0)
			path = TAKE_PTR(p);
	}
	if (!path) {
		print_message("[ SKIP     ] no vmlinuz-6.1.0-57-cloud-amd64 in: %s\n",
		              TEST_KERNEL_DIRS_STR);
		skip();
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	o.kernel_fd = fd;
	assert_int_equal(loader_image_build(&o, &img, NULL, NULL), 0);
	close(fd);

	loader_image_segments(img, &s);
	assert_segments_sane(img, ram, ELEMENTSOF(ram));
	bz = loader_image_bzimage(img);
	assert_string_equal(bz->release, "6.1.0-57-cloud-amd64");
	/* pref_address 16 MiB is free RAM here; init_size 0x3378000 is page aligned. */
	assert_int_equal(s[LOADER_SEG_KERNEL].mem, 0x1000000);
	assert_int_equal(s[LOADER_SEG_KERNEL].memsz, 0x3378000);
	assert_int_equal(s[LOADER_SEG_KERNEL].bufsz, bz->kernel_size);
	assert_int_equal(loader_image_params(img)->entry_rip, 0x1000200);
	loader_image_free(img);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_loader_build_machine_map, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loader_build_avoids_reserved, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loader_build_avoids_kernel_reserved, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_loader_build_avoids_crash_reservation, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_loader_build_saved_memmap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loader_build_keeps_persistent_memory, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_loader_build_no_room, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loader_build_panic_image, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loader_build_real_vmlinuz, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
