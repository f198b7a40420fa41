/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <sys/sysmacros.h>

#include "daemon-test-util.h"
#include "image.h"
#include "upgrade-bus.h"

typedef struct Fixture {
	char *root;
	char **allowed;
	ImageRules rules;
} Fixture;

static int setup(void **state) {
	Fixture *f = calloc(1, sizeof(*f));

	if (!f || !(f->root = test_mkroot()))
		return -1;
	f->allowed = calloc(3, sizeof(char *));
	f->allowed[0] = strdup("/boot");
	f->allowed[1] = strdup("/var/lib/upgraded/images");
	f->rules = (ImageRules){ .root = f->root, .allowed = f->allowed, .owner = getuid() };
	*state = f;
	return 0;
}

static int teardown(void **state) {
	Fixture *f = *state;

	test_rmroot(f->root);
	strv_free(f->allowed);
	free(f);
	return 0;
}

/* Expects image_open() to fail with error name; returns the message for checks. */
static void expect_error(Fixture *f, const char *path, ImageKind kind, const char *name) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	ImageFile img = { .fd = -EBADF };

	assert_true(image_open(&f->rules, path, kind, &img, &e) < 0);
	if (!sd_bus_error_has_name(&e, name))
		fail_msg("%s: expected %s, got %s (%s)", path, name, e.name, e.message);
	assert_int_equal(img.fd, -EBADF); /* untouched on failure */
}

static void test_image_open_accepts_valid_kernel(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(image_file_done) ImageFile img = { .fd = -EBADF };
	Fixture *f = *state;
	char sha[DIGEST_SHA256_HEX_SIZE];

	assert_int_equal(
	        test_write_bzimage(f->root, "/boot/vmlinuz-x", "6.1.0-57-cloud-amd64", BZ_OK, 0644),
	        0);
	assert_int_equal(image_open(&f->rules, "/boot/vmlinuz-x", IMAGE_KERNEL, &img, &e), 0);
	assert_string_equal(img.version, "6.1.0-57-cloud-amd64");
	assert_string_equal(img.version_source, "bzimage-header");
	assert_string_equal(img.path, "/boot/vmlinuz-x");
	assert_true(img.fd >= 0);
	assert_int_equal(img.size, SECTOR_SIZE * 5 + 16384);
	assert_int_equal(digest_file(img.fd, sha, NULL), 0);
	assert_string_equal(sha, img.sha256);
	assert_true((fcntl(img.fd, F_GETFD) & FD_CLOEXEC) != 0);
}

static void test_image_open_version_from_file_name(void **state) {
	_cleanup_(image_file_done) ImageFile img = { .fd = -EBADF };
	Fixture *f = *state;

	assert_int_equal(test_write_bzimage(f->root, "/boot/vmlinuz-6.1.0-47-cloud-amd64", "",
	                                    BZ_NO_VERSION, 0644),
	                 0);
	assert_int_equal(image_open(&f->rules, "/boot/vmlinuz-6.1.0-47-cloud-amd64", IMAGE_KERNEL,
	                            &img, NULL),
	                 0);
	assert_string_equal(img.version, "6.1.0-47-cloud-amd64");
	assert_string_equal(img.version_source, "file-name");

	assert_int_equal(test_write_bzimage(f->root, "/boot/kernel", "", BZ_NO_VERSION, 0644), 0);
	expect_error(f, "/boot/kernel", IMAGE_KERNEL, UPGRADE_ERROR_INVALID_IMAGE);
}

static void test_image_open_rejects_bad_paths(void **state) {
	Fixture *f = *state;

	assert_int_equal(test_write_bzimage(f->root, "/boot/vmlinuz-x", "6.1", BZ_OK, 0644), 0);
	expect_error(f, "", IMAGE_KERNEL, UPGRADE_ERROR_INVALID_PATH);
	expect_error(f, "boot/vmlinuz-x", IMAGE_KERNEL, UPGRADE_ERROR_INVALID_PATH);
	expect_error(f, "/boot/../boot/vmlinuz-x", IMAGE_KERNEL, UPGRADE_ERROR_INVALID_PATH);
	expect_error(f, "/boot//vmlinuz-x", IMAGE_KERNEL, UPGRADE_ERROR_INVALID_PATH);
	expect_error(f, "/boot/./vmlinuz-x", IMAGE_KERNEL, UPGRADE_ERROR_INVALID_PATH);
	expect_error(f, "/boot/vmlinuz-x\n", IMAGE_KERNEL, UPGRADE_ERROR_INVALID_PATH);
	expect_error(f, "/boot/missing", IMAGE_KERNEL, UPGRADE_ERROR_INVALID_PATH);
	expect_error(f, "/boot", IMAGE_KERNEL, UPGRADE_ERROR_INVALID_PATH); /* a directory */
	expect_error(f, "/etc/shadow", IMAGE_KERNEL, UPGRADE_ERROR_NOT_ALLOWED_PATH);
	expect_error(f, "/bootx/vmlinuz", IMAGE_KERNEL, UPGRADE_ERROR_NOT_ALLOWED_PATH);
	expect_error(f, "/var/lib/upgraded/vmlinuz", IMAGE_KERNEL, UPGRADE_ERROR_NOT_ALLOWED_PATH);
}

static void test_image_open_rejects_symlinks(void **state) {
	_cleanup_free_ char *link = NULL, *dir = NULL, *target = NULL;
	Fixture *f = *state;

	assert_int_equal(test_write_bzimage(f->root, "/boot/vmlinuz-x", "6.1", BZ_OK, 0644), 0);
	/* The last component... */
	assert_true(asprintf(&link, "%s/boot/vmlinuz", f->root) > 0);
	assert_int_equal(symlink("vmlinuz-x", link), 0);
	expect_error(f, "/boot/vmlinuz", IMAGE_KERNEL, UPGRADE_ERROR_INVALID_PATH);
	/* ...and a directory on the way, even one pointing inside the roots. */
	assert_true(asprintf(&dir, "%s/boot/sub", f->root) > 0);
	assert_true(asprintf(&target, "%s/boot", f->root) > 0);
	assert_int_equal(symlink(target, dir), 0);
	expect_error(f, "/boot/sub/vmlinuz-x", IMAGE_KERNEL, UPGRADE_ERROR_INVALID_PATH);
}

static void test_image_open_rejects_unsafe_files(void **state) {
	Fixture *f = *state;

	assert_int_equal(test_write_bzimage(f->root, "/boot/ww", "6.1", BZ_OK, 0666), 0);
	expect_error(f, "/boot/ww", IMAGE_KERNEL, UPGRADE_ERROR_UNSAFE_FILE);
	assert_int_equal(test_write_bzimage(f->root, "/boot/gw", "6.1", BZ_OK, 0664), 0);
	expect_error(f, "/boot/gw", IMAGE_KERNEL, UPGRADE_ERROR_UNSAFE_FILE);
	assert_int_equal(test_write_file(f->root, "/boot/initrd-gw", "x", 0620), 0);
	expect_error(f, "/boot/initrd-gw", IMAGE_INITRD, UPGRADE_ERROR_UNSAFE_FILE);

	/* Owned by someone else than the required owner (root in production). */
	assert_int_equal(test_write_bzimage(f->root, "/boot/other", "6.1", BZ_OK, 0644), 0);
	f->rules.owner = getuid() + 1;
	expect_error(f, "/boot/other", IMAGE_KERNEL, UPGRADE_ERROR_UNSAFE_FILE);
	f->rules.owner = getuid();
}

static void test_image_open_rejects_special_files(void **state) {
	_cleanup_free_ char *fifo = NULL, *dev = NULL;
	Fixture *f = *state;

	assert_true(asprintf(&fifo, "%s/boot/fifo", f->root) > 0);
	assert_int_equal(mkfifo(fifo, 0644), 0);
	expect_error(f, "/boot/fifo", IMAGE_KERNEL, UPGRADE_ERROR_INVALID_PATH);

	if (getuid() == 0) {
		assert_true(asprintf(&dev, "%s/boot/null", f->root) > 0);
		assert_int_equal(mknod(dev, S_IFCHR | 0644, makedev(1, 3)), 0);
		expect_error(f, "/boot/null", IMAGE_KERNEL, UPGRADE_ERROR_INVALID_PATH);
	}
}

static void test_image_open_rejects_non_bzimages(void **state) {
	Fixture *f = *state;

	assert_int_equal(test_write_bzimage(f->root, "/boot/nomagic", "6.1", BZ_NO_MAGIC, 0644), 0);
	expect_error(f, "/boot/nomagic", IMAGE_KERNEL, UPGRADE_ERROR_INVALID_IMAGE);
	assert_int_equal(test_write_bzimage(f->root, "/boot/trunc", "6.1", BZ_TRUNCATED, 0644), 0);
	expect_error(f, "/boot/trunc", IMAGE_KERNEL, UPGRADE_ERROR_INVALID_IMAGE);
	assert_int_equal(test_write_bzimage(f->root, "/boot/i386", "6.1", BZ_32BIT, 0644), 0);
	expect_error(f, "/boot/i386", IMAGE_KERNEL, UPGRADE_ERROR_INVALID_IMAGE);
	assert_int_equal(test_write_file(f->root, "/boot/text", "#!/bin/sh\necho hi\n", 0644), 0);
	expect_error(f, "/boot/text", IMAGE_KERNEL, UPGRADE_ERROR_INVALID_IMAGE);
	assert_int_equal(test_write_file(f->root, "/boot/empty", "", 0644), 0);
	expect_error(f, "/boot/empty", IMAGE_KERNEL, UPGRADE_ERROR_INVALID_IMAGE);
	expect_error(f, "/boot/empty", IMAGE_INITRD, UPGRADE_ERROR_INVALID_IMAGE);
}

/* The version string: from the header, else the file name, else a named
 * refusal (the loader's parser has its own exhaustive header tests;
 * test_image_open_rejects_non_bzimages proves the daemon passes its verdict on). */
static void test_image_open_rejects_bad_headers(void **state) {
	Fixture *f = *state;

	/* No version in the header and a name that does not carry one either. */
	assert_int_equal(test_write_bzimage(f->root, "/boot/kernel", "", BZ_NO_VERSION, 0644), 0);
	expect_error(f, "/boot/kernel", IMAGE_KERNEL, UPGRADE_ERROR_INVALID_IMAGE);
	/* The header's kernel_version points past the setup area: no overread, the
	 * name is used instead. */
	{
		_cleanup_(image_file_done) ImageFile img = { .fd = -EBADF };
		_cleanup_free_ char *p = NULL;
		_cleanup_close_ int fd = -EBADF;
		const uint8_t far[2] = { 0xff, 0x7f };

		assert_int_equal(test_write_bzimage(f->root, "/boot/vmlinuz-6.1.0-9-amd64", "6.1",
		                                    BZ_OK, 0644),
		                 0);
		assert_true(asprintf(&p, "%s/boot/vmlinuz-6.1.0-9-amd64", f->root) > 0);
		fd = open(p, O_WRONLY | O_CLOEXEC);
		assert_true(fd >= 0);
		assert_int_equal(pwrite(fd, far, 2, BP_KERNEL_VERSION), 2);
		assert_int_equal(image_open(&f->rules, "/boot/vmlinuz-6.1.0-9-amd64", IMAGE_KERNEL,
		                            &img, NULL),
		                 0);
		assert_string_equal(img.version, "6.1.0-9-amd64");
		assert_string_equal(img.version_source, "file-name");
	}
	assert_false(image_version_is_valid("6.1 ; rm"));
	assert_false(image_version_is_valid(""));
	assert_true(image_version_is_valid("6.1.0-57-cloud-amd64"));
}

/* Stages f's file (image_open) into an UpdateFile the way context_stage() records it. */
/* Makes root/rel a sparse file of size bytes (none of them written). */
static void make_sparse(Fixture *f, const char *rel, uint64_t size) {
	_cleanup_free_ char *path = NULL;

	assert_int_equal(test_write_file(f->root, rel, "x", 0644), 0);
	assert_true(asprintf(&path, "%s%s", f->root, rel) > 0);
	assert_int_equal(truncate(path, (off_t)size), 0);
}

/* Past the limit is refused on the size alone: a sparse 20 GiB initrd at once, by name. */
static void test_image_open_rejects_too_large(void **state) {
	Fixture *f = *state;
	struct timespec t0, t1;

	make_sparse(f, "/boot/initrd.huge", 20ULL << 30);
	make_sparse(f, "/boot/initrd.over", IMAGE_INITRD_SIZE_MAX + 1);
	make_sparse(f, "/boot/vmlinuz-huge", IMAGE_KERNEL_SIZE_MAX + 1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	expect_error(f, "/boot/initrd.huge", IMAGE_INITRD, UPGRADE_ERROR_IMAGE_TOO_LARGE);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* Not read: hashing 20 GiB of zeroes takes far longer than this generous bound (over
	 * 10 s at 2 GB/s), which no loaded machine's open and fstat come near. */
	assert_true((t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec) <
	            5 * 1000000000LL);
	expect_error(f, "/boot/initrd.over", IMAGE_INITRD, UPGRADE_ERROR_IMAGE_TOO_LARGE);
	expect_error(f, "/boot/vmlinuz-huge", IMAGE_KERNEL, UPGRADE_ERROR_IMAGE_TOO_LARGE);
}

/* image_open_unhashed() judges without a digest; image_hash() adds the one image_open()
 * records, and stops on a raised cancel flag. */
static void test_image_open_in_two_steps(void **state) {
	_cleanup_(image_file_done) ImageFile a = { .fd = -EBADF }, b = { .fd = -EBADF };
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	atomic_bool cancel = true;
	Fixture *f = *state;

	assert_int_equal(test_write_file(f->root, "/boot/initrd.img", "initrd", 0644), 0);
	assert_int_equal(image_open(&f->rules, "/boot/initrd.img", IMAGE_INITRD, &a, &e), 0);
	assert_int_equal(image_open_unhashed(&f->rules, "/boot/initrd.img", IMAGE_INITRD, &b, &e),
	                 0);
	assert_string_equal(b.sha256, "");
	assert_int_equal(b.size, 6);
	assert_int_equal(image_hash(&b, IMAGE_INITRD, &cancel, &e), -ECANCELED);
	assert_false(sd_bus_error_is_set(&e));
	cancel = false;
	assert_int_equal(image_hash(&b, IMAGE_INITRD, &cancel, &e), 0);
	assert_string_equal(b.sha256, a.sha256);
}

static void stage_file(Fixture *f, const char *path, UpdateFile *ret) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(image_file_done) ImageFile img = { .fd = -EBADF };

	assert_int_equal(image_open(&f->rules, path, IMAGE_KERNEL, &img, &e), 0);
	*ret = (UpdateFile){ .path = strdup(path),
		             .size = img.size,
		             .mtime_usec = img.mtime_usec,
		             .inode = img.inode,
		             .ctime_usec = img.ctime_usec };
	assert_true(img.inode > 0 && img.ctime_usec > 0);
}

static void test_image_unchanged_sees_replace_truncate_rewrite(void **state) {
	_cleanup_free_ char *p = NULL, *tmp = NULL, *data = NULL;
	Fixture *f = *state;
	UpdateFile u = {}, none = {};
	struct stat st;
	size_t size;
	int fd;

	assert_true(image_unchanged(f->root, &none)); /* no initrd */
	assert_int_equal(test_write_bzimage(f->root, "/boot/vmlinuz-x", "6.1", BZ_OK, 0644), 0);
	assert_true(asprintf(&p, "%s/boot/vmlinuz-x", f->root) > 0);
	assert_true(asprintf(&tmp, "%s/boot/vmlinuz-x.new", f->root) > 0);
	assert_int_equal(read_file_full(p, 1 << 20, &data, &size), 0);

	/* 1. Renamed over by a copy with the same bytes and the same mtime. */
	stage_file(f, "/boot/vmlinuz-x", &u);
	assert_true(image_unchanged(f->root, &u));
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(write_file_atomic(tmp, data, size, 0644), 0);
	assert_int_equal(utimensat(AT_FDCWD, tmp, (struct timespec[]){ st.st_atim, st.st_mtim }, 0),
	                 0);
	assert_int_equal(rename(tmp, p), 0);
	assert_false(image_unchanged(f->root, &u));
	free(u.path);

	/* 2. Truncated. */
	stage_file(f, "/boot/vmlinuz-x", &u);
	assert_int_equal(truncate(p, (off_t)size - 1), 0);
	assert_false(image_unchanged(f->root, &u));
	free(u.path);

	/* 3. Rewritten in place, same size, the mtime set back: only the ctime tells. */
	assert_int_equal(truncate(p, (off_t)size), 0);
	stage_file(f, "/boot/vmlinuz-x", &u);
	assert_int_equal(stat(p, &st), 0);
	usleep(10000);
	fd = open(p, O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "X", 1, (off_t)size - 1), 1);
	close(fd);
	assert_int_equal(utimensat(AT_FDCWD, p, (struct timespec[]){ st.st_atim, st.st_mtim }, 0),
	                 0);
	assert_false(image_unchanged(f->root, &u));
	free(u.path);

	/* 4. Replaced by a symlink to an identical file. */
	assert_int_equal(write_file_atomic(p, data, size, 0644), 0);
	stage_file(f, "/boot/vmlinuz-x", &u);
	assert_int_equal(rename(p, tmp), 0);
	assert_int_equal(symlink("vmlinuz-x.new", p), 0);
	assert_false(image_unchanged(f->root, &u));
	free(u.path);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_image_open_accepts_valid_kernel, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_image_open_version_from_file_name, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_image_open_rejects_bad_paths, setup, teardown),
		cmocka_unit_test_setup_teardown(test_image_open_rejects_symlinks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_image_open_rejects_unsafe_files, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_image_open_rejects_special_files, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_image_open_rejects_non_bzimages, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_image_unchanged_sees_replace_truncate_rewrite,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(test_image_open_rejects_too_large, setup, teardown),
		cmocka_unit_test_setup_teardown(test_image_open_in_two_steps, setup, teardown),
		cmocka_unit_test_setup_teardown(test_image_open_rejects_bad_headers, setup,
		                                teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
