/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What the loader's tests share: a temporary root with a crafted /sys tree
 * (the firmware memory map), a minimal bzImage and an initrd opened as the
 * loader would get them, and the invariants every built image obeys.
 * Include after <cmocka.h>.
 */

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bootparam.h"
#include "fileio.h"
#include "loader.h"
#include "macros.h"
#include "path-util.h"
#include "purgatory-standin.h"

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

static inline void put_u16(uint8_t *p, size_t off, uint16_t v) {
	p[off] = v;
	p[off + 1] = v >> 8;
}

static inline void put_u32(uint8_t *p, size_t off, uint32_t v) {
	put_u16(p, off, v);
	put_u16(p, off + 2, v >> 16);
}

static inline uint32_t get_u32(const uint8_t *p, size_t off) {
	return p[off] | p[off + 1] << 8 | p[off + 2] << 16 | (uint32_t)p[off + 3] << 24;
}

static inline uint64_t get_u64(const uint8_t *p, size_t off) {
	return get_u32(p, off) | (uint64_t)get_u32(p, off + 4) << 32;
}

static inline void write_root_file(const char *root, const char *path, const char *content) {
	_cleanup_free_ char *p = NULL, *dir = NULL;

	assert_int_equal(path_prefix_root(root, path, &p), 0);
	dir = strdup(p);
	assert_non_null(dir);
	*strrchr(dir, '/') = 0;
	assert_int_equal(mkdir_p(dir, 0755), 0);
	assert_int_equal(write_file_atomic(p, content, strlen(content), 0644), 0);
}

static inline void add_memmap(const char *root, unsigned idx, uint64_t start, uint64_t end,
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
static inline void machine_memmap(const char *root) {
	add_memmap(root, 0, 0x0, 0x9fbff, "System RAM");
	add_memmap(root, 1, 0x9fc00, 0xfffff, "Reserved");
	add_memmap(root, 2, 0x100000, 0xbfffffff, "System RAM");
	add_memmap(root, 3, 0xeec00000, 0xfebfffff, "Reserved");
	add_memmap(root, 4, 0x100000000, 0x63fffffff, "System RAM");
}

static inline int make_kernel_fd(const char *root, uint32_t initrd_addr_max, uint16_t xloadflags) {
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

static inline int setup(void **state) {
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

static inline int teardown(void **state) {
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

static inline struct loader_options opts_for(struct fixture *f) {
	return (struct loader_options){
		.arch = LOADER_ARCH_X86_64, /* the fixture is a bzImage, whatever the build */
		.root = f->root,
		.kernel_fd = f->kernel_fd,
		.initrd_fd = f->initrd_fd,
		.cmdline = "root=/dev/vda1 console=ttyS0",
		.mode = HANDOFF_MODE_VERIFIED,
		.console_port = PURGATORY_CONSOLE_COM1,
	};
}

static inline bool inside(uint64_t a, uint64_t size, uint64_t start, uint64_t end_incl) {
	return a >= start && a + size - 1 <= end_incl;
}

/* Invariants every image obeys: page-aligned, non-overlapping segments, each
 * inside one RAM range of ram[], never touching below 1 MiB. */
static inline void assert_segments_sane(const struct loader_image *img, const uint64_t (*ram)[2],
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
