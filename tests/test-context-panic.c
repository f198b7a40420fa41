/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The panic path of the state machine (docs/state-machine.md): the old kernel
 * "crashes" at each point of a commit (the persist seam stops it there), a
 * crash kernel (upgraded.panic=1 on the test root's /proc/cmdline) takes the
 * update over or fails it, and the staged kernel completes it.
 */
#include "context-test-util.h"

/* ---- the panic path ---- */

/* Where the old kernel crashes, in persisted steps after commit_begin():
 * 1 = after the image check, inside the checkpoint (the VM step not done),
 * 2 = every pre-handoff step done, no handoff record (the lab's hold point),
 * 3 = handoff record written, reboot not requested,
 * 0 = after systemd accepted the kexec (crash during the shutdown). */
enum {
	CRASH_IN_CHECKPOINT = 1,
	CRASH_AFTER_CHECKPOINT = 2,
	CRASH_AFTER_HANDOFF_RECORD = 3,
	CRASH_AFTER_REQUEST = 0,
};

static void write_cmdline(World *w, const char *cmdline) {
	assert_int_equal(test_write_file(w->root, "/proc/cmdline", cmdline, 0644), 0);
}

/* The old kernel, with a crash reservation and a firmware memory map: stage
 * (kernel + verified crash image), commit, and crash at the given point. */
static char *commit_then_crash(World *w, unsigned point, bool fast) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	char *id;
	Context *c;
	Update *u;

	assert_int_equal(
	        test_write_file(w->root, "/sys/kernel/kexec_crash_size", "402653184\n", 0644), 0);
	assert_int_equal(test_write_file(w->root, "/sys/firmware/memmap/0/start", "0x0\n", 0644),
	                 0);
	assert_int_equal(test_write_file(w->root, "/sys/firmware/memmap/0/end", "0x9fbff\n", 0644),
	                 0);
	assert_int_equal(
	        test_write_file(w->root, "/sys/firmware/memmap/0/type", "System RAM\n", 0644), 0);
	assert_int_equal(
	        test_write_file(w->root, "/sys/firmware/memmap/1/start", "0x100000\n", 0644), 0);
	assert_int_equal(
	        test_write_file(w->root, "/sys/firmware/memmap/1/end", "0xfffdffff\n", 0644), 0);
	assert_int_equal(
	        test_write_file(w->root, "/sys/firmware/memmap/1/type", "System RAM\n", 0644), 0);
	write_cmdline(w, "root=/dev/vda1 ro crashkernel=384M\n");

	c = boot(w, OLD_KERNEL, BOOT_A, true);
	assert_false(c->panic_kernel);
	u = stage(c, &e);
	assert_true(u->crash_image_loaded);
	id = strdup(u->id);
	assert_non_null(id);
	assert_int_equal(context_commit_begin(c, "", &u, &e), 0);
	if (fast) /* as if the policy had chosen fast */
		u->handoff = HANDOFF_MODE_FAST;
	if (point > 0)
		w->crash_at = w->steps + point;
	assert_true(context_commit_run(c, u) == (point > 0 ? -ECANCELED : 0));
	context_free(c); /* the old kernel is gone */
	w->crash_at = 0;
	w->crashed = false;
	return id;
}

/* The crash kernel; on_second_cpu: the panic came on the CPU with APIC id 1, not on the
 * boot CPU (0) its command line names (loader/boot-cpu.h). */
static Context *boot_crash_kernel_on(World *w, bool on_second_cpu) {
	assert_int_equal(test_write_file(w->root, "/proc/cpuinfo",
	                                 on_second_cpu ? "processor\t: 0\napicid\t\t: 1\n"
	                                               : "processor\t: 0\napicid\t\t: 0\n",
	                                 0644),
	                 0);
	write_cmdline(w, "root=/dev/vda1 ro crashkernel=384M disable_cpu_apicid=0 reset_devices "
	                 "upgraded.panic=1 upgraded.stamps=x\n");
	return boot(w, NEW_KERNEL, BOOT_P, true);
}

static Context *boot_crash_kernel(World *w) {
	return boot_crash_kernel_on(w, false);
}

/* The last load request the record backend saw for the normal (not crash) slot. */
static json_object *last_normal_load(World *w) {
	_cleanup_free_ char *path = NULL, *data = NULL;
	json_object *o, *a, *found = NULL;

	assert_true(asprintf(&path, "%s/run/upgraded/kexec-record.json", w->root) > 0);
	assert_int_equal(read_file_full(path, 1 << 20, &data, NULL), 0);
	o = json_tokener_parse(data);
	assert_non_null(o);
	assert_true(json_object_object_get_ex(o, "requests", &a));
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *r = json_object_array_get_idx(a, i), *v;

		if (json_object_object_get_ex(r, "op", &v) &&
		    streq(json_object_get_string(v), "load") &&
		    json_object_object_get_ex(r, "panic", &v) && !json_object_get_boolean(v))
			found = r;
	}
	if (found)
		json_object_get(found);
	json_object_put(o);
	return found;
}

static const char *jstr(json_object *o, const char *key) {
	json_object *v;

	return json_object_object_get_ex(o, key, &v) ? json_object_get_string(v) : NULL;
}

/* A refused takeover: no new load (the last is still stage's, before), no
 * request, no VM step on the crash kernel. Takes before. */
static void assert_nothing_handed_over(World *w, json_object *before) {
	json_object *after = last_normal_load(w);

	assert_int_equal(w->requests, 0);
	assert_int_equal(w->rollback, 0);
	assert_int_equal(w->post, 0);
	assert_string_equal(json_object_to_json_string(before), json_object_to_json_string(after));
	json_object_put(before);
	json_object_put(after);
}

static void assert_report_has_panic_path(World *w, const char *id, const char *phase, bool parked) {
	_cleanup_free_ char *data = read_disk(w, "reports", id);
	json_object *o, *p, *v;

	assert_non_null(data);
	o = json_tokener_parse(data);
	assert_non_null(o);
	assert_true(json_object_object_get_ex(o, "panic_path", &p));
	assert_non_null(p);
	assert_string_equal(jstr(p, "crash_kernel_boot_id"), BOOT_P);
	assert_string_equal(jstr(p, "crashed_in_phase"), phase);
	/* The boot CPU the staged kernel left parked, or null. */
	assert_true(json_object_object_get_ex(p, "boot_cpu_parked", &v));
	if (parked) {
		assert_true(json_object_is_type(v, json_type_int));
		assert_int_equal(json_object_get_int64(v), 0);
	} else
		assert_null(v);
	json_object_put(o);
	assert_report_valid(w, id);
}

/* The three states in which the crash kernel can finish the update: it loads the
 * staged kernel as an ordinary, verified image with the saved full memory map,
 * requests the reboot, restores no VM; the staged kernel then completes. */
static void panic_takeover_completes(World *w, unsigned point, const char *phase, bool fast,
                                     bool on_second_cpu) {
	_cleanup_free_ char *id = commit_then_crash(w, point, fast), *memmap = NULL;
	json_object *load;
	unsigned requests = w->requests;
	Context *c;
	Update *u;

	assert_int_equal(w->pre, point == CRASH_IN_CHECKPOINT ? 0 : 1);
	c = boot_crash_kernel_on(w, on_second_cpu);
	assert_true(c->panic_kernel);
	{
		_cleanup_free_ char *json = NULL;

		assert_int_equal(context_describe(c, &json), 0);
		assert_non_null(strstr(json, "\"PanicKernel\":true"));
	}
	u = context_find(c, id);
	assert_int_equal(u->state, UPDATE_COMMITTING);
	assert_string_equal(u->phase, PHASE_HANDOFF_REQUESTED);
	assert_string_equal(u->panic_boot_id, BOOT_P);
	assert_string_equal(u->panic_from_phase, phase);
	assert_string_equal(u->handoff_boot_id, BOOT_P);
	assert_int_equal(u->handoff, HANDOFF_MODE_VERIFIED);
	assert_non_null(update_find_stamp(u, "panic-recovery"));
	assert_non_null(update_find_stamp(u, "panic-handoff"));
	assert_int_equal(u->panic_parked_cpu, on_second_cpu);
	assert_int_equal(u->panic_parked_apicid, 0);
	assert_int_equal(w->requests, requests + 1);
	assert_int_equal(w->post, 0);     /* no VM restored on the crash kernel */
	assert_int_equal(w->rollback, 0); /* nor resumed */
	load = last_normal_load(w);
	assert_non_null(load);
	assert_string_equal(jstr(load, "mode"), "verified");
	assert_string_equal(jstr(load, "kernel_sha256"), u->kernel.sha256);
	assert_int_equal(context_memmap_path(c, id, &memmap), 0);
	assert_string_equal(jstr(load, "memmap_dir"), memmap);
	json_object_put(load);
	assert_disk_matches(w, c, u);
	context_free(c);

	/* A restart on the same crash kernel waits for the requested kexec. */
	c = boot_crash_kernel_on(w, on_second_cpu);
	assert_int_equal(context_find(c, id)->state, UPDATE_COMMITTING);
	assert_int_equal(w->requests, requests + 1);
	context_free(c);

	/* The staged kernel, with the full map: the regular completion. */
	write_cmdline(w, "root=/dev/vda1 ro crashkernel=384M upgraded.stamps=x\n");
	c = boot(w, NEW_KERNEL, BOOT_B, true);
	assert_false(c->panic_kernel);
	u = context_find(c, id);
	assert_int_equal(u->state, UPDATE_DONE);
	assert_int_equal(w->post, 1);
	assert_int_equal(w->rollback, 0);
	assert_report_has_panic_path(w, id, phase, on_second_cpu);
	context_free(c);
}

static void test_context_panic_after_checkpoint(void **state) {
	panic_takeover_completes(*state, CRASH_AFTER_CHECKPOINT, PHASE_PRE_HANDOFF, false, false);
}

static void test_context_panic_after_handoff_record(void **state) {
	panic_takeover_completes(*state, CRASH_AFTER_HANDOFF_RECORD, PHASE_HANDOFF, false, true);
}

static void test_context_panic_after_request_fast_becomes_verified(void **state) {
	panic_takeover_completes(*state, CRASH_AFTER_REQUEST, PHASE_HANDOFF_REQUESTED, true, false);
}

/* Crashed before every VM was checkpointed: failed with the step named, nothing
 * loaded or requested, no VM step run on the crash kernel. */
static void test_context_panic_during_checkpoint_fails(void **state) {
	World *w = *state;
	_cleanup_free_ char *id = commit_then_crash(w, CRASH_IN_CHECKPOINT, false);
	json_object *before = last_normal_load(w);
	Context *c = boot_crash_kernel(w);
	Update *u = context_find(c, id);

	assert_int_equal(u->state, UPDATE_FAILED);
	assert_non_null(strstr(u->error, "'vm-checkpoint'"));
	assert_nothing_handed_over(w, before);
	assert_report_has_panic_path(w, id, PHASE_PRE_HANDOFF, false);
	context_free(c);
}

/* The staged kernel changed on disk between stage and the crash: refused and
 * named, nothing loaded, nothing requested. Same for the initrd. */
static void panic_files_changed(World *w, bool initrd) {
	_cleanup_free_ char *id = commit_then_crash(w, CRASH_AFTER_CHECKPOINT, false);
	json_object *before = last_normal_load(w);
	Context *c;
	Update *u;

	if (initrd)
		assert_int_equal(test_write_file(w->root, "/boot/initrd.img", "other", 0644), 0);
	else
		assert_int_equal(test_write_bzimage(w->root, KERNEL, "6.1.0-99-evil", BZ_OK, 0644),
		                 0);
	c = boot_crash_kernel(w);
	u = context_find(c, id);
	assert_int_equal(u->state, UPDATE_FAILED);
	assert_non_null(strstr(u->error, "changed"));
	assert_non_null(strstr(u->error, initrd ? "initrd" : "kernel"));
	assert_nothing_handed_over(w, before);
	assert_report_has_panic_path(w, id, PHASE_PRE_HANDOFF, false);
	context_free(c);

	/* The next regular boot leaves the finished update alone. */
	write_cmdline(w, "root=/dev/vda1 ro\n");
	c = boot(w, OLD_KERNEL, BOOT_B, true);
	assert_int_equal(context_find(c, id)->state, UPDATE_FAILED);
	assert_int_equal(w->rollback, 0);
	context_free(c);
}

static void test_context_panic_kernel_changed_fails(void **state) {
	panic_files_changed(*state, false);
}

static void test_context_panic_initrd_changed_fails(void **state) {
	panic_files_changed(*state, true);
}

/* No memory map saved at stage (removed here): the crash kernel cannot give the
 * next kernel the machine, so it refuses. */
static void test_context_panic_without_memmap_fails(void **state) {
	World *w = *state;
	_cleanup_free_ char *id = commit_then_crash(w, CRASH_AFTER_HANDOFF_RECORD, false);
	_cleanup_free_ char *cmd = NULL;
	Context *c;
	Update *u;

	assert_true(asprintf(&cmd, "rm -rf '%s/var/lib/upgraded/memmap'", w->root) > 0);
	assert_int_equal(system(cmd), 0);
	c = boot_crash_kernel(w);
	u = context_find(c, id);
	assert_int_equal(u->state, UPDATE_FAILED);
	assert_non_null(strstr(u->error, "memory map"));
	assert_int_equal(w->requests, 0);
	assert_int_equal(w->post, 0);
	assert_report_has_panic_path(w, id, PHASE_HANDOFF, false);
	context_free(c);
}

/* Without the mark the same record is a regular reboot before the handoff: it
 * rolls back (VMs given back), nothing is loaded or requested. */
static void test_context_no_panic_mark_rolls_back(void **state) {
	World *w = *state;
	_cleanup_free_ char *id = commit_then_crash(w, CRASH_AFTER_CHECKPOINT, false);
	Context *c;
	Update *u;

	write_cmdline(w, "root=/dev/vda1 ro crashkernel=384M\n");
	c = boot(w, NEW_KERNEL, BOOT_P, true);
	assert_false(c->panic_kernel);
	u = context_find(c, id);
	assert_int_equal(u->state, UPDATE_FAILED);
	assert_int_equal(w->rollback, 1);
	assert_int_equal(w->requests, 0);
	assert_null(u->panic_boot_id);
	context_free(c);
}

/* A crash during the rollback: the crash kernel gives nothing back either. */
static void test_context_panic_during_rollback_fails_without_vm_steps(void **state) {
	World *w = *state;
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_free_ char *id = NULL;
	Context *c;
	Update *u;

	assert_int_equal(
	        test_write_file(w->root, "/sys/kernel/kexec_crash_size", "402653184\n", 0644), 0);
	c = boot(w, OLD_KERNEL, BOOT_A, true);
	u = stage(c, &e);
	id = strdup(u->id);
	w->fail_pre = true;
	assert_int_equal(context_commit_begin(c, "", &u, &e), 0);
	/* image check mark, then the rollback phase: crash right there. */
	w->crash_at = w->steps + 2;
	assert_int_equal(context_commit_run(c, u), -ECANCELED);
	assert_string_equal(u->phase, PHASE_ROLLBACK);
	context_free(c);
	w->crash_at = 0;

	c = boot_crash_kernel(w);
	u = context_find(c, id);
	assert_int_equal(u->state, UPDATE_FAILED);
	assert_non_null(strstr(u->error, "refused to pause"));
	assert_int_equal(w->rollback, 0);
	assert_int_equal(w->requests, 0);
	assert_report_valid(w, id);
	context_free(c);
}

/* A staged (never committed) update is left alone on the crash kernel: not
 * loaded into the reservation's view of the machine, still staged. */
static void test_context_panic_kernel_leaves_staged_alone(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	World *w = *state;
	_cleanup_free_ char *id = NULL, *path = NULL;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	Update *u = stage(c, &e);

	id = strdup(u->id);
	context_free(c);
	/* The crash wiped what the kernel had loaded. */
	assert_true(asprintf(&path, "%s/run/upgraded/kexec-record.json", w->root) > 0);
	assert_int_equal(unlink(path), 0);
	c = boot_crash_kernel(w);
	u = context_find(c, id);
	assert_int_equal(u->state, UPDATE_STAGED);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(w->requests, 0);
	context_free(c);
}

/* The kernel's own kexec_file_load cannot hand over a map: it refuses. */
static void test_context_kexec_file_refuses_memmap(void **state) {
	World *w = *state;
	_cleanup_free_ char *path = NULL;
	KexecImage img = { .initrd_fd = -EBADF,
		           .cmdline = "",
		           .mode = HANDOFF_MODE_VERIFIED,
		           .memmap_dir = "/var/lib/upgraded/memmap/x" };

	assert_true(asprintf(&path, "%s%s", w->root, KERNEL) > 0);
	img.kernel_fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(img.kernel_fd >= 0);
	assert_int_equal(kexec_backend_file.load(w->root, &img), -EOPNOTSUPP);
	close(img.kernel_fd);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_context_panic_after_checkpoint),
		T(test_context_panic_after_handoff_record),
		T(test_context_panic_after_request_fast_becomes_verified),
		T(test_context_panic_during_checkpoint_fails),
		T(test_context_panic_kernel_changed_fails),
		T(test_context_panic_initrd_changed_fails),
		T(test_context_panic_without_memmap_fails),
		T(test_context_no_panic_mark_rolls_back),
		T(test_context_panic_during_rollback_fails_without_vm_steps),
		T(test_context_panic_kernel_leaves_staged_alone),
		T(test_context_kexec_file_refuses_memmap),
	};
#undef T
	log_set_max_level(LOG_CRIT);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
