/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * bzImage header validation: a crafted minimal valid image, one mutation per
 * named rejection, truncation at every length of the header, and a real
 * distribution vmlinuz when one is available (lab cache, the downloaded
 * 6.1.0-57 package, or /boot); the real-kernel test is skipped otherwise.
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "bootparam.h"
#include "bzimage.h"
#include "fileio.h"
#include "macros.h"

#define IMG_SETUP_SECTS 1
#define IMG_SETUP_SIZE  ((IMG_SETUP_SECTS + 1) * SECTOR_SIZE)
#define IMG_KERNEL_SIZE 512
#define IMG_SIZE        (IMG_SETUP_SIZE + IMG_KERNEL_SIZE)
#define IMG_VERSION_REL 0x100
#define IMG_VERSION     "6.1.0-test-amd64 (builder@example.org) #1 SMP Debian 6.1.0-1"

static void put_u16(uint8_t *p, size_t off, uint16_t v) {
	p[off] = v;
	p[off + 1] = v >> 8;
}

static void put_u32(uint8_t *p, size_t off, uint32_t v) {
	put_u16(p, off, v);
	put_u16(p, off + 2, v >> 16);
}

static void put_u64(uint8_t *p, size_t off, uint64_t v) {
	put_u32(p, off, v);
	put_u32(p, off + 4, v >> 32);
}

/* The smallest image that passes: one setup sector, 512 bytes of "kernel". */
static void make_image(uint8_t img[static IMG_SIZE]) {
	memset(img, 0, IMG_SIZE);
	img[BP_SETUP_SECTS] = IMG_SETUP_SECTS;
	put_u32(img, BP_SYSSIZE, IMG_KERNEL_SIZE / 16);
	put_u16(img, BP_BOOT_FLAG, BOOT_FLAG_MAGIC);
	img[BP_JUMP] = 0xeb;
	img[BP_JUMP + 1] = 0x6a; /* header ends at 0x26c, as in 6.1 kernels */
	put_u32(img, BP_HEADER, SETUP_HEADER_MAGIC);
	put_u16(img, BP_VERSION, 0x020f);
	put_u16(img, BP_KERNEL_VERSION, IMG_VERSION_REL);
	img[BP_LOADFLAGS] = LOADFLAG_LOADED_HIGH;
	put_u32(img, BP_INITRD_ADDR_MAX, 0x7fffffff);
	put_u32(img, BP_KERNEL_ALIGNMENT, 0x200000);
	img[BP_RELOCATABLE_KERNEL] = 1;
	img[BP_MIN_ALIGNMENT] = 21;
	put_u16(img, BP_XLOADFLAGS, XLF_KERNEL_64 | XLF_CAN_BE_LOADED_ABOVE_4G);
	put_u32(img, BP_CMDLINE_SIZE, 2047);
	put_u64(img, BP_PREF_ADDRESS, 0x1000000);
	put_u32(img, BP_INIT_SIZE, 0x100000);
	memcpy(img + KERNEL_VERSION_BIAS + IMG_VERSION_REL, IMG_VERSION, strlen(IMG_VERSION) + 1);
	memset(img + IMG_SETUP_SIZE, 0x90, IMG_KERNEL_SIZE);
}

static void test_bzimage_valid_crafted(void **state) {
	uint8_t img[IMG_SIZE];
	struct bzimage_info info;

	make_image(img);
	assert_int_equal(bzimage_parse(img, sizeof(img), &info), BZIMAGE_OK);
	assert_int_equal(info.protocol, 0x020f);
	assert_int_equal(info.setup_size, IMG_SETUP_SIZE);
	assert_int_equal(info.kernel_offset, IMG_SETUP_SIZE);
	assert_int_equal(info.kernel_size, IMG_KERNEL_SIZE);
	assert_int_equal(info.header_end, 0x26c);
	assert_int_equal(info.kernel_alignment, 0x200000);
	assert_int_equal(info.cmdline_size, 2047);
	assert_int_equal(info.initrd_addr_max, 0x7fffffff);
	assert_int_equal(info.pref_address, 0x1000000);
	assert_true(info.can_load_above_4g);
	assert_string_equal(info.version, IMG_VERSION);
	assert_string_equal(info.release, "6.1.0-test-amd64");

	/* setup_sects == 0 means 4: the kernel then starts at 5 * 512. */
	uint8_t big[5 * SECTOR_SIZE + IMG_KERNEL_SIZE];
	memset(big, 0, sizeof(big));
	memcpy(big, img, IMG_SETUP_SIZE);
	big[BP_SETUP_SECTS] = 0;
	assert_int_equal(bzimage_parse(big, sizeof(big), &info), BZIMAGE_OK);
	assert_int_equal(info.setup_size, 5 * SECTOR_SIZE);
	assert_int_equal(info.kernel_size, IMG_KERNEL_SIZE);
}

struct mutation {
	const char *what;
	size_t off;
	unsigned width; /* 1, 2, 4 or 8 bytes */
	uint64_t value;
	BzImageError expect;
};

static void test_bzimage_rejections(void **state) {
	static const struct mutation m[] = {
		{ "boot flag", BP_BOOT_FLAG, 2, 0x55aa, BZIMAGE_ERR_BAD_BOOT_FLAG },
		{ "header magic", BP_HEADER, 4, 0x53726449, BZIMAGE_ERR_NO_HEADER_MAGIC },
		{ "protocol 2.11", BP_VERSION, 2, 0x020b, BZIMAGE_ERR_PROTOCOL_TOO_OLD },
		{ "protocol 2.00", BP_VERSION, 2, 0x0200, BZIMAGE_ERR_PROTOCOL_TOO_OLD },
		{ "short header", BP_JUMP + 1, 1, 0x40, BZIMAGE_ERR_HEADER_TOO_SHORT },
		{ "setup beyond file", BP_SETUP_SECTS, 1, 2, BZIMAGE_ERR_NO_KERNEL },
		{ "syssize too big", BP_SYSSIZE, 4, IMG_KERNEL_SIZE / 16 + 1, BZIMAGE_ERR_SYSSIZE },
		{ "syssize zero", BP_SYSSIZE, 4, 0, BZIMAGE_ERR_SYSSIZE },
		{ "zImage", BP_LOADFLAGS, 1, 0, BZIMAGE_ERR_NOT_LOADED_HIGH },
		{ "32-bit only", BP_XLOADFLAGS, 2, XLF_CAN_BE_LOADED_ABOVE_4G,
		  BZIMAGE_ERR_NOT_64BIT },
		{ "not relocatable", BP_RELOCATABLE_KERNEL, 1, 0, BZIMAGE_ERR_NOT_RELOCATABLE },
		{ "alignment 0", BP_KERNEL_ALIGNMENT, 4, 0, BZIMAGE_ERR_BAD_ALIGNMENT },
		{ "alignment not pow2", BP_KERNEL_ALIGNMENT, 4, 0x300000,
		  BZIMAGE_ERR_BAD_ALIGNMENT },
		{ "alignment 2 GiB", BP_KERNEL_ALIGNMENT, 4, 0x80000000,
		  BZIMAGE_ERR_BAD_ALIGNMENT },
		{ "alignment < page", BP_KERNEL_ALIGNMENT, 4, 0x800, BZIMAGE_ERR_BAD_ALIGNMENT },
		{ "min_alignment > alignment", BP_MIN_ALIGNMENT, 1, 22, BZIMAGE_ERR_BAD_ALIGNMENT },
		{ "min_alignment 255", BP_MIN_ALIGNMENT, 1, 255, BZIMAGE_ERR_BAD_ALIGNMENT },
		{ "min_alignment < page", BP_MIN_ALIGNMENT, 1, 11, BZIMAGE_ERR_BAD_ALIGNMENT },
		{ "pref unaligned", BP_PREF_ADDRESS, 8, 0x1001000, BZIMAGE_ERR_BAD_PREF_ADDRESS },
		{ "init_size 0", BP_INIT_SIZE, 4, 0, BZIMAGE_ERR_BAD_INIT_SIZE },
		{ "init_size < code", BP_INIT_SIZE, 4, IMG_KERNEL_SIZE - 16,
		  BZIMAGE_ERR_BAD_INIT_SIZE },
		{ "init_size 2 GiB", BP_INIT_SIZE, 4, 0x80000000, BZIMAGE_ERR_BAD_INIT_SIZE },
		{ "cmdline_size 0", BP_CMDLINE_SIZE, 4, 0, BZIMAGE_ERR_BAD_CMDLINE_SIZE },
		{ "initrd_addr_max 0", BP_INITRD_ADDR_MAX, 4, 0, BZIMAGE_ERR_BAD_INITRD_ADDR_MAX },
		{ "no version", BP_KERNEL_VERSION, 2, 0, BZIMAGE_ERR_BAD_VERSION_STRING },
		{ "version past setup", BP_KERNEL_VERSION, 2, IMG_SETUP_SIZE - KERNEL_VERSION_BIAS,
		  BZIMAGE_ERR_BAD_VERSION_STRING },
		{ "version at 0xffff", BP_KERNEL_VERSION, 2, 0xffff,
		  BZIMAGE_ERR_BAD_VERSION_STRING },
		{ "version binary", KERNEL_VERSION_BIAS + IMG_VERSION_REL + 3, 1, 0x01,
		  BZIMAGE_ERR_BAD_VERSION_STRING },
		{ "version empty", KERNEL_VERSION_BIAS + IMG_VERSION_REL, 1, 0,
		  BZIMAGE_ERR_BAD_VERSION_STRING },
		{ "release empty", KERNEL_VERSION_BIAS + IMG_VERSION_REL, 1, ' ',
		  BZIMAGE_ERR_BAD_VERSION_STRING },
	};

	for (size_t i = 0; i < ELEMENTSOF(m); i++) {
		uint8_t img[IMG_SIZE];
		struct bzimage_info info, untouched;
		BzImageError e;

		make_image(img);
		switch (m[i].width) {
		case 1:
			img[m[i].off] = m[i].value;
			break;
		case 2:
			put_u16(img, m[i].off, m[i].value);
			break;
		case 4:
			put_u32(img, m[i].off, m[i].value);
			break;
		default:
			put_u64(img, m[i].off, m[i].value);
		}
		memset(&info, 0xa5, sizeof(info));
		untouched = info;
		e = bzimage_parse(img, sizeof(img), &info);
		if (e != m[i].expect)
			fail_msg("%s: got \"%s\", want \"%s\"", m[i].what,
			         bzimage_error_to_string(e), bzimage_error_to_string(m[i].expect));
		assert_memory_equal(&info, &untouched, sizeof(info));
		assert_int_equal(bzimage_error_to_errno(e), -EBADMSG);
	}
}

/* A version string that runs to the end of the setup area has no NUL. */
static void test_bzimage_version_unterminated(void **state) {
	uint8_t img[IMG_SIZE];
	struct bzimage_info info;

	make_image(img);
	memset(img + KERNEL_VERSION_BIAS + IMG_VERSION_REL, 'x',
	       IMG_SETUP_SIZE - KERNEL_VERSION_BIAS - IMG_VERSION_REL);
	assert_int_equal(bzimage_parse(img, sizeof(img), &info), BZIMAGE_ERR_BAD_VERSION_STRING);

	/* Longer than BZIMAGE_VERSION_MAX but terminated: kept, cut to fit. */
	make_image(img);
	put_u16(img, BP_KERNEL_VERSION, 0x70); /* right after the header: room for 400 */
	memset(img + KERNEL_VERSION_BIAS + 0x70, 'y', 300);
	img[KERNEL_VERSION_BIAS + 0x70 + 300] = 0;
	assert_int_equal(bzimage_parse(img, sizeof(img), &info), BZIMAGE_OK);
	assert_int_equal(strlen(info.version), BZIMAGE_VERSION_MAX - 1);
	assert_int_equal(strlen(info.release), BZIMAGE_VERSION_MAX - 1);
}

/* Every prefix of a valid image is rejected, never read past its end (ASan and
 * valgrind watch the exact-size heap copies). */
static void test_bzimage_truncated_every_length(void **state) {
	uint8_t img[IMG_SIZE];
	struct bzimage_info info;

	make_image(img);
	for (size_t len = 0; len < IMG_SIZE; len++) {
		_cleanup_free_ uint8_t *copy = malloc(MAX(len, (size_t)1));
		BzImageError e;

		assert_non_null(copy);
		memcpy(copy, img, len);
		e = bzimage_parse(copy, len, &info);
		assert_int_not_equal(e, BZIMAGE_OK);
		if (len < IMG_SETUP_SIZE + 1 && len >= 0x26c)
			assert_int_equal(e, BZIMAGE_ERR_NO_KERNEL);
		else if (len > IMG_SETUP_SIZE)
			assert_int_equal(e, BZIMAGE_ERR_SYSSIZE);
		else if (len > BP_BOOT_FLAG + 2 && len < 0x26c)
			assert_int_equal(e, BZIMAGE_ERR_TRUNCATED);
	}
	/* A prefix with the true file size parses (how bzimage_parse_file reads). */
	assert_int_equal(bzimage_parse_prefix(img, IMG_SETUP_SIZE, IMG_SIZE, &info), BZIMAGE_OK);
	assert_int_equal(bzimage_parse_prefix(img, 0x26b, IMG_SIZE, &info), BZIMAGE_ERR_TRUNCATED);
	assert_int_equal(bzimage_parse_prefix(img, IMG_SIZE, IMG_SIZE - 1, &info),
	                 BZIMAGE_ERR_TRUNCATED);
	assert_int_equal(bzimage_parse_prefix(NULL, 0, 0, &info), BZIMAGE_ERR_TRUNCATED);
}

static void test_bzimage_too_large(void **state) {
	uint8_t img[IMG_SIZE];
	struct bzimage_info info;

	make_image(img);
	assert_int_equal(bzimage_parse_prefix(img, IMG_SIZE, BZIMAGE_MAX_SIZE + 1, &info),
	                 BZIMAGE_ERR_TOO_LARGE);
	assert_int_equal(bzimage_error_to_errno(BZIMAGE_ERR_TOO_LARGE), -EFBIG);
}

static void test_bzimage_error_strings(void **state) {
	for (int e = 0; e < _BZIMAGE_ERR_MAX; e++) {
		assert_non_null(bzimage_error_to_string(e));
		for (int f = 0; f < e; f++)
			assert_string_not_equal(bzimage_error_to_string(e),
			                        bzimage_error_to_string(f));
	}
	assert_null(bzimage_error_to_string(_BZIMAGE_ERR_MAX));
	assert_null(bzimage_error_to_string(-1));
}

static void test_bzimage_file_errors(void **state) {
	char path[] = "/tmp/test-bzimage.XXXXXX";
	uint8_t img[IMG_SIZE];
	_cleanup_free_ char *release = NULL;
	BzImageError e = _BZIMAGE_ERR_MAX;
	struct bzimage_info info;
	int fd;

	assert_int_equal(bzimage_parse_file("/nonexistent/vmlinuz", &info, &e), -ENOENT);
	assert_int_equal(bzimage_parse_file("/tmp", &info, &e), -EISDIR);

	make_image(img);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write_all(fd, img, sizeof(img)), 0);
	close(fd);
	assert_int_equal(bzimage_kernel_release(path, &release, &e), 0);
	assert_string_equal(release, "6.1.0-test-amd64");
	assert_int_equal(e, BZIMAGE_OK);

	assert_int_equal(truncate(path, IMG_SETUP_SIZE), 0);
	assert_int_equal(bzimage_parse_file(path, &info, &e), -EBADMSG);
	assert_int_equal(e, BZIMAGE_ERR_NO_KERNEL);
	unlink(path);
}

/* A real distribution kernel: the lab cache, the downloaded package, or /boot. */
static char *find_real_vmlinuz(void) {
	static const char *const dirs[] = { TEST_KERNEL_DIRS };

	for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
		DIR *d = opendir(dirs[i]);
		struct dirent *de;
		char *found = NULL;

		if (!d)
			continue;
		while (!found && (de = readdir(d)))
			if (strncmp(de->d_name, "vmlinuz-", 8) == 0)
				if (asprintf(&found, "%s/%s", dirs[i], de->d_name) < 0)
					found = NULL;
		closedir(d);
		if (found)
			return found;
	}
	return NULL;
}

static void test_bzimage_real_vmlinuz(void **state) {
	_cleanup_free_ char *path = find_real_vmlinuz(), *release = NULL;
	_cleanup_free_ char *data = NULL;
	struct bzimage_info info, from_file;
	size_t size;

	if (!path) {
		print_message("[ SKIP     ] no vmlinuz in: %s (run tests/bench-fetch-kernel)\n",
		              TEST_KERNEL_DIRS_STR);
		skip();
	}
	print_message("[ INFO     ] parsing %s\n", path);
	assert_int_equal(read_file_full(path, BZIMAGE_MAX_SIZE, &data, &size), 0);
	assert_int_equal(bzimage_parse(data, size, &info), BZIMAGE_OK);
	assert_int_equal(bzimage_parse_file(path, &from_file, NULL), 0);
	assert_memory_equal(&info, &from_file, sizeof(info));

	/* The release is what the file name says after "vmlinuz-". */
	assert_int_equal(bzimage_kernel_release(path, &release, NULL), 0);
	assert_string_equal(release, strrchr(path, '/') + strlen("/vmlinuz-"));
	assert_true(info.protocol >= BOOT_PROTOCOL_MIN);
	assert_true(info.syssize_bytes <= info.kernel_size);
	assert_true(info.init_size >= info.syssize_bytes);

	if (streq(release, "6.1.0-57-cloud-amd64")) {
		/* Values read with xxd from Debian's 6.1.192-3 package. */
		assert_int_equal(info.protocol, 0x020f);
		assert_int_equal(info.setup_size, 40 * SECTOR_SIZE);
		assert_int_equal(info.kernel_alignment, 0x200000);
		assert_int_equal(info.min_alignment, 21);
		assert_int_equal(info.cmdline_size, 2047);
		assert_int_equal(info.initrd_addr_max, 0x7fffffff);
		assert_int_equal(info.pref_address, 0x1000000);
		assert_int_equal(info.init_size, 0x3378000);
		assert_int_equal(info.xloadflags, 0x7f);
		assert_true(info.can_load_above_4g);
		assert_true(strncmp(info.version, "6.1.0-57-cloud-amd64 (", 22) == 0);
	}

	/* Cutting the real image anywhere in its kernel part is caught. */
	assert_int_equal(bzimage_parse(data, info.setup_size, &info), BZIMAGE_ERR_NO_KERNEL);
	assert_int_equal(bzimage_parse(data, info.setup_size + info.syssize_bytes / 2, &info),
	                 BZIMAGE_ERR_SYSSIZE);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bzimage_valid_crafted),
		cmocka_unit_test(test_bzimage_rejections),
		cmocka_unit_test(test_bzimage_version_unterminated),
		cmocka_unit_test(test_bzimage_truncated_every_length),
		cmocka_unit_test(test_bzimage_too_large),
		cmocka_unit_test(test_bzimage_error_strings),
		cmocka_unit_test(test_bzimage_file_errors),
		cmocka_unit_test(test_bzimage_real_vmlinuz),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
