/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * What the segment builder refuses, by name (a command line it cannot pass, a
 * truncated or foreign image), and the usability checks of the kexec_load path
 * (lockdown, EFI, kexec_load_disabled), and the platform facts Describe() and
 * the report name (firmware, Secure Boot, lockdown). The kexec_load syscall
 * itself is only called where the kernel has no kexec (expects ENOSYS).
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "loader-test-util.h"
#include "platform.h"

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
	/* Our words follow the caller's: after a "--" the kernel would give them to init. */
	o.cmdline = "root=/dev/vda1 -- single";
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

	/* The EFI runtime map is x86_64's handover; arm64 passes the EFI state in the DT. */
	if (LOADER_ARCH_NATIVE != LOADER_ARCH_X86_64)
		return;
	write_root_file(f->root, "/sys/firmware/efi/systab", "ACPI20=0x7fb7e014\n");
	assert_int_equal(loader_check_usable(f->root, &u), 0);
	assert_int_equal(u, LOADER_UNUSABLE_EFI_NO_RUNTIME_MAP);
	write_root_file(f->root, "/sys/firmware/efi/runtime-map/0/type", "0x5\n");
	assert_int_equal(loader_check_usable(f->root, &u), 0);
	/* A runtime map entry without its other fields. */
	assert_int_equal(u, LOADER_UNUSABLE_EFI_STATE);
}

static void test_platform_parsers(void **state) {
	static const struct {
		const char *line;
		int r;
		PlatformLockdown mode;
	} lines[] = {
		{ "[none] integrity confidentiality", 0, PLATFORM_LOCKDOWN_NONE },
		{ "none [integrity] confidentiality", 0, PLATFORM_LOCKDOWN_INTEGRITY },
		{ "none integrity [confidentiality]", 0, PLATFORM_LOCKDOWN_CONFIDENTIALITY },
		{ "none integrity confidentiality", -EBADMSG, 0 },
		{ "[none] [integrity] confidentiality", -EBADMSG, 0 },
		{ "none [integ] confidentiality", -EBADMSG, 0 },
		{ "none [integrity confidentiality", -EBADMSG, 0 },
		{ "[nonsense]", -EBADMSG, 0 },
		{ "", -EBADMSG, 0 },
	};
	const uint8_t on[5] = { 0x06, 0, 0, 0, 1 }, off[5] = { 0x06, 0, 0, 0, 0 };
	const uint8_t two[5] = { 0x06, 0, 0, 0, 2 }, extra[6] = { 0x06, 0, 0, 0, 1, 0 };
	PlatformSecureBoot sb = _PLATFORM_SECURE_BOOT_MAX;

	for (size_t i = 0; i < ELEMENTSOF(lines); i++) {
		PlatformLockdown l = _PLATFORM_LOCKDOWN_MAX;

		assert_int_equal(platform_lockdown_parse(lines[i].line, &l), lines[i].r);
		assert_int_equal(l, lines[i].r == 0 ? lines[i].mode : _PLATFORM_LOCKDOWN_MAX);
	}
	assert_int_equal(platform_lockdown_parse(NULL, &(PlatformLockdown){ 0 }), -EBADMSG);

	assert_int_equal(platform_secure_boot_parse(on, sizeof(on), &sb), 0);
	assert_int_equal(sb, PLATFORM_SECURE_BOOT_ENABLED);
	assert_int_equal(platform_secure_boot_parse(off, sizeof(off), &sb), 0);
	assert_int_equal(sb, PLATFORM_SECURE_BOOT_DISABLED);
	sb = _PLATFORM_SECURE_BOOT_MAX;
	assert_int_equal(platform_secure_boot_parse(two, sizeof(two), &sb), -EBADMSG);
	assert_int_equal(platform_secure_boot_parse(extra, sizeof(extra), &sb), -EBADMSG);
	assert_int_equal(platform_secure_boot_parse(on, 4, &sb), -EBADMSG);
	assert_int_equal(platform_secure_boot_parse(NULL, 0, &sb), -EBADMSG);
	assert_int_equal(sb, _PLATFORM_SECURE_BOOT_MAX);

	for (int i = 0; i < _PLATFORM_FIRMWARE_MAX; i++)
		assert_non_null(platform_firmware_to_string(i));
	for (int i = 0; i < _PLATFORM_SECURE_BOOT_MAX; i++)
		assert_non_null(platform_secure_boot_to_string(i));
	for (int i = 0; i < _PLATFORM_LOCKDOWN_MAX; i++)
		assert_non_null(platform_lockdown_to_string(i));
	assert_null(platform_firmware_to_string(_PLATFORM_FIRMWARE_MAX));
	assert_null(platform_secure_boot_to_string(-1));
	assert_null(platform_lockdown_to_string(_PLATFORM_LOCKDOWN_MAX));
}

static void write_secure_boot_var(const char *root, uint8_t value, size_t size) {
	_cleanup_free_ char *p = NULL;
	const uint8_t data[6] = { 0x06, 0, 0, 0, value, 0 };

	write_root_file(root, PLATFORM_SECURE_BOOT_VAR, "");
	assert_int_equal(path_prefix_root(root, PLATFORM_SECURE_BOOT_VAR, &p), 0);
	assert_int_equal(write_file_atomic(p, data, size, 0644), 0);
}

static void assert_platform(const char *root, const char *want_json) {
	PlatformFacts pf;
	json_object *o = NULL;

	assert_int_equal(platform_facts_read(root, &pf), 0);
	assert_int_equal(platform_facts_to_json(&pf, &o), 0);
	assert_string_equal(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN), want_json);
	json_object_put(o);
}

static void test_platform_facts(void **state) {
	struct fixture *f = *state;

	/* A BIOS boot of a kernel without the lockdown LSM (the fixture's root). */
	assert_platform(f->root, "{\"firmware\":\"bios\",\"secure_boot\":\"unsupported\","
	                         "\"lockdown\":\"unsupported\"}");
	write_root_file(f->root, PLATFORM_LOCKDOWN_FILE, "[none] integrity confidentiality\n");
	assert_platform(f->root, "{\"firmware\":\"bios\",\"secure_boot\":\"unsupported\","
	                         "\"lockdown\":\"none\"}");
	write_root_file(f->root, PLATFORM_LOCKDOWN_FILE, "none integrity confidentiality\n");
	assert_platform(f->root, "{\"firmware\":\"bios\",\"secure_boot\":\"unsupported\","
	                         "\"lockdown\":\"unknown\"}");

	/* UEFI: Secure Boot from the variable, unknown without a readable one. */
	write_root_file(f->root, "/sys/firmware/efi/systab", "ACPI20=0x7fb7e014\n");
	write_root_file(f->root, PLATFORM_LOCKDOWN_FILE, "none [integrity] confidentiality\n");
	assert_platform(f->root, "{\"firmware\":\"uefi\",\"secure_boot\":\"unknown\","
	                         "\"lockdown\":\"integrity\"}");
	write_secure_boot_var(f->root, 1, 5);
	assert_platform(f->root, "{\"firmware\":\"uefi\",\"secure_boot\":\"enabled\","
	                         "\"lockdown\":\"integrity\"}");
	write_secure_boot_var(f->root, 0, 5);
	write_root_file(f->root, PLATFORM_LOCKDOWN_FILE, "none integrity [confidentiality]\n");
	assert_platform(f->root, "{\"firmware\":\"uefi\",\"secure_boot\":\"disabled\","
	                         "\"lockdown\":\"confidentiality\"}");
	write_secure_boot_var(f->root, 1, 6);
	assert_platform(f->root, "{\"firmware\":\"uefi\",\"secure_boot\":\"unknown\","
	                         "\"lockdown\":\"confidentiality\"}");
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
	/* An x86_64 image is loaded by an x86_64 build only. */
	assert_int_equal(loader_image_load(img),
	                 LOADER_ARCH_NATIVE == LOADER_ARCH_X86_64 ? -ENOSYS : -EOPNOTSUPP);
	assert_int_equal(loader_unload(false), -ENOSYS);
	assert_int_equal(loader_unload(true), -ENOSYS);
	loader_image_free(img);
}

/* The stage-time pick of purgatory's SHA-256: always an implementation this CPU
 * has; with nothing worth timing (no segment, or one too small for a block a
 * lane), the CPUID order's best. */
static void test_loader_sha256_pick(void **state) {
	static uint8_t big[2 << 20], tiny[512];
	const struct loader_segment none[] = { { .buf = big, .bufsz = sizeof(big), .memsz = 0 } };
	const struct loader_segment small[] = {
		{ .buf = tiny, .bufsz = sizeof(tiny), .memsz = sizeof(tiny) }
	};
	const struct loader_segment segs[] = {
		{ .buf = tiny, .bufsz = sizeof(tiny), .memsz = sizeof(tiny) },
		{ .buf = big, .bufsz = sizeof(big), .memsz = sizeof(big) + 4096 },
	};
	Sha256Impl picked;

	(void)state;
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 131 + (i >> 9));
	assert_int_equal(loader_sha256_pick(NULL, 0), sha256_impl_best());
	assert_int_equal(loader_sha256_pick(none, 1), sha256_impl_best());
	assert_int_equal(loader_sha256_pick(small, 1), sha256_impl_best());
	picked = loader_sha256_pick(segs, 2);
	assert_in_range(picked, 0, _SHA256_IMPL_MAX - 1);
	assert_true(sha256_impl_supported(picked));
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_loader_build_cmdline_refusals, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_loader_build_bad_inputs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loader_check_usable, setup, teardown),
		cmocka_unit_test(test_loader_strings),
		cmocka_unit_test(test_platform_parsers),
		cmocka_unit_test_setup_teardown(test_platform_facts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loader_is_loaded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loader_syscall_enosys, setup, teardown),
		cmocka_unit_test(test_loader_sha256_pick),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
