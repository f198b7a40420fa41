/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "daemon-test-util.h"
#include "kexec-backend.h"

static int setup(void **state) {
	char *root = test_mkroot();
	char *dir = NULL;

	if (!root || asprintf(&dir, "%s/sys/kernel", root) < 0 || mkdir_p(dir, 0755) < 0)
		return -1;
	free(dir);
	if (asprintf(&dir, "%s/proc/sys/kernel", root) < 0 || mkdir_p(dir, 0755) < 0)
		return -1;
	free(dir);
	*state = root;
	return 0;
}

static int teardown(void **state) {
	test_rmroot(*state);
	return 0;
}

static void test_kexec_backend_find(void **state) {
	assert_ptr_equal(kexec_backend_find("kexec_file"), &kexec_backend_file);
	assert_ptr_equal(kexec_backend_find("record"), &kexec_backend_record);
	assert_null(kexec_backend_find("bogus"));
	assert_null(kexec_backend_find(NULL));
	assert_false(kexec_backend_file.test_only);
	assert_true(kexec_backend_record.test_only);
}

/* The kexec_file backend judges the (root-prefixed) sysfs files. */
static void test_kexec_file_probe_says_why(void **state) {
	const char *root = *state;
	char *why = NULL;

	/* No /sys/kernel/kexec_loaded: a kernel without kexec, like this machine's. */
	assert_int_equal(kexec_backend_file.probe(root, &why), -ENOSYS);
	assert_non_null(strstr(why, "no kexec support"));
	free(why);
	why = NULL;
	assert_int_equal(kexec_backend_file.is_loaded(root, 0), -ENOSYS);

	assert_int_equal(test_write_file(root, "/sys/kernel/kexec_loaded", "0\n", 0444), 0);
	assert_int_equal(test_write_file(root, "/proc/sys/kernel/kexec_load_disabled", "1\n", 0444),
	                 0);
	assert_int_equal(kexec_backend_file.probe(root, &why), -EPERM);
	assert_non_null(strstr(why, "kexec_load_disabled"));
	free(why);
	why = NULL;

	assert_int_equal(test_write_file(root, "/proc/sys/kernel/kexec_load_disabled", "0\n", 0444),
	                 0);
	assert_int_equal(kexec_backend_file.probe(root, &why), 0);
	assert_null(why);
	assert_int_equal(kexec_backend_file.is_loaded(root, 0), 0);
	assert_int_equal(test_write_file(root, "/sys/kernel/kexec_loaded", "1\n", 0444), 0);
	assert_int_equal(kexec_backend_file.is_loaded(root, 0), 1);

	assert_false(kexec_crash_reserved(root));
	assert_int_equal(test_write_file(root, "/sys/kernel/kexec_crash_size", "0\n", 0444), 0);
	assert_false(kexec_crash_reserved(root));
	assert_int_equal(test_write_file(root, "/sys/kernel/kexec_crash_size", "268435456\n", 0444),
	                 0);
	assert_true(kexec_crash_reserved(root));
}

/* A fast handoff cannot be asked of kexec_file_load: the kernel always verifies. */
static void test_kexec_file_refuses_fast(void **state) {
	KexecImage img = {
		.kernel_fd = 0, .initrd_fd = -EBADF, .cmdline = "", .mode = HANDOFF_MODE_FAST
	};

	assert_int_equal(kexec_backend_file.load(NULL, &img), -EOPNOTSUPP);
	img.kernel_fd = -EBADF;
	img.mode = HANDOFF_MODE_VERIFIED;
	assert_int_equal(kexec_backend_file.load(NULL, &img), -EBADF);
}

/* The real system call with a crafted (unbootable) image: on a kernel without
 * kexec, without CAP_SYS_BOOT, or with kexec disabled it must be an error the
 * daemon names (KexecUnavailable); a kernel with kexec must refuse the image. */
static void test_kexec_file_real_syscall_is_named(void **state) {
	_cleanup_free_ char *path = NULL;
	_cleanup_close_ int fd = -EBADF;
	const char *root = *state;
	KexecImage img = { .initrd_fd = -EBADF,
		           .cmdline = "quiet",
		           .kernel_path = "crafted",
		           .mode = HANDOFF_MODE_VERIFIED };
	int r;

	assert_int_equal(test_write_bzimage(root, "/boot/vmlinuz-x", "6.1", BZ_OK, 0644), 0);
	assert_true(asprintf(&path, "%s/boot/vmlinuz-x", root) > 0);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	img.kernel_fd = fd;
	r = kexec_backend_file.load(NULL, &img);
	assert_true(r < 0);
	if (!kexec_errno_is_unavailable(r) && !kexec_errno_is_bad_image(r) && r != -EINVAL)
		fail_msg("unexpected kexec_file_load error %d", r);
	r = kexec_backend_file.unload(NULL, 0);
	assert_true(r == 0 || kexec_errno_is_unavailable(r) || r == -EINVAL);
}

static void test_kexec_record_round_trip(void **state) {
	_cleanup_free_ char *path = NULL, *data = NULL;
	_cleanup_close_ int fd = -EBADF;
	const char *root = *state;
	KexecImage img = { .initrd_fd = -EBADF,
		           .cmdline = "quiet",
		           .kernel_path = "/boot/vmlinuz-x",
		           .flags = KEXEC_IMAGE_PANIC };

	assert_int_equal(test_write_bzimage(root, "/boot/vmlinuz-x", "6.1", BZ_OK, 0644), 0);
	assert_true(asprintf(&path, "%s/boot/vmlinuz-x", root) > 0);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	img.kernel_fd = fd;

	assert_int_equal(kexec_backend_record.is_loaded(root, 0), 0);
	assert_int_equal(kexec_backend_record.load(root, &img), 0);
	assert_int_equal(kexec_backend_record.is_loaded(root, KEXEC_IMAGE_PANIC), 1);
	assert_int_equal(kexec_backend_record.is_loaded(root, 0), 0);
	img.flags = 0;
	img.mode = HANDOFF_MODE_FAST;
	assert_int_equal(kexec_backend_record.load(root, &img), 0);
	assert_int_equal(kexec_backend_record.is_loaded(root, 0), 1);
	assert_int_equal(kexec_backend_record.unload(root, 0), 0);
	assert_int_equal(kexec_backend_record.is_loaded(root, 0), 0);
	assert_int_equal(kexec_backend_record.is_loaded(root, KEXEC_IMAGE_PANIC), 1);

	free(path);
	assert_true(asprintf(&path, "%s/run/upgraded/kexec-record.json", root) > 0);
	assert_int_equal(read_file_full(path, 1 << 20, &data, NULL), 0);
	assert_non_null(strstr(data, "\"mode\":\"fast\""));
	assert_non_null(strstr(data, "\"panic\":true"));
	assert_non_null(strstr(data, "\"op\":\"unload\""));
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kexec_backend_find),
		cmocka_unit_test_setup_teardown(test_kexec_file_probe_says_why, setup, teardown),
		cmocka_unit_test(test_kexec_file_refuses_fast),
		cmocka_unit_test_setup_teardown(test_kexec_file_real_syscall_is_named, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_kexec_record_round_trip, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
