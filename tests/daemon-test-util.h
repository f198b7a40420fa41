/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Shared by the daemon's unit tests: temporary roots and crafted images. */

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
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

static inline void test_rmroot(char *d) {
	char *cmd = NULL;

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

/* Writes root+rel as a minimal 64-bit bzImage carrying version (see
 * tests/integration/make-bzimage.py for the same layout). */
static inline int test_write_bzimage(const char *root, const char *rel, const char *version,
                                     unsigned flags, mode_t mode) {
	const unsigned setup_sects = 4;
	size_t size = BZIMAGE_SECTOR_SIZE * (setup_sects + 1) + 16384;
	_cleanup_free_ uint8_t *img = calloc(1, size);
	_cleanup_free_ char *path = NULL;
	uint16_t kv = 0x400 - BZIMAGE_KERNEL_VERSION_BASE;
	int r;

	if (!img || asprintf(&path, "%s%s", root, rel) < 0)
		return -ENOMEM;
	img[BZIMAGE_SETUP_SECTS_OFFSET] = setup_sects;
	img[BZIMAGE_BOOT_FLAG_OFFSET] = 0x55;
	img[BZIMAGE_BOOT_FLAG_OFFSET + 1] = 0xaa;
	if (!(flags & BZ_NO_MAGIC))
		memcpy(img + BZIMAGE_HEADER_MAGIC_OFFSET, BZIMAGE_HEADER_MAGIC, 4);
	img[BZIMAGE_VERSION_OFFSET] = 0x0f;
	img[BZIMAGE_VERSION_OFFSET + 1] = 0x02;
	img[BZIMAGE_XLOADFLAGS_OFFSET] = flags & BZ_32BIT ? 0 : BZIMAGE_XLF_KERNEL_64;
	if (!(flags & BZ_NO_VERSION)) {
		img[BZIMAGE_KERNEL_VERSION_OFFSET] = (uint8_t)kv;
		img[BZIMAGE_KERNEL_VERSION_OFFSET + 1] = (uint8_t)(kv >> 8);
		snprintf((char *)img + 0x400, 128, "%s (test@upgraded) #1 SMP", version);
	}
	for (size_t i = BZIMAGE_SECTOR_SIZE * (setup_sects + 1); i < size; i++)
		img[i] = (uint8_t)(i * 7);
	if (flags & BZ_TRUNCATED)
		size = BZIMAGE_SECTOR_SIZE * (setup_sects + 1);
	r = write_file_atomic(path, img, size, mode);
	if (r < 0)
		return r;
	return chmod(path, mode) < 0 ? -errno : 0;
}

static inline int test_write_file(const char *root, const char *rel, const char *data,
                                  mode_t mode) {
	_cleanup_free_ char *path = NULL;
	int r;

	if (asprintf(&path, "%s%s", root, rel) < 0)
		return -ENOMEM;
	r = write_file_atomic(path, data, strlen(data), mode);
	if (r < 0)
		return r;
	return chmod(path, mode) < 0 ? -errno : 0;
}
