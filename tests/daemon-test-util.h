/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Shared by the daemon's unit tests: temporary roots and crafted images. */

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "bootparam.h"
#include "image.h"
#include "macros.h"

static inline char *test_mkroot(void) {
	char *d = strdup("/tmp/test-upgraded.XXXXXX");
	char *boot = NULL;

	if (!d || !mkdtemp(d)) {
		free(d);
		return NULL;
	}
	if (asprintf(&boot, "%s/boot", d) < 0 || mkdir(boot, 0755) < 0) {
		free(boot);
		free(d);
		return NULL;
	}
	free(boot);
	return d;
}

#if defined(VALIDATE_REPORT) && defined(REPORT_SCHEMA)
/* Every report the daemon wrote under root validates against docs/report.schema.json
 * (0; also when there is none), so that no test produces a report nobody checked. */
static inline int test_validate_reports(const char *root) {
	char *cmd = NULL;
	int r;

	if (asprintf(&cmd,
	             "set -- '%s'/var/lib/upgraded/reports/*.json; [ -e \"$1\" ] || exit 0; "
	             "exec python3 '%s' '%s' \"$@\"",
	             root, VALIDATE_REPORT, REPORT_SCHEMA) < 0)
		return -ENOMEM;
	r = system(cmd);
	free(cmd);
	return r;
}
#endif

/* Removes a test root; the reports in it must validate first (a cmocka failure). */
static inline void test_rmroot(char *d) {
	char *cmd = NULL;

#if defined(VALIDATE_REPORT) && defined(REPORT_SCHEMA)
	if (d && test_validate_reports(d) != 0) {
		fprintf(stderr, "reports under %s do not validate, the root is kept\n", d);
		free(d);
		fail_msg("a report the test produced violates docs/report.schema.json");
	}
#endif
	if (d && asprintf(&cmd, "rm -rf '%s'", d) >= 0)
		(void)!system(cmd);
	free(cmd);
	free(d);
}

typedef enum {
	BZ_OK = 0,
	BZ_NO_MAGIC = 1 << 0,
	BZ_TRUNCATED = 1 << 1,
	BZ_NO_VERSION = 1 << 2,
	BZ_32BIT = 1 << 3,
} BzFlags;

static inline void test_put_le(uint8_t *p, size_t off, uint64_t v, unsigned bytes) {
	for (unsigned i = 0; i < bytes; i++)
		p[off + i] = (uint8_t)(v >> (8 * i));
}

/* Writes root+rel as a minimal 64-bit, relocatable bzImage that the loader's
 * parser accepts, carrying version (tests/integration/make-bzimage.py writes
 * the same layout). It boots nothing. */
static inline int test_write_bzimage(const char *root, const char *rel, const char *version,
                                     unsigned flags, mode_t mode) {
	const unsigned setup_sects = 4;
	const size_t kernel_size = 16384;
	size_t size = SECTOR_SIZE * (setup_sects + 1) + kernel_size;
	_cleanup_free_ uint8_t *img = calloc(1, size);
	_cleanup_free_ char *path = NULL;
	uint16_t kv = 0x400 - KERNEL_VERSION_BIAS;
	int r;

	if (!img || asprintf(&path, "%s%s", root, rel) < 0)
		return -ENOMEM;
	img[BP_SETUP_SECTS] = setup_sects;
	test_put_le(img, BP_SYSSIZE, kernel_size / 16, 4);
	test_put_le(img, BP_BOOT_FLAG, BOOT_FLAG_MAGIC, 2);
	img[BP_JUMP] = 0xeb;
	img[BP_JUMP + 1] = 0x6a; /* the header ends at 0x26c, as in 6.1 kernels */
	if (!(flags & BZ_NO_MAGIC))
		test_put_le(img, BP_HEADER, SETUP_HEADER_MAGIC, 4);
	test_put_le(img, BP_VERSION, 0x020f, 2);
	img[BP_LOADFLAGS] = LOADFLAG_LOADED_HIGH;
	test_put_le(img, BP_INITRD_ADDR_MAX, 0x7fffffff, 4);
	test_put_le(img, BP_KERNEL_ALIGNMENT, 0x200000, 4);
	img[BP_RELOCATABLE_KERNEL] = 1;
	img[BP_MIN_ALIGNMENT] = 21;
	test_put_le(img, BP_XLOADFLAGS,
	            flags & BZ_32BIT ? 0 : XLF_KERNEL_64 | XLF_CAN_BE_LOADED_ABOVE_4G, 2);
	test_put_le(img, BP_CMDLINE_SIZE, 2047, 4);
	test_put_le(img, BP_PREF_ADDRESS, 0x1000000, 8);
	test_put_le(img, BP_INIT_SIZE, 0x100000, 4);
	if (!(flags & BZ_NO_VERSION)) {
		test_put_le(img, BP_KERNEL_VERSION, kv, 2);
		snprintf((char *)img + 0x400, 128, "%s (test@upgraded) #1 SMP", version);
	}
	for (size_t i = SECTOR_SIZE * (setup_sects + 1); i < size; i++)
		img[i] = (uint8_t)(i * 7);
	if (flags & BZ_TRUNCATED)
		size = SECTOR_SIZE * (setup_sects + 1);
	r = write_file_atomic(path, img, size, mode);
	if (r < 0)
		return r;
	return chmod(path, mode) < 0 ? -errno : 0;
}

static inline int test_write_file(const char *root, const char *rel, const char *data,
                                  mode_t mode) {
	_cleanup_free_ char *path = NULL, *dir = NULL;
	int r;

	if (asprintf(&path, "%s%s", root, rel) < 0 || !(dir = strdup(path)))
		return -ENOMEM;
	*strrchr(dir, '/') = '\0';
	r = mkdir_p(dir, 0755);
	if (r < 0)
		return r;
	r = write_file_atomic(path, data, strlen(data), mode);
	if (r < 0)
		return r;
	return chmod(path, mode) < 0 ? -errno : 0;
}
