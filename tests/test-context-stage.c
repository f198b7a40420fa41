/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What stage accepts, carries and refuses, without a bus: unknown and invalid ids,
 * bad input that must change nothing, the command line it reuses and the memmap=
 * it carries, and a backend or kernel that cannot load, each refused by its name
 * (under lockdown or enforced verification: the image's signature).
 */
#include <dirent.h>

#include "context-test-util.h"
#include "fileio.h"
#include "json-util.h"

static void test_context_unknown_and_invalid_ids(void **state) {
	static const char *const bad[] = { "xyz", "../../../etc/passwd", "0123456789ABCDEF",
		                           "0123456789abcdef0" };
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	char *json = NULL;
	Update *u = NULL;

	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		assert_true(context_commit_begin(c, bad[i], &u, &e) < 0);
		assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_INVALID_ID));
		sd_bus_error_free(&e);
		assert_true(context_cancel(c, bad[i], &e) < 0);
		assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_INVALID_ID));
		sd_bus_error_free(&e);
		assert_true(context_get_report(c, bad[i], &json, &e) < 0);
		assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_INVALID_ID));
		sd_bus_error_free(&e);
	}
	assert_true(context_cancel(c, "0123456789abcdef", &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_NO_SUCH_UPDATE));
	sd_bus_error_free(&e);
	assert_true(context_get_report(c, "0123456789abcdef", &json, &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_NO_SUCH_UPDATE));
	sd_bus_error_free(&e);
	assert_true(context_get_report(c, "", &json, &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_NO_SUCH_REPORT));
	assert_null(json);
	assert_null(u);
	context_free(c);
}

/* Stage's bad input: named error, and nothing on disk or in memory changed. */
static void test_context_stage_bad_input_changes_nothing(void **state) {
	static const struct {
		const char *kernel, *initrd, *cmdline, *error;
	} cases[] = {
		{ "vmlinuz", "", "", UPGRADE_ERROR_INVALID_PATH },
		{ "/boot/../etc/x", "", "", UPGRADE_ERROR_INVALID_PATH },
		{ "/etc/passwd", "", "", UPGRADE_ERROR_NOT_ALLOWED_PATH },
		{ KERNEL, "/boot/missing", "", UPGRADE_ERROR_INVALID_PATH },
		{ KERNEL, "relative", "", UPGRADE_ERROR_INVALID_PATH },
		{ "/boot/initrd.img", "", "", UPGRADE_ERROR_INVALID_IMAGE },
		{ KERNEL, "", "a\nb", UPGRADE_ERROR_INVALID_CMDLINE },
		{ KERNEL, "", "upgraded.stamps=1", UPGRADE_ERROR_INVALID_CMDLINE },
	};
	_cleanup_free_ char *before = NULL, *after = NULL;
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);

	assert_int_equal(context_describe(c, &before), 0);
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
		StageRequest req = { .kernel = cases[i].kernel,
			             .initrd = cases[i].initrd,
			             .cmdline = cases[i].cmdline };
		Update *u = NULL;

		assert_true(context_stage(c, &req, &u, &e) < 0);
		if (!sd_bus_error_has_name(&e, cases[i].error))
			fail_msg("case %zu: expected %s, got %s", i, cases[i].error, e.name);
		assert_null(u);
	}
	/* reuse-cmdline with an explicit one, and without /proc/cmdline in the root. */
	{
		_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
		StageRequest req = { .kernel = KERNEL, .cmdline = "x", .reuse_cmdline = true };
		Update *u = NULL;

		assert_true(context_stage(c, &req, &u, &e) < 0);
		assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_INVALID_CMDLINE));
	}
	assert_int_equal(context_describe(c, &after), 0);
	assert_string_equal(before, after);
	assert_int_equal(kexec_backend_record.is_loaded(w->root, 0), 0);
	assert_int_equal(w->steps, 0); /* not a single record written */
	context_free(c);
}

static void test_context_reuse_cmdline(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_free_ char *proc = NULL;
	World *w = *state;
	Context *c;
	StageRequest req = { .kernel = KERNEL, .reuse_cmdline = true };
	Update *u = NULL;

	assert_true(asprintf(&proc, "%s/proc", w->root) > 0);
	assert_int_equal(mkdir(proc, 0755), 0);
	assert_int_equal(test_write_file(w->root, "/proc/cmdline",
	                                 "BOOT_IMAGE=/vmlinuz-old root=/dev/vda1 upgraded.stamps=7 "
	                                 "console=ttyS0\n",
	                                 0644),
	                 0);
	c = boot(w, OLD_KERNEL, BOOT_A, true);
	assert_int_equal(context_stage(c, &req, &u, &e), 0);
	assert_string_equal(u->cmdline, "root=/dev/vda1 console=ttyS0");
	assert_true(u->reuse_cmdline);
	assert_int_equal(context_cancel(c, u->id, &e), 0);

	/* Init's arguments after "--": upgraded's own parameters would follow them. */
	assert_int_equal(test_write_file(w->root, "/proc/cmdline",
	                                 "root=/dev/vda1 console=ttyS0 -- single\n", 0644),
	                 0);
	u = NULL;
	assert_true(context_stage(c, &req, &u, &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_INVALID_CMDLINE));
	assert_null(u);
	assert_null(context_active(c));
	context_free(c);
}

/* A persistent-memory region of the running kernel (memmap=!) that the
 * operator's command line lacks is carried over and said so; the record holds
 * the kept-memory facts with their named reasons. */
static void test_context_carries_memmap(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_free_ char *proc = NULL;
	World *w = *state;
	Context *c;
	StageRequest req = { .kernel = KERNEL, .cmdline = "root=/dev/vda1 quiet" };
	Update *u = NULL;
	json_object *reasons, *km;

	assert_true(asprintf(&proc, "%s/proc", w->root) > 0);
	assert_int_equal(mkdir(proc, 0755), 0);
	assert_int_equal(test_write_file(w->root, "/proc/cmdline",
	                                 "root=/dev/vda1 memmap=2G!5G memmap=1G$3G\n", 0644),
	                 0);
	assert_int_equal(test_write_file(w->root, "/proc/iomem",
	                                 "140000000-1bfffffff : Persistent Memory (legacy)\n",
	                                 0644),
	                 0);
	/* A crash reservation: the panic image gets the same line. */
	assert_int_equal(
	        test_write_file(w->root, "/sys/kernel/kexec_crash_size", "268435456\n", 0644), 0);
	assert_int_equal(test_write_file(w->root, "/sys/firmware/memmap/0/start", "0x0\n", 0644),
	                 0);
	assert_int_equal(
	        test_write_file(w->root, "/sys/firmware/memmap/0/end", "0x1ffffffff\n", 0644), 0);
	assert_int_equal(
	        test_write_file(w->root, "/sys/firmware/memmap/0/type", "System RAM\n", 0644), 0);
	c = boot(w, OLD_KERNEL, BOOT_A, true);
	assert_int_equal(context_stage(c, &req, &u, &e), 0);
	assert_string_equal(u->cmdline, "root=/dev/vda1 quiet memmap=2G!5G");
	assert_true(u->crash_image_loaded);
	{
		_cleanup_free_ char *path = NULL, *data = NULL;
		const char *p;
		unsigned n = 0;

		assert_true(asprintf(&path, "%s/run/upgraded/kexec-record.json", w->root) > 0);
		assert_int_equal(read_file_full(path, 1 << 20, &data, NULL), 0);
		for (p = data; (p = strstr(p, "quiet memmap=2G!5G")); p++)
			n++;
		assert_int_equal(n, 2); /* the staged kernel and the panic image */
		assert_non_null(strstr(data, "\"panic\":true"));
	}
	km = u->kept_memory;
	assert_non_null(km);
	assert_false(json_object_get_boolean(json_object_object_get(km, "ready")));
	reasons = json_object_object_get(km, "reasons");
	assert_non_null(strstr(json_object_to_json_string(reasons), "kept-memory-cmdline-carried"));
	/* No /dev/pmem device in this root: named, and not "ready". */
	assert_non_null(strstr(json_object_to_json_string(reasons), "kept-memory-no-device"));
	assert_null(strstr(json_object_to_json_string(reasons), "\"kept-memory-cmdline\""));
	context_free(c);
}

/* A backend that cannot work here (like kexec_file on a kernel without kexec). */
static int probe_unusable(const char *root, char **ret_reason) {
	*ret_reason = strdup("no kexec in this kernel");
	return -ENOSYS;
}

static int load_enosys(const char *root, const KexecImage *image) {
	return -ENOSYS;
}

static int load_eperm(const char *root, const KexecImage *image) {
	return -EPERM;
}

static int load_enokey(const char *root, const KexecImage *image) {
	return -ENOKEY;
}

static void test_context_kexec_unavailable_is_named(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_free_ char *dir = NULL;
	KexecBackend broken = kexec_backend_record;
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	StageRequest req = { .kernel = KERNEL, .cmdline = "" };
	Update *u = NULL;
	struct dirent *de;
	DIR *d;

	/* Probe says no: refused before anything is written. */
	broken.probe = probe_unusable;
	c->backend = &broken;
	c->backend_status = c->backend->probe(w->root, &c->backend_reason);
	assert_true(context_stage(c, &req, &u, &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_KEXEC_UNAVAILABLE));
	assert_non_null(strstr(e.message, "no kexec in this kernel"));
	sd_bus_error_free(&e);

	/* Probe says yes but the syscall says ENOSYS: the record is removed again. */
	broken = kexec_backend_record;
	broken.load = load_enosys;
	c->backend_status = 0;
	assert_true(context_stage(c, &req, &u, &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_KEXEC_UNAVAILABLE));
	assert_null(u);
	assert_null(c->active);
	sd_bus_error_free(&e);
	/* EPERM under lockdown: the kernel refused this image's signature, not kexec. */
	broken.load = load_eperm;
	c->platform.lockdown = PLATFORM_LOCKDOWN_INTEGRITY;
	assert_true(context_stage(c, &req, &u, &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_INVALID_IMAGE));
	assert_non_null(strstr(e.message, "lockdown (integrity)"));
	assert_non_null(strstr(e.message, "signature"));
	sd_bus_error_free(&e);
	c->platform.lockdown = PLATFORM_LOCKDOWN_NONE;
	assert_true(context_stage(c, &req, &u, &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_KEXEC_UNAVAILABLE));
	sd_bus_error_free(&e);
	/* ENOKEY where verification is enforced (Secure Boot's arch policy): the same
	 * refusal, named with what enforces it. */
	broken.load = load_enokey;
	c->platform.secure_boot = PLATFORM_SECURE_BOOT_ENABLED;
	c->platform.lockdown = PLATFORM_LOCKDOWN_INTEGRITY;
	assert_true(context_stage(c, &req, &u, &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_INVALID_IMAGE));
	assert_non_null(strstr(e.message, "under lockdown (integrity) and Secure Boot, it loads"));
	assert_non_null(strstr(e.message, "Required key not available"));
	sd_bus_error_free(&e);
	c->platform.lockdown = PLATFORM_LOCKDOWN_NONE;
	assert_true(context_stage(c, &req, &u, &e) < 0);
	assert_non_null(
	        strstr(e.message, "': with Secure Boot, it loads only kernels whose signature"));
	sd_bus_error_free(&e);
	c->platform.secure_boot = PLATFORM_SECURE_BOOT_DISABLED;
	assert_true(context_stage(c, &req, &u, &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_INVALID_IMAGE));
	assert_non_null(strstr(e.message, "with signature verification enforced, it loads"));
	sd_bus_error_free(&e);
	assert_null(u);
	assert_null(c->active);
	assert_true(asprintf(&dir, "%s/var/lib/upgraded/updates", w->root) > 0);
	d = opendir(dir);
	assert_non_null(d);
	while ((de = readdir(d)))
		assert_true(de->d_name[0] == '.');
	closedir(d);
	context_free(c);
}

static atomic_bool cancel_flag;

/* The record backend's load, with a Cancel arriving while it reads. */
static int load_then_cancel(const char *root, const KexecImage *img) {
	int r = kexec_backend_record.load(root, img);

	cancel_flag = true;
	return r;
}

static void assert_no_record(World *w) {
	_cleanup_free_ char *dir = NULL;
	struct dirent *de;
	DIR *d;

	assert_true(asprintf(&dir, "%s/var/lib/upgraded/updates", w->root) > 0);
	d = opendir(dir);
	if (!d) {
		assert_int_equal(errno, ENOENT); /* nothing was ever written */
		return;
	}
	while ((de = readdir(d)))
		assert_true(de->d_name[0] == '.');
	closedir(d);
}

/* context_stage_finish() of p ends Cancelled, with no record and nothing loaded. */
static void assert_finish_cancelled(World *w, Context *c, StagePlan *p, Update **u) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;

	assert_true(context_stage_finish(c, p, &cancel_flag, u, &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_CANCELLED));
	assert_no_record(w);
	assert_false(c->backend->is_loaded(w->root, 0) > 0);
}

/* Stage in its three steps (the bus runs them as a job): a cancel before the record, or
 * during the load, leaves no record, nothing loaded and nothing active; else it stages
 * the update under the id chosen first. */
static void test_context_stage_in_steps_and_cancelled(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	StageRequest req = { .kernel = KERNEL, .initrd = "/boot/initrd.img", .cmdline = "" };
	KexecBackend cancelling = kexec_backend_record;
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	StagePlan *p = NULL;
	Update *u = NULL;

	/* Finishing without the digests is a caller's bug. */
	assert_int_equal(context_stage_prepare(c, &req, &p, &e), 0);
	assert_int_equal(context_stage_finish(c, p, NULL, &u, &e), -EINVAL);
	/* Cancelled before the record. */
	cancel_flag = false;
	assert_int_equal(stage_plan_hash(p, &cancel_flag, &e), 0);
	cancel_flag = true;
	assert_finish_cancelled(w, c, p, &u);
	p = stage_plan_free(p);

	/* Cancelled while the backend loads: unloaded, the record removed. */
	c->backend = &cancelling;
	cancelling.load = load_then_cancel;
	cancel_flag = false;
	assert_int_equal(context_stage_prepare(c, &req, &p, &e), 0);
	assert_int_equal(stage_plan_hash(p, &cancel_flag, &e), 0);
	assert_finish_cancelled(w, c, p, &u);
	p = stage_plan_free(p);
	assert_null(c->active);
	assert_null(u);

	/* Not cancelled: staged, under the id chosen at prepare. */
	c->backend = &kexec_backend_record;
	cancel_flag = false;
	assert_int_equal(context_stage_prepare(c, &req, &p, &e), 0);
	assert_int_equal(stage_plan_hash(p, &cancel_flag, &e), 0);
	assert_int_equal(context_stage_finish(c, p, &cancel_flag, &u, &e), 0);
	assert_string_equal(u->id, stage_plan_id(p));
	assert_ptr_equal(c->active, u);
	assert_true(c->backend->is_loaded(w->root, 0) > 0);
	p = stage_plan_free(p);
	context_free(c);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_context_unknown_and_invalid_ids),
		T(test_context_stage_bad_input_changes_nothing),
		T(test_context_reuse_cmdline),
		T(test_context_carries_memmap),
		T(test_context_kexec_unavailable_is_named),
		T(test_context_stage_in_steps_and_cancelled),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
