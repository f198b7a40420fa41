/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The arm64 Image parser (loader/arm64-image.c): a crafted header, one refusal per
 * field, the gzip and EFI zboot wrappings, and Debian's real arm64 vmlinuz when the
 * download cache holds one (tests/bench-fetch-kernel-arm64 fills it; the test skips
 * without it and never fetches).
 */

#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <cmocka.h>
#include <zlib.h>

#include "arm64-image.h"
#include "arm64-test-util.h"
#include "macros.h"

static uint8_t img[TEST_IMAGE_FILE_SIZE];

static int setup(void **state) {
	test_make_image(img);
	return 0;
}

static void test_arm64_image_valid(void **state) {
	struct arm64_image_info info;

	assert_int_equal(arm64_image_parse(img, sizeof(img), &info), ARM64_IMAGE_OK);
	assert_int_equal(info.text_offset, 0);
	assert_int_equal(info.image_size, TEST_IMAGE_SIZE);
	assert_int_equal(info.page_size, 4096);
	assert_true(info.phys_anywhere);
	assert_true(info.pe_stub);
	assert_int_equal(info.wrap, ARM64_IMAGE_WRAP_NONE);
	assert_string_equal(info.release, TEST_IMAGE_RELEASE);
	assert_true(arm64_image_sniff(img, sizeof(img)));
}

/* Each field broken alone gives its own error, and *info stays untouched. */
static void expect_error(size_t off, uint64_t v, size_t size, Arm64ImageError want) {
	uint8_t copy[TEST_IMAGE_FILE_SIZE];
	struct arm64_image_info info = { .image_size = 42 };

	memcpy(copy, img, sizeof(copy));
	if (off != SIZE_MAX)
		test_put_le64(copy + off, v);
	assert_int_equal(arm64_image_parse(copy, size, &info), want);
	if (want != ARM64_IMAGE_OK)
		assert_int_equal(info.image_size, 42);
	assert_non_null(arm64_image_error_to_string(want));
}

static void test_arm64_image_errors(void **state) {
	uint64_t magic_word = 0x644d5241ULL; /* res5 (the PE offset) zero */

	expect_error(SIZE_MAX, 0, ARM64_IMAGE_HEADER_SIZE - 1, ARM64_IMAGE_ERR_TRUNCATED);
	expect_error(ARM64_IMAGE_MAGIC_OFFSET, magic_word + 1, sizeof(img),
	             ARM64_IMAGE_ERR_BAD_MAGIC);
	expect_error(ARM64_IMAGE_FLAGS_OFF, TEST_IMAGE_FLAGS | ARM64_IMAGE_FLAG_BE, sizeof(img),
	             ARM64_IMAGE_ERR_BIG_ENDIAN);
	expect_error(ARM64_IMAGE_FLAGS_OFF, TEST_IMAGE_FLAGS | 0x10, sizeof(img),
	             ARM64_IMAGE_ERR_BAD_FLAGS);
	expect_error(ARM64_IMAGE_SIZE_OFF, 0, sizeof(img), ARM64_IMAGE_ERR_NO_IMAGE_SIZE);
	expect_error(ARM64_IMAGE_SIZE_OFF, ARM64_IMAGE_MAX_IMAGE_SIZE + 4096, sizeof(img),
	             ARM64_IMAGE_ERR_BAD_IMAGE_SIZE);
	expect_error(ARM64_IMAGE_SIZE_OFF, sizeof(img) - 1, sizeof(img),
	             ARM64_IMAGE_ERR_BAD_IMAGE_SIZE);
	expect_error(ARM64_IMAGE_TEXT_OFFSET_OFF, ARM64_IMAGE_BASE_ALIGN, sizeof(img),
	             ARM64_IMAGE_ERR_BAD_TEXT_OFFSET);
	expect_error(ARM64_IMAGE_TEXT_OFFSET_OFF, 0x80001, sizeof(img),
	             ARM64_IMAGE_ERR_BAD_TEXT_OFFSET);
	/* The pre-5.8 text_offset is fine. */
	expect_error(ARM64_IMAGE_TEXT_OFFSET_OFF, 0x80000, sizeof(img), ARM64_IMAGE_OK);
	assert_int_equal(arm64_image_error_to_errno(ARM64_IMAGE_ERR_TOO_LARGE), -EFBIG);
	assert_int_equal(arm64_image_error_to_errno(ARM64_IMAGE_ERR_BAD_MAGIC), -EBADMSG);
}

/* in[0..n) gzip'd into a new buffer. */
static uint8_t *gzip(const uint8_t *in, size_t n, size_t *ret_size) {
	z_stream z = {};
	size_t cap = n + 1024;
	uint8_t *out = malloc(cap);

	assert_non_null(out);
	assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY),
	                 Z_OK);
	z.next_in = (Bytef *)in;
	z.avail_in = n;
	z.next_out = out;
	z.avail_out = cap;
	assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
	*ret_size = z.total_out;
	deflateEnd(&z);
	return out;
}

static void test_arm64_image_gzip(void **state) {
	struct arm64_image_info info;
	size_t size;
	uint8_t *gz = gzip(img, sizeof(img), &size);

	assert_true(arm64_image_sniff(gz, size));
	assert_int_equal(arm64_image_unwrap_parse(&gz, &size, &info), ARM64_IMAGE_OK);
	assert_int_equal(info.wrap, ARM64_IMAGE_WRAP_GZIP);
	assert_int_equal(size, sizeof(img));
	assert_memory_equal(gz, img, sizeof(img));
	free(gz);

	/* Cut short: the stream does not end, and the input is left as it was. */
	gz = gzip(img, sizeof(img), &size);
	size /= 2;
	assert_int_equal(arm64_image_unwrap_parse(&gz, &size, &info), ARM64_IMAGE_ERR_COMPRESSED);
	assert_true(gz[0] == 0x1f && gz[1] == 0x8b);
	free(gz);
}

/* An EFI zboot file: "MZ", "zimg", payload offset and size, "gzip", the payload. */
static uint8_t *make_zboot(const char *comp, size_t *ret_size) {
	size_t gz_size, off = 512;
	_cleanup_free_ uint8_t *gz = gzip(img, sizeof(img), &gz_size);
	uint8_t *z = calloc(1, off + gz_size);

	assert_non_null(z);
	memcpy(z, "MZ\0\0zimg", 8);
	for (int i = 0; i < 4; i++) {
		z[ARM64_ZBOOT_PAYLOAD_OFF + i] = off >> (8 * i);
		z[ARM64_ZBOOT_PAYLOAD_SIZE + i] = gz_size >> (8 * i);
	}
	memcpy(z + ARM64_ZBOOT_COMP_OFF, comp, strlen(comp) + 1);
	memcpy(z + off, gz, gz_size);
	*ret_size = off + gz_size;
	return z;
}

static void test_arm64_image_zboot(void **state) {
	struct arm64_image_info info;
	size_t size;
	uint8_t *z = make_zboot("gzip", &size);

	assert_true(arm64_image_sniff(z, size));
	assert_int_equal(arm64_image_unwrap_parse(&z, &size, &info), ARM64_IMAGE_OK);
	assert_int_equal(info.wrap, ARM64_IMAGE_WRAP_ZBOOT);
	assert_string_equal(info.release, TEST_IMAGE_RELEASE);
	free(z);

	z = make_zboot("zstd", &size);
	assert_int_equal(arm64_image_unwrap_parse(&z, &size, &info),
	                 ARM64_IMAGE_ERR_ZBOOT_UNSUPPORTED);
	free(z);

	/* A payload that claims more than the file holds. */
	z = make_zboot("gzip", &size);
	z[ARM64_ZBOOT_PAYLOAD_SIZE + 3] = 0x7f;
	assert_int_equal(arm64_image_unwrap_parse(&z, &size, &info), ARM64_IMAGE_ERR_TRUNCATED);
	free(z);
}

/* The first vmlinuz-*-cloud-arm64 in the download cache, or NULL. */
static char *find_debian_kernel(void) {
	static const char *const dirs[] = { ARM64_KERNEL_DIRS };

	for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
		DIR *d = opendir(dirs[i]);
		struct dirent *de;

		while (d && (de = readdir(d))) {
			char *p = NULL;

			if (strncmp(de->d_name, "vmlinuz-", 8) != 0 ||
			    !strstr(de->d_name, "-cloud-arm64"))
				continue;
			if (asprintf(&p, "%s/%s", dirs[i], de->d_name) < 0)
				p = NULL;
			closedir(d);
			return p;
		}
		if (d)
			closedir(d);
	}
	return NULL;
}

/* Debian's arm64 vmlinuz is the bare Image with the EFI stub: what the loader takes. */
static void test_arm64_image_debian(void **state) {
	_cleanup_free_ char *path = find_debian_kernel(), *rel = NULL;
	Arm64ImageError e = ARM64_IMAGE_OK;

	if (!path) {
		print_message("no vmlinuz-*-cloud-arm64 in " ARM64_KERNEL_DIRS_STR ", skipping\n");
		skip();
	}
	assert_int_equal(arm64_image_kernel_release(path, &rel, &e), 0);
	assert_int_equal(e, ARM64_IMAGE_OK);
	assert_non_null(strstr(rel, "-cloud-arm64"));
	assert_non_null(strstr(path, rel));
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_arm64_image_valid),
		cmocka_unit_test(test_arm64_image_errors),
		cmocka_unit_test(test_arm64_image_gzip),
		cmocka_unit_test(test_arm64_image_zboot),
		cmocka_unit_test(test_arm64_image_debian),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
