/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The kexec_load backend and the daemon's backend choice, against crafted
 * root-prefixed /sys and /proc trees: which backend is picked and why (lockdown,
 * EFI, kexec_load_disabled, no kexec), the crash image that is always verified
 * whatever the daemon or a caller asks, the commit-time mode switch, and the
 * staging path building a real loader image from a real kernel when one is
 * cached. The kexec_load syscall is replaced through the backend's test seam.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "context-private.h" /* the tests look inside the state machine */
#include "daemon-test-util.h"
#include "fileio.h"
#include "kexec-loader.h"
#include "path-util.h"
#include "upgrade-bus.h"

#define KERNEL "/boot/vmlinuz-test"

typedef struct Seen {
	unsigned calls;
	bool panic;
	uint32_t mode, flags;
	int fail; /* < 0: the "syscall" fails with this */
} Seen;

static int fake_load(const struct loader_image *img, void *userdata) {
	Seen *s = userdata;
	const struct purgatory_params *pp = loader_image_params(img);

	if (s->fail < 0)
		return s->fail;
	s->calls++;
	s->panic = loader_image_is_panic(img);
	s->mode = pp->mode;
	s->flags = pp->flags;
	return 0;
}

static void put(const char *root, const char *rel, const char *data) {
	assert_int_equal(test_write_file(root, rel, data, 0644), 0);
}

static void memmap(const char *root, unsigned i, const char *start, const char *end,
                   const char *type) {
	char rel[64];

	snprintf(rel, sizeof(rel), "/sys/firmware/memmap/%u/start", i);
	put(root, rel, start);
	snprintf(rel, sizeof(rel), "/sys/firmware/memmap/%u/end", i);
	put(root, rel, end);
	snprintf(rel, sizeof(rel), "/sys/firmware/memmap/%u/type", i);
	put(root, rel, type);
}

/* A BIOS-booted host with kexec, 3 GiB + 22 GiB of RAM and 256 MiB reserved
 * for a crash kernel at 512 MiB. */
static int setup(void **state) {
	char *root = test_mkroot();

	if (!root)
		return -1;
	put(root, "/sys/kernel/kexec_loaded", "0\n");
	put(root, "/sys/kernel/kexec_crash_loaded", "0\n");
	put(root, "/proc/sys/kernel/kexec_load_disabled", "0\n");
	put(root, "/sys/kernel/security/lockdown", "[none] integrity confidentiality\n");
	memmap(root, 0, "0x0\n", "0x9fbff\n", "System RAM\n");
	memmap(root, 1, "0x9fc00\n", "0xfffff\n", "Reserved\n");
	memmap(root, 2, "0x100000\n", "0xbfffffff\n", "System RAM\n");
	memmap(root, 3, "0x100000000\n", "0x63fffffff\n", "System RAM\n");
	put(root, "/proc/iomem",
	    "00100000-bfffffff : System RAM\n  20000000-2fffffff : Crash kernel\n"
	    "100000000-63fffffff : System RAM\n");
	put(root, "/sys/kernel/kexec_crash_size", "268435456\n");
	if (test_write_bzimage(root, KERNEL, "6.1.0-57-cloud-amd64", BZ_OK, 0644) < 0)
		return -1;
	*state = root;
	return 0;
}

static int teardown(void **state) {
	/* With the seam still in place: forgets the held images without the system call
	 * (never unload what this host's administrator may have loaded). */
	kexec_loader_set_load_func_for_test(fake_load, NULL);
	(void)kexec_backend_loader.unload(NULL, 0);
	(void)kexec_backend_loader.unload(NULL, KEXEC_IMAGE_PANIC);
	kexec_loader_set_load_func_for_test(NULL, NULL);
	test_rmroot(*state);
	return 0;
}

/* The daemon's core with the default backend selection; with fast_policy,
 * [Handoff] Mode=fast and AllowFast=yes. */
static Context *daemon_new(const char *root, bool fast_policy) {
	Context *c = NULL;
	Policy *p = NULL;

	assert_int_equal(context_new(root, NULL, &c), 0);
	c->image_owner = getuid();
	if (fast_policy) {
		assert_int_equal(policy_new_default(&p), 0);
		p->mode = POLICY_HANDOFF_MODE_FAST;
		p->allow_fast = true;
		assert_int_equal(context_set_policy(c, p), 0);
	}
	return c;
}

static void select_expect(const char *root, const KexecBackend *want, bool usable, bool fallback,
                          const char *reason_part) {
	_cleanup_free_ char *why = NULL;
	const KexecBackend *b = NULL;
	bool fb = !fallback;
	int status = 1;

	assert_int_equal(kexec_backend_select(root, &b, &status, &why, &fb), 0);
	assert_ptr_equal(b, want);
	assert_int_equal(status >= 0, usable);
	assert_int_equal(fb, fallback);
	if (!reason_part)
		assert_null(why);
	else if (!why || !strstr(why, reason_part))
		fail_msg("reason '%s' does not mention '%s'", strna(why), reason_part);
}

static void test_kexec_loader_select_default_and_fallbacks(void **state) {
	const char *root = *state;

	/* Everything allows kexec_load: our loader, no reason needed. */
	select_expect(root, &kexec_backend_loader, true, false, NULL);

	/* Lockdown forbids kexec_load; kexec_file_load still works (signed kernels). */
	put(root, "/sys/kernel/security/lockdown", "none [integrity] confidentiality\n");
	select_expect(root, &kexec_backend_file, true, true, "lockdown");
	put(root, "/sys/kernel/security/lockdown", "none integrity [confidentiality]\n");
	select_expect(root, &kexec_backend_file, true, true, "using kexec_file_load instead");
	put(root, "/sys/kernel/security/lockdown", "[none] integrity confidentiality\n");

	/* EFI without runtime-map, then with a malformed one. */
	put(root, "/sys/firmware/efi/systab", "x\n");
	select_expect(root, &kexec_backend_file, true, true, "runtime-map");
	put(root, "/sys/firmware/efi/runtime-map/0/type", "11\n");
	select_expect(root, &kexec_backend_file, true, true, "EFI");

	/* A UEFI host whose EFI state the loader can pass (an OVMF host's): kexec_load. */
	{
		_cleanup_free_ char *cmd = NULL;

		assert_true(asprintf(&cmd,
		                     "cp -a '%s'/sys/firmware/efi '%s'/sys/firmware/ && "
		                     "cp -a '%s'/sys/kernel/boot_params '%s'/sys/kernel/",
		                     EFI_FIXTURE_DIR, root, EFI_FIXTURE_DIR, root) > 0);
		assert_int_equal(system(cmd), 0);
	}
	put(root, "/sys/firmware/efi/runtime-map/0/type", "0x6\n");
	select_expect(root, &kexec_backend_loader, true, false, NULL);
}

static void test_kexec_loader_select_nothing_works(void **state) {
	const char *root = *state;
	_cleanup_free_ char *p = NULL;

	/* kexec_load_disabled stops both system calls: the fallback is named, unusable,
	 * and the reason gives both sides. */
	put(root, "/proc/sys/kernel/kexec_load_disabled", "1\n");
	select_expect(root, &kexec_backend_file, false, true, "kexec_file_load: kexec is disabled");
	put(root, "/proc/sys/kernel/kexec_load_disabled", "0\n");

	/* A kernel without kexec (this machine): both unusable, reason says so. */
	assert_int_equal(path_prefix_root(root, "/sys/kernel/kexec_loaded", &p), 0);
	assert_int_equal(unlink(p), 0);
	select_expect(root, &kexec_backend_file, false, true,
	              "kexec_load: the running kernel has no kexec");
}

/* The daemon with the default selection on a kernel without kexec: named
 * KexecUnavailable error with both reasons, and nothing on disk. */
static void test_kexec_loader_daemon_unavailable_changes_nothing(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(context_freep) Context *c = NULL;
	_cleanup_free_ char *p = NULL, *updates = NULL;
	const char *root = *state;
	StageRequest req = { .kernel = KERNEL, .cmdline = "" };
	Update *u = NULL;

	assert_int_equal(path_prefix_root(root, "/sys/kernel/kexec_loaded", &p), 0);
	assert_int_equal(unlink(p), 0);
	c = daemon_new(root, false);
	assert_ptr_equal(c->backend, &kexec_backend_file);
	assert_true(c->backend_fallback);
	assert_true(c->backend_status < 0);
	assert_true(context_stage(c, &req, &u, &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_KEXEC_UNAVAILABLE));
	assert_non_null(strstr(e.message, "no kexec support"));
	assert_null(u);
	assert_int_equal(c->n_updates, 0);
	assert_int_equal(path_prefix_root(root, "/var/lib/upgraded/updates", &updates), 0);
	assert_true(access(updates, F_OK) < 0 || rmdir(updates) == 0); /* empty if present */
}

/* Stage through the daemon with the default backend: the normal image is built
 * verified, the crash image verified + panic; the commit's mode switch makes
 * the normal image fast and leaves the crash image alone; no request, from the
 * daemon or any caller, gives a fast crash image. */
static void test_kexec_loader_panic_always_verified(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(context_freep) Context *c = NULL;
	const char *root = *state;
	StageRequest req = { .kernel = KERNEL, .cmdline = "console=ttyS0,115200 quiet" };
	Seen seen = {};
	Update *u = NULL;
	KexecImage img;
	_cleanup_close_ int fd = -EBADF;
	_cleanup_free_ char *kpath = NULL;
	struct loader_image *panic_img;

	kexec_loader_set_load_func_for_test(fake_load, &seen);
	c = daemon_new(root, false);
	assert_ptr_equal(c->backend, &kexec_backend_loader);
	assert_false(c->backend_fallback);
	assert_int_equal(context_stage(c, &req, &u, &e), 0);
	assert_true(u->crash_image_loaded);
	assert_null(u->backend_reason);
	assert_string_equal(u->backend, "kexec_load");
	/* Last load was the crash image. */
	assert_int_equal(seen.calls, 2);
	assert_true(seen.panic);
	assert_int_equal(seen.mode, PURGATORY_MODE_VERIFIED);
	assert_true(seen.flags & PURGATORY_FLAG_PANIC);
	assert_int_equal(loader_image_params(kexec_loader_image(false))->mode,
	                 PURGATORY_MODE_VERIFIED);
	assert_int_equal(loader_image_params(kexec_loader_image(false))->console_port,
	                 PURGATORY_CONSOLE_COM1);
	assert_non_null(strstr(loader_image_cmdline(kexec_loader_image(true)), "reset_devices"));

	/* What commit does after a fast decision: only the normal image changes,
	 * and it is loaded again (no rebuild). */
	assert_int_equal(kexec_backend_loader.set_mode(root, HANDOFF_MODE_FAST), 0);
	assert_int_equal(seen.calls, 3);
	assert_false(seen.panic);
	assert_int_equal(seen.mode, PURGATORY_MODE_FAST);
	assert_int_equal(loader_image_params(kexec_loader_image(true))->mode,
	                 PURGATORY_MODE_VERIFIED);
	/* Same mode again: nothing to do. */
	assert_int_equal(kexec_backend_loader.set_mode(root, HANDOFF_MODE_FAST), 0);
	assert_int_equal(seen.calls, 3);
	/* A failed reload leaves our copy as the kernel has it. */
	seen.fail = -ENOMEM;
	assert_int_equal(kexec_backend_loader.set_mode(root, HANDOFF_MODE_VERIFIED), -ENOMEM);
	assert_int_equal(loader_image_params(kexec_loader_image(false))->mode, PURGATORY_MODE_FAST);
	seen.fail = 0;

	/* The crash image can never be made fast: the backend's mode switch only knows the
	 * normal image, the loader refuses... */
	assert_int_equal(kexec_backend_loader.set_mode(root, (HandoffMode)7), -EINVAL);
	panic_img = (struct loader_image *)kexec_loader_image(true);
	assert_true(loader_image_set_mode(panic_img, HANDOFF_MODE_FAST) < 0);
	assert_int_equal(loader_image_params(panic_img)->mode, PURGATORY_MODE_VERIFIED);
	/* ...nor by a load request that asks for it. */
	assert_true(asprintf(&kpath, "%s%s", root, KERNEL) > 0);
	fd = open(kpath, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	img = (KexecImage){ .kernel_fd = fd,
		            .initrd_fd = -EBADF,
		            .kernel_path = KERNEL,
		            .cmdline = "",
		            .flags = KEXEC_IMAGE_PANIC,
		            .mode = HANDOFF_MODE_FAST };
	assert_int_equal(kexec_backend_loader.load(root, &img), -EINVAL);
	assert_ptr_equal(kexec_loader_image(true), panic_img);

	/* Cancel drops both. */
	assert_int_equal(context_cancel(c, "", &e), 0);
	assert_null(kexec_loader_image(false));
	assert_null(kexec_loader_image(true));
}

/* The policy's decision reaches the loader through the daemon: Mode=fast with
 * nothing blocking makes the held normal image fast, the crash image stays
 * verified; a memory map that changed since stage blocks fast. */
static void test_kexec_loader_policy_fast_through_commit(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(context_freep) Context *c = NULL;
	const char *root = *state;
	StageRequest req = { .kernel = KERNEL, .cmdline = "" };
	Seen seen = {};
	Update *u = NULL;

	kexec_loader_set_load_func_for_test(fake_load, &seen);
	put(root, "/sys/class/iommu/dmar0/uevent", "\n");
	put(root, "/sys/kernel/iommu_groups/0/type", "DMA-FQ\n");
	c = daemon_new(root, true);
	assert_int_equal(context_stage(c, &req, &u, &e), 0);
	assert_int_equal(kexec_loader_memory_map_unchanged(root), 1);
	assert_int_equal(context_commit_begin(c, "", &u, &e), 0);
	if (u->handoff != HANDOFF_MODE_FAST)
		fail_msg("expected fast, got %s: %s", strna(handoff_mode_to_string(u->handoff)),
		         u->handoff_reason);
	assert_int_equal(loader_image_params(kexec_loader_image(false))->mode, PURGATORY_MODE_FAST);
	assert_int_equal(loader_image_params(kexec_loader_image(true))->mode,
	                 PURGATORY_MODE_VERIFIED);
	context_free(TAKE_PTR(c));
	(void)kexec_backend_loader.unload(NULL, 0);
	(void)kexec_backend_loader.unload(NULL, KEXEC_IMAGE_PANIC);

	/* Memory hot-added after stage: the placement is stale, fast is blocked. */
	c = daemon_new(root, true);
	/* the earlier update is done with: a fresh state directory */
	{
		_cleanup_free_ char *cmd = NULL;

		assert_true(asprintf(&cmd, "rm -rf '%s/var/lib/upgraded'", root) > 0);
		assert_int_equal(system(cmd), 0);
	}
	assert_int_equal(context_stage(c, &req, &u, &e), 0);
	memmap(root, 4, "0x640000000\n", "0x67fffffff\n", "System RAM\n");
	assert_int_equal(kexec_loader_memory_map_unchanged(root), 0);
	assert_int_equal(context_commit_begin(c, "", &u, &e), 0);
	assert_int_equal(u->handoff, HANDOFF_MODE_VERIFIED);
	assert_non_null(strstr(u->handoff_reason, "memory map"));
	assert_int_equal(loader_image_params(kexec_loader_image(false))->mode,
	                 PURGATORY_MODE_VERIFIED);
}

/* /run/upgraded/crash-image names the update whose crash image the slot holds
 * (kdump-tools' stop reads it), or does not exist (id NULL). */
static void assert_crash_mark(const char *root, const char *id) {
	_cleanup_free_ char *p = NULL, *data = NULL;

	assert_int_equal(path_prefix_root(root, "/run/upgraded/crash-image", &p), 0);
	if (!id) {
		assert_int_equal(access(p, F_OK), -1);
		return;
	}
	assert_int_equal(read_file_full(p, 64, &data, NULL), 0);
	assert_string_equal(data, id);
}

/* A crash image loaded before stage (kdump) is recorded with its owner; cancel
 * and a rollback say what they did about it (under a test root: what they would
 * run), and the slot's mark comes and goes with our image. */
static void test_kexec_loader_previous_crash_image(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(context_freep) Context *c = NULL;
	const char *root = *state;
	StageRequest req = { .kernel = KERNEL, .cmdline = "" };
	Seen seen = {};
	Update *u = NULL;

	kexec_loader_set_load_func_for_test(fake_load, &seen);
	put(root, "/sys/kernel/kexec_crash_loaded", "1\n");
	c = daemon_new(root, false);
	assert_int_equal(context_stage(c, &req, &u, &e), 0);
	assert_string_equal(u->crash_image_before, "unknown");
	assert_int_equal(context_cancel(c, "", &e), 0);
	assert_non_null(u->crash_image_restore);
	assert_non_null(strstr(u->crash_image_restore, "not restored"));
	context_free(c);

	/* kdump-tools installed: its loader is what cancel runs. */
	c = NULL;
	put(root, "/usr/sbin/kdump-config", "#!/bin/sh\nexit 0\n");
	{
		_cleanup_free_ char *p = NULL;

		assert_int_equal(path_prefix_root(root, "/usr/sbin/kdump-config", &p), 0);
		assert_int_equal(chmod(p, 0755), 0);
	}
	c = daemon_new(root, false);
	assert_int_equal(context_stage(c, &req, &u, &e), 0);
	assert_string_equal(u->crash_image_before, "kdump-tools");
	assert_crash_mark(root, u->id);
	assert_int_equal(context_cancel(c, "", &e), 0);
	assert_non_null(strstr(u->crash_image_restore, "systemctl restart kdump-tools.service"));
	assert_crash_mark(root, NULL);
	context_free(c);

	/* A rollback in the same boot gives the slot back too. */
	c = daemon_new(root, false);
	assert_int_equal(context_stage(c, &req, &u, &e), 0);
	assert_crash_mark(root, u->id);
	assert_int_equal(context_commit_begin(c, "", &u, &e), 0);
	assert_null(u->crash_image_restore);
	assert_int_equal(context_commit_fail(c, u, "a test rollback"), 0);
	assert_non_null(u->crash_image_restore);
	assert_non_null(strstr(u->crash_image_restore, "systemctl restart kdump-tools.service"));
	assert_crash_mark(root, NULL);
}

/* Stages once under root (policy conf, or none), checks what kdump-config would find for
 * the staged kernel (current: 0 or 1) and that the record's kdump_initrd contains says. */
static void assert_kdump_stage(const char *root, const char *conf, int current, const char *says) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(context_freep) Context *c = daemon_new(root, false);
	StageRequest req = { .kernel = KERNEL, .cmdline = "" };
	Update *u = NULL;

	if (conf) {
		Policy *pol = NULL;

		assert_int_equal(policy_new_default(&pol), 0);
		assert_int_equal(policy_parse_buffer(pol, "test.conf", conf, strlen(conf), NULL),
		                 0);
		assert_int_equal(policy_finish(pol, NULL), 0);
		assert_int_equal(context_set_policy(c, pol), 0);
	}
	assert_int_equal(context_kdump_initrd_current(c, "6.1.0-57-cloud-amd64"), current);
	assert_int_equal(context_stage(c, &req, &u, &e), 0);
	assert_string_equal(u->kernel_version, "6.1.0-57-cloud-amd64");
	assert_non_null(u->kdump_initrd);
	assert_non_null(strstr(u->kdump_initrd, says));
	assert_int_equal(context_cancel(c, "", &e), 0);
}

/* kdump-tools held the slot: kdump's initrd for the staged kernel is built at stage unless
 * kdump-config would find it current (the initrd, and latest_sysctls-<kernel> equal to
 * /etc/kdump/sysctl.conf). Under a test root nothing runs; the record says what would. */
static void test_kexec_loader_kdump_initrd_ahead(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(context_freep) Context *c = NULL;
	const char *root = *state;
	StageRequest req = { .kernel = KERNEL, .cmdline = "" };
	Seen seen = {};
	Update *u = NULL;
	_cleanup_free_ char *p = NULL;

	kexec_loader_set_load_func_for_test(fake_load, &seen);
	put(root, "/sys/kernel/kexec_crash_loaded", "1\n");
	/* Someone else's crash image (owner unknown): nothing to build for. */
	c = daemon_new(root, false);
	assert_int_equal(context_stage(c, &req, &u, &e), 0);
	assert_string_equal(u->crash_image_before, "unknown");
	assert_null(u->kdump_initrd);
	assert_int_equal(context_cancel(c, "", &e), 0);
	context_free(c);
	c = NULL;

	put(root, "/usr/sbin/kdump-config", "#!/bin/sh\nexit 0\n");
	assert_int_equal(path_prefix_root(root, "/usr/sbin/kdump-config", &p), 0);
	assert_int_equal(chmod(p, 0755), 0);
	put(root, "/etc/kdump/sysctl.conf", "kernel.panic_on_oops=1\n");
	/* No initrd yet: built ahead. */
	assert_kdump_stage(root, NULL, 0,
	                   "would run 'systemctl start "
	                   "upgraded-kdump-initrd@6.1.0-57-cloud-amd64.service'");

	/* The initrd, but latest_sysctls from another sysctl.conf: kdump-config would rebuild. */
	put(root, "/var/lib/kdump/initrd.img-6.1.0-57-cloud-amd64", "an initrd");
	put(root, "/var/lib/kdump/latest_sysctls-6.1.0-57-cloud-amd64", "kernel.panic_on_oops=0\n");
	assert_kdump_stage(root, NULL, 0, "would run");

	/* Both current: nothing to build, and the record says so. */
	put(root, "/var/lib/kdump/latest_sysctls-6.1.0-57-cloud-amd64", "kernel.panic_on_oops=1\n");
	assert_kdump_stage(root, NULL, 1, "current already");

	/* KdumpInitrd=boot: left to kdump-tools, even when the initrd is not current. */
	put(root, "/var/lib/kdump/latest_sysctls-6.1.0-57-cloud-amd64", "stale\n");
	assert_kdump_stage(root, "[Handoff]\nKdumpInitrd=boot\n", 0, "KdumpInitrd=boot");
}

/* A kernel version becomes a unit instance and a file name: only plain versions pass. */
static void test_kexec_loader_kdump_version(void **state) {
	static const char *const bad[] = { "",      "-rf",   ".hidden",  "../etc", "6.1 x",
		                           "6.1;x", "6.1/x", "6.1\\x2d", "6.1\n",  "\xc3\xa9" };

	(void)state;
	assert_true(context_kdump_version_valid("6.1.0-57-cloud-amd64"));
	assert_true(context_kdump_version_valid("6.12.3+deb13-amd64"));
	assert_true(context_kdump_version_valid("5.15.0_rc1"));
	assert_false(context_kdump_version_valid(NULL));
	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		assert_false(context_kdump_version_valid(bad[i]));
	/* 64 characters pass, 65 do not. */
	assert_true(context_kdump_version_valid(
	        "6123456789012345678901234567890123456789012345678901234567890123"));
	assert_false(context_kdump_version_valid(
	        "61234567890123456789012345678901234567890123456789012345678901234"));
}

/* The staging path with a real distribution kernel, when one is cached: the
 * daemon builds the loader image from it (parse, place, hash every segment). */
static void test_kexec_loader_stage_real_kernel(void **state) {
	static const char *const dirs[] = { TEST_KERNEL_DIRS };
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_(context_freep) Context *c = NULL;
	_cleanup_free_ char *src = NULL, *cmd = NULL;
	const char *root = *state;
	StageRequest req = { .kernel = "/boot/vmlinuz-6.1.0-57-cloud-amd64",
		             .cmdline = "console=ttyS0 root=/dev/vda1" };
	const struct purgatory_params *pp;
	const struct loader_image *img;
	Seen seen = {};
	Update *u = NULL;

	for (size_t i = 0; i < ELEMENTSOF(dirs) && !src; i++) {
		_cleanup_free_ char *p = NULL;

		if (asprintf(&p, "%s/vmlinuz-6.1.0-57-cloud-amd64", dirs[i]) > 0 &&
		    access(p, R_OK) == 0)
			src = TAKE_PTR(p);
	}
	if (!src) {
		print_message("no vmlinuz-6.1.0-57-cloud-amd64 in %s\n", TEST_KERNEL_DIRS_STR);
		skip();
	}
	assert_true(asprintf(&cmd, "cp '%s' '%s/boot/' && chmod 0644 '%s'/boot/vmlinuz-*", src,
	                     root, root) > 0);
	assert_int_equal(system(cmd), 0);

	kexec_loader_set_load_func_for_test(fake_load, &seen);
	c = daemon_new(root, false);
	assert_int_equal(context_stage(c, &req, &u, &e), 0);
	assert_string_equal(u->kernel_version, "6.1.0-57-cloud-amd64");
	img = kexec_loader_image(false);
	assert_non_null(img);
	assert_string_equal(loader_image_bzimage(img)->release, "6.1.0-57-cloud-amd64");
	pp = loader_image_params(img);
	assert_int_equal(pp->mode, PURGATORY_MODE_VERIFIED);
	assert_true(pp->nr_segments >= 2); /* kernel, boot_params + cmdline */
	assert_int_equal(u->verified_bytes, kexec_loader_verified_bytes());
	assert_true(u->verified_bytes > loader_image_bzimage(img)->kernel_size);
	assert_non_null(strstr(loader_image_cmdline(img), PURGATORY_STAMPS_KEY));
	assert_non_null(strstr(loader_image_cmdline(img), "root=/dev/vda1"));
	assert_int_equal(context_cancel(c, "", &e), 0);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_kexec_loader_select_default_and_fallbacks),
		T(test_kexec_loader_select_nothing_works),
		T(test_kexec_loader_daemon_unavailable_changes_nothing),
		T(test_kexec_loader_panic_always_verified),
		T(test_kexec_loader_policy_fast_through_commit),
		T(test_kexec_loader_previous_crash_image),
		T(test_kexec_loader_kdump_initrd_ahead),
		T(test_kexec_loader_kdump_version),
		T(test_kexec_loader_stage_real_kernel),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
