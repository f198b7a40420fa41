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

/* What the backend handed the kernel, seen through the system-call seam. */
typedef struct SyscallSeen {
	int calls, kernel_fd, initrd_fd, result;
	unsigned long cmdline_len, flags;
	char cmdline[64];
	bool cmdline_null;
} SyscallSeen;

static int fake_kexec_file_load(int kernel_fd, int initrd_fd, unsigned long cmdline_len,
                                const char *cmdline, unsigned long flags, void *userdata) {
	SyscallSeen *s = userdata;

	s->calls++;
	s->kernel_fd = kernel_fd;
	s->initrd_fd = initrd_fd;
	s->cmdline_len = cmdline_len;
	s->flags = flags;
	s->cmdline_null = !cmdline;
	snprintf(s->cmdline, sizeof(s->cmdline), "%s", cmdline ?: "");
	return s->result;
}

/* Load and unload hand kexec_file_load(2) exactly its arguments (include/uapi/linux/kexec.h:
 * UNLOAD 1, ON_CRASH 2, NO_INITRAMFS 4), and its errors come back as -errno. Never the real
 * system call: a test must not unload a kernel an administrator staged on this host. */
static void test_kexec_file_syscall_arguments(void **state) {
	KexecImage img = { .kernel_fd = 7,
		           .initrd_fd = -EBADF,
		           .cmdline = "quiet",
		           .kernel_path = "crafted",
		           .mode = HANDOFF_MODE_VERIFIED };
	SyscallSeen s = {};

	kexec_file_set_syscall_for_test(fake_kexec_file_load, &s);
	assert_int_equal(kexec_backend_file.load(NULL, &img), 0);
	assert_int_equal(s.calls, 1);
	assert_int_equal(s.kernel_fd, 7);
	assert_int_equal(s.initrd_fd, -1);
	/* A normal image: the handoff mark the next boot knows itself by, after the line. */
	assert_string_equal(s.cmdline, "quiet upgraded.handoff=1");
	assert_int_equal(s.cmdline_len, strlen(s.cmdline) + 1);
	assert_int_equal(s.flags, 0x4);

	/* The crash image: the panic mark the crash kernel knows itself by, after the line. */
	img.initrd_fd = 8;
	img.flags = KEXEC_IMAGE_PANIC;
	assert_int_equal(kexec_backend_file.load(NULL, &img), 0);
	assert_int_equal(s.initrd_fd, 8);
	assert_string_equal(s.cmdline, "quiet nr_cpus=1 reset_devices upgraded.panic=1");
	assert_int_equal(s.cmdline_len, strlen(s.cmdline) + 1);
	assert_int_equal(s.flags, 0x2);
	img.cmdline = NULL;
	assert_int_equal(kexec_backend_file.load(NULL, &img), 0);
	assert_string_equal(s.cmdline, "nr_cpus=1 reset_devices upgraded.panic=1");
	img.flags = 0;
	assert_int_equal(kexec_backend_file.load(NULL, &img), 0);
	assert_string_equal(s.cmdline, "upgraded.handoff=1");
	assert_int_equal(s.flags, 0x0);
	img.flags = KEXEC_IMAGE_PANIC;

	/* A "--" would give the mark to init: refused, the kernel never asked. */
	img.cmdline = "quiet -- single";
	assert_int_equal(kexec_backend_file.load(NULL, &img), -EINVAL);
	assert_int_equal(s.calls, 4);
	img.cmdline = NULL;

	assert_int_equal(kexec_backend_file.unload(NULL, 0), 0);
	assert_int_equal(s.flags, 0x1);
	assert_int_equal(s.kernel_fd, -1);
	assert_int_equal(s.initrd_fd, -1);
	assert_int_equal(s.cmdline_len, 0);
	assert_true(s.cmdline_null);
	assert_int_equal(kexec_backend_file.unload(NULL, KEXEC_IMAGE_PANIC), 0);
	assert_int_equal(s.flags, 0x3);
	assert_int_equal(s.calls, 6);

	/* The kernel's refusals, as the daemon names them. */
	s.result = -EKEYREJECTED;
	assert_int_equal(kexec_backend_file.load(NULL, &img), -EKEYREJECTED);
	assert_true(kexec_errno_is_bad_image(s.result));
	s.result = -EPERM;
	assert_int_equal(kexec_backend_file.unload(NULL, 0), -EPERM);
	assert_true(kexec_errno_is_unavailable(s.result));
	kexec_file_set_syscall_for_test(NULL, NULL);
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
		cmocka_unit_test_setup_teardown(test_kexec_file_syscall_arguments, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kexec_record_round_trip, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
