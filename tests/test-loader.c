/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The segment builder against crafted /sys and /proc trees (opts.root): where
 * each segment lands for a given memory map, what boot_params and the command
 * line contain, that chunk digests cover the file part of every segment (its
 * zero-filled rest is left to purgatory's zero check), the panic image's
 * confinement to the crash reservation, every named refusal, and the
 * usability checks (lockdown, EFI, kexec_load_disabled). The kexec_load syscall
 * itself is only called where the kernel has no kexec (expects ENOSYS).
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>

#include "bootparam.h"
#include "fileio.h"
#include "loader.h"
#include "memrange.h"
#include "macros.h"
#include "path-util.h"
#include "sha256.h"

#define KERNEL_CODE_SIZE 8192
#define SETUP_SECTS      1
#define SETUP_SIZE       ((SETUP_SECTS + 1) * SECTOR_SIZE)
#define INIT_SIZE        0x400000 /* 4 MiB */
#define ALIGNMENT        0x200000
#define PREF_ADDRESS     0x1000000
#define INITRD_SIZE      (300 * 1024 + 5)

struct fixture {
	char root[64];
	int kernel_fd;
	int initrd_fd;
	uint8_t *initrd;
};

static void put_u16(uint8_t *p, size_t off, uint16_t v) {
	p[off] = v;
	p[off + 1] = v >> 8;
}

static void put_u32(uint8_t *p, size_t off, uint32_t v) {
	put_u16(p, off, v);
	put_u16(p, off + 2, v >> 16);
}

static uint32_t get_u32(const uint8_t *p, size_t off) {
	return p[off] | p[off + 1] << 8 | p[off + 2] << 16 | (uint32_t)p[off + 3] << 24;
}

static uint64_t get_u64(const uint8_t *p, size_t off) {
	return get_u32(p, off) | (uint64_t)get_u32(p, off + 4) << 32;
}

static void write_root_file(const char *root, const char *path, const char *content) {
	_cleanup_free_ char *p = NULL, *dir = NULL;

	assert_int_equal(path_prefix_root(root, path, &p), 0);
	dir = strdup(p);
	assert_non_null(dir);
	*strrchr(dir, '/') = 0;
	assert_int_equal(mkdir_p(dir, 0755), 0);
	assert_int_equal(write_file_atomic(p, content, strlen(content), 0644), 0);
}

static void add_memmap(const char *root, unsigned idx, uint64_t start, uint64_t end,
                       const char *type) {
	char path[128], v[32];

	snprintf(path, sizeof(path), "/sys/firmware/memmap/%u/start", idx);
	snprintf(v, sizeof(v), "0x%" PRIx64 "\n", start);
	write_root_file(root, path, v);
	snprintf(path, sizeof(path), "/sys/firmware/memmap/%u/end", idx);
	snprintf(v, sizeof(v), "0x%" PRIx64 "\n", end);
	write_root_file(root, path, v);
	snprintf(path, sizeof(path), "/sys/firmware/memmap/%u/type", idx);
	snprintf(v, sizeof(v), "%s\n", type);
	write_root_file(root, path, v);
}

/* The map of this development machine (a QEMU/KVM-style layout). */
static void machine_memmap(const char *root) {
	add_memmap(root, 0, 0x0, 0x9fbff, "System RAM");
	add_memmap(root, 1, 0x9fc00, 0xfffff, "Reserved");
	add_memmap(root, 2, 0x100000, 0xbfffffff, "System RAM");
	add_memmap(root, 3, 0xeec00000, 0xfebfffff, "Reserved");
	add_memmap(root, 4, 0x100000000, 0x63fffffff, "System RAM");
}

static int make_kernel_fd(const char *root, uint32_t initrd_addr_max, uint16_t xloadflags) {
	_cleanup_free_ uint8_t *img = calloc(1, SETUP_SIZE + KERNEL_CODE_SIZE);
	_cleanup_free_ char *path = NULL;
	static const char version[] = "6.1.0-loader-test (t@example.org) #1 SMP";
	int fd;

	assert_non_null(img);
	img[BP_SETUP_SECTS] = SETUP_SECTS;
	put_u32(img, BP_SYSSIZE, KERNEL_CODE_SIZE / 16);
	put_u16(img, BP_BOOT_FLAG, BOOT_FLAG_MAGIC);
	img[BP_JUMP] = 0xeb;
	img[BP_JUMP + 1] = 0x6a;
	put_u32(img, BP_HEADER, SETUP_HEADER_MAGIC);
	put_u16(img, BP_VERSION, 0x020f);
	put_u16(img, BP_KERNEL_VERSION, 0x100);
	img[BP_LOADFLAGS] = LOADFLAG_LOADED_HIGH;
	put_u32(img, BP_INITRD_ADDR_MAX, initrd_addr_max);
	put_u32(img, BP_KERNEL_ALIGNMENT, ALIGNMENT);
	img[BP_RELOCATABLE_KERNEL] = 1;
	img[BP_MIN_ALIGNMENT] = 21;
	put_u16(img, BP_XLOADFLAGS, xloadflags);
	put_u32(img, BP_CMDLINE_SIZE, 255);
	put_u32(img, BP_PREF_ADDRESS, PREF_ADDRESS);
	put_u32(img, BP_INIT_SIZE, INIT_SIZE);
	memcpy(img + KERNEL_VERSION_BIAS + 0x100, version, sizeof(version));
	for (size_t i = 0; i < KERNEL_CODE_SIZE; i++)
		img[SETUP_SIZE + i] = (uint8_t)(i * 7);

	assert_int_equal(path_join(root, "vmlinuz", &path), 0);
	assert_int_equal(write_file_atomic(path, img, SETUP_SIZE + KERNEL_CODE_SIZE, 0644), 0);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

static int setup(void **state) {
	struct fixture *f = calloc(1, sizeof(*f));
	_cleanup_free_ char *p = NULL;

	if (!f)
		return -1;
	strcpy(f->root, "/tmp/test-loader.XXXXXX");
	if (!mkdtemp(f->root))
		return -1;
	machine_memmap(f->root);
	f->kernel_fd =
	        make_kernel_fd(f->root, 0x7fffffff, XLF_KERNEL_64 | XLF_CAN_BE_LOADED_ABOVE_4G);

	f->initrd = malloc(INITRD_SIZE);
	if (!f->initrd)
		return -1;
	for (size_t i = 0; i < INITRD_SIZE; i++)
		f->initrd[i] = (uint8_t)(i >> 3);
	if (path_join(f->root, "initrd", &p) < 0 ||
	    write_file_atomic(p, f->initrd, INITRD_SIZE, 0644) < 0)
		return -1;
	f->initrd_fd = open(p, O_RDONLY | O_CLOEXEC);
	*state = f;
	return f->initrd_fd >= 0 ? 0 : -1;
}

static int teardown(void **state) {
	struct fixture *f = *state;
	_cleanup_free_ char *cmd = NULL;

	close(f->kernel_fd);
	close(f->initrd_fd);
	if (asprintf(&cmd, "rm -rf '%s'", f->root) >= 0)
		(void)!system(cmd);
	free(f->initrd);
	free(f);
	return 0;
}

static struct loader_options opts_for(struct fixture *f) {
	return (struct loader_options){
		.root = f->root,
		.kernel_fd = f->kernel_fd,
		.initrd_fd = f->initrd_fd,
		.cmdline = "root=/dev/vda1 console=ttyS0",
		.mode = HANDOFF_MODE_VERIFIED,
		.console_port = PURGATORY_CONSOLE_COM1,
	};
}

static bool inside(uint64_t a, uint64_t size, uint64_t start, uint64_t end_incl) {
	return a >= start && a + size - 1 <= end_incl;
}

/* Invariants every image obeys: page-aligned, non-overlapping segments, each
 * inside one RAM range of ram[], never touching below 1 MiB. */
static void assert_segments_sane(const struct loader_image *img, const uint64_t (*ram)[2],
                                 size_t nr_ram) {
	const struct loader_segment *s;
	size_t n = loader_image_segments(img, &s);

	for (size_t i = 0; i < n; i++) {
		bool in_ram = false;

		if (s[i].memsz == 0)
			continue;
		assert_int_equal(s[i].mem % 4096, 0);
		assert_int_equal(s[i].memsz % 4096, 0);
		assert_true(s[i].bufsz <= s[i].memsz);
		assert_true(s[i].mem >= 0x100000);
		for (size_t r = 0; r < nr_ram; r++)
			in_ram |= inside(s[i].mem, s[i].memsz, ram[r][0], ram[r][1]);
		if (!in_ram)
			fail_msg("segment %zu at 0x%" PRIx64 "+0x%" PRIx64 " is not inside RAM", i,
			         s[i].mem, s[i].memsz);
		for (size_t j = 0; j < i; j++)
			if (s[j].memsz && s[i].mem < s[j].mem + s[j].memsz &&
			    s[j].mem < s[i].mem + s[i].memsz)
				fail_msg("segments %zu and %zu overlap", i, j);
	}
}

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
	for (size_t i = 0; i < _LOADER_SEG_MAX; i++) {
		if (!s[i].memsz)
			continue;
		assert_false(s[i].mem < 0x09000000 && 0x01000000 < s[i].mem + s[i].memsz);
		assert_false(s[i].mem < 0x80000000 && 0x70000000 < s[i].mem + s[i].memsz);
	}
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

static void test_loader_build_cmdline_refusals(void **state) {
	struct fixture *f = *state;
	struct loader_options o = opts_for(f);
	struct loader_image *img = NULL;
	char longline[300];
	LoaderError e;

	memset(longline, 'x', sizeof(longline) - 1);
	longline[sizeof(longline) - 1] = 0;
	o.cmdline = longline;
	assert_int_equal(loader_image_build(&o, &img, &e, NULL), -E2BIG);
	assert_int_equal(e, LOADER_ERR_CMDLINE_TOO_LONG);

	/* Exactly at cmdline_size (255) with the placeholder still fits. */
	longline[255 - 1 - strlen(LOADER_HANDOFF_CMDLINE_MARK " " PURGATORY_STAMPS_KEY) -
	         PURGATORY_STAMPS_FIELD_LEN] = 0;
	assert_int_equal(loader_image_build(&o, &img, &e, NULL), 0);
	assert_int_equal(strlen(loader_image_cmdline(img)), 255);
	img = loader_image_free(img);

	o.cmdline = "root=/dev/vda1\nquiet";
	assert_int_equal(loader_image_build(&o, &img, &e, NULL), -EINVAL);
	assert_int_equal(e, LOADER_ERR_CMDLINE_INVALID);
	o.cmdline = "root=/dev/vda1 upgraded.stamps=1";
	assert_int_equal(loader_image_build(&o, &img, &e, NULL), -EINVAL);
	assert_int_equal(e, LOADER_ERR_CMDLINE_INVALID);
	assert_null(img);

	/* No command line at all is fine: just the mark and the placeholder. */
	o.cmdline = NULL;
	o.initrd_fd = -1;
	assert_int_equal(loader_image_build(&o, &img, &e, NULL), 0);
	assert_string_equal(loader_image_cmdline(img), LOADER_HANDOFF_CMDLINE_MARK
	                    " " PURGATORY_STAMPS_KEY PURGATORY_STAMPS_TEMPLATE);
	assert_int_equal(loader_image_params(img)->nr_segments, 2); /* no initrd segment */
	loader_image_free(img);
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

static void test_loader_build_bad_inputs(void **state) {
	struct fixture *f = *state;
	struct loader_options o = opts_for(f);
	struct loader_image *img = NULL;
	BzImageError be = BZIMAGE_OK;
	LoaderError e;
	_cleanup_free_ char *mm = NULL, *cmd = NULL;

	/* Not a bzImage (the initrd passed as kernel). */
	o.kernel_fd = f->initrd_fd;
	assert_int_equal(loader_image_build(&o, &img, &e, &be), -EBADMSG);
	assert_int_equal(e, LOADER_ERR_BZIMAGE);
	assert_int_equal(be, BZIMAGE_ERR_BAD_BOOT_FLAG);
	assert_null(img);

	/* A directory is not a kernel file. */
	o.kernel_fd = open(f->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(o.kernel_fd >= 0);
	assert_int_equal(loader_image_build(&o, &img, &e, NULL), -EBADFD);
	assert_int_equal(e, LOADER_ERR_READ);
	close(o.kernel_fd);
	o.kernel_fd = f->kernel_fd;

	/* A malformed memory map. */
	add_memmap(f->root, 7, 0x5000, 0x4000, "System RAM");
	assert_int_equal(loader_image_build(&o, &img, &e, NULL), -EBADMSG);
	assert_int_equal(e, LOADER_ERR_MEMMAP);

	/* No memory map at all. */
	assert_int_equal(path_join(f->root, "sys/firmware/memmap", &mm), 0);
	assert_true(asprintf(&cmd, "rm -rf '%s'", mm) >= 0);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(loader_image_build(&o, &img, &e, NULL), -ENOENT);
	assert_int_equal(e, LOADER_ERR_MEMMAP);
	assert_null(img);
}

static void test_loader_check_usable(void **state) {
	struct fixture *f = *state;
	LoaderUnusable u = _LOADER_UNUSABLE_MAX;

	assert_int_equal(loader_check_usable(f->root, &u), 0);
	assert_int_equal(u, LOADER_USABLE);

	write_root_file(f->root, "/sys/kernel/security/lockdown",
	                "[none] integrity confidentiality\n");
	assert_int_equal(loader_check_usable(f->root, &u), 0);
	assert_int_equal(u, LOADER_USABLE);

	write_root_file(f->root, "/sys/kernel/security/lockdown",
	                "none [integrity] confidentiality\n");
	assert_int_equal(loader_check_usable(f->root, &u), 0);
	assert_int_equal(u, LOADER_UNUSABLE_LOCKDOWN);
	write_root_file(f->root, "/sys/kernel/security/lockdown",
	                "none integrity [confidentiality]\n");
	assert_int_equal(loader_check_usable(f->root, &u), 0);
	assert_int_equal(u, LOADER_UNUSABLE_LOCKDOWN);
	assert_non_null(strstr(loader_unusable_to_string(u), "lockdown"));

	write_root_file(f->root, "/sys/kernel/security/lockdown",
	                "[none] integrity confidentiality\n");
	write_root_file(f->root, "/proc/sys/kernel/kexec_load_disabled", "1\n");
	assert_int_equal(loader_check_usable(f->root, &u), 0);
	assert_int_equal(u, LOADER_UNUSABLE_LOAD_DISABLED);
	write_root_file(f->root, "/proc/sys/kernel/kexec_load_disabled", "0\n");

	write_root_file(f->root, "/sys/firmware/efi/systab", "ACPI20=0x7fb7e014\n");
	assert_int_equal(loader_check_usable(f->root, &u), 0);
	assert_int_equal(u, LOADER_UNUSABLE_EFI_NO_RUNTIME_MAP);
	write_root_file(f->root, "/sys/firmware/efi/runtime-map/0/type", "0x5\n");
	assert_int_equal(loader_check_usable(f->root, &u), 0);
	assert_int_equal(u, LOADER_UNUSABLE_EFI_UNSUPPORTED);
}

static void test_loader_strings(void **state) {
	for (int i = 0; i < _LOADER_ERR_MAX; i++) {
		assert_non_null(loader_error_to_string(i));
		assert_true(i == LOADER_OK || loader_error_to_errno(i) < 0);
	}
	for (int i = 0; i < _LOADER_UNUSABLE_MAX; i++)
		assert_non_null(loader_unusable_to_string(i));
	assert_null(loader_error_to_string(_LOADER_ERR_MAX));
	assert_null(loader_unusable_to_string(_LOADER_UNUSABLE_MAX));
}

static void test_loader_is_loaded(void **state) {
	struct fixture *f = *state;

	assert_int_equal(loader_is_loaded(f->root, false), -ENOENT);
	write_root_file(f->root, "/sys/kernel/kexec_loaded", "1\n");
	write_root_file(f->root, "/sys/kernel/kexec_crash_loaded", "0\n");
	assert_int_equal(loader_is_loaded(f->root, false), 1);
	assert_int_equal(loader_is_loaded(f->root, true), 0);
}

/* Only on kernels without kexec (no /sys/kernel/kexec_loaded): the syscall must
 * fail with ENOSYS. A kexec-capable host is never handed a test image. */
static void test_loader_syscall_enosys(void **state) {
	struct fixture *f = *state;
	struct loader_options o = opts_for(f);
	struct loader_image *img = NULL;

	if (access("/sys/kernel/kexec_loaded", F_OK) == 0) {
		print_message("[ SKIP     ] this kernel has kexec: not loading a test image\n");
		skip();
	}
	assert_int_equal(loader_image_build(&o, &img, NULL, NULL), 0);
	assert_int_equal(loader_image_load(img), -ENOSYS);
	assert_int_equal(loader_unload(false), -ENOSYS);
	assert_int_equal(loader_unload(true), -ENOSYS);
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
		cmocka_unit_test_setup_teardown(test_loader_build_avoids_crash_reservation, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_loader_build_saved_memmap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loader_build_keeps_persistent_memory, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_loader_build_no_room, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loader_build_cmdline_refusals, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_loader_build_panic_image, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loader_build_bad_inputs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loader_check_usable, setup, teardown),
		cmocka_unit_test(test_loader_strings),
		cmocka_unit_test_setup_teardown(test_loader_is_loaded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loader_syscall_enosys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loader_build_real_vmlinuz, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
