/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What the arm64 loader's tests share: a tiny valid arm64 Image (the booting.rst
 * header, a banner, a few pages of code), built in memory. Include after <cmocka.h>.
 */

#include <stdint.h>
#include <string.h>

#include "arm64-image.h"

#define TEST_IMAGE_FILE_SIZE (64 * 1024)
#define TEST_IMAGE_SIZE      (1024 * 1024) /* image_size: the file plus its BSS */
#define TEST_IMAGE_FLAGS     0xa           /* little endian, 4 KiB pages, anywhere */
#define TEST_IMAGE_RELEASE   "6.1.0-99-test-arm64"

static inline void test_put_le64(uint8_t *p, uint64_t v) {
	for (int i = 0; i < 8; i++)
		p[i] = v >> (8 * i);
}

/* A valid Image of TEST_IMAGE_FILE_SIZE bytes into buf: "MZ" (the EFI stub's first
 * instruction), text_offset 0, image_size, flags, the magic, and a banner with the
 * banner's own format string before it (as the kernel carries both). */
static inline void test_make_image(uint8_t buf[static TEST_IMAGE_FILE_SIZE]) {
	static const char fmt[] = "Linux version %s (%s) #1";
	static const char banner[] = "Linux version " TEST_IMAGE_RELEASE " (test@example) #1";

	memset(buf, 0, TEST_IMAGE_FILE_SIZE);
	buf[0] = 'M';
	buf[1] = 'Z';
	test_put_le64(buf + ARM64_IMAGE_TEXT_OFFSET_OFF, 0);
	test_put_le64(buf + ARM64_IMAGE_SIZE_OFF, TEST_IMAGE_SIZE);
	test_put_le64(buf + ARM64_IMAGE_FLAGS_OFF, TEST_IMAGE_FLAGS);
	memcpy(buf + ARM64_IMAGE_MAGIC_OFFSET, "ARM\x64", 4);
	memcpy(buf + 4096, fmt, sizeof(fmt));
	memcpy(buf + 8192, banner, sizeof(banner));
}
