/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The boot path against libvirt's test driver when it fails: a restore or resume that fails
 * keeps the saved state and says how to retry, libvirtd lost during a restore, an image gone,
 * and the manual retry of one VM (vm_restore_one()).
 */

#include "vm-test-util.h"

/* ---- tests ---- */

static void test_restore_fails_keeps_image(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3 };
	VmResults *r = NULL;
	VmResult *b;

	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	inj.target[OP_CREATE] = "b";
	assert_int_equal(vm_restore_all(conn, &plan, r, on_progress, &conn), -EIO);
	b = (VmResult *)find(r, "b");
	assert_int_equal(b->outcome, VM_OUTCOME_FAILED);
	assert_error_contains(b, "image is kept, retry with 'upgradectl restore-vm b'");
	assert_int_equal(b->resumed_at, 0);
	assert_int_equal(vm_result_downtime(b), 0);
	assert_int_equal(dom_has_image("b"), 1);
	assert_int_equal(find(r, "a")->outcome, VM_OUTCOME_RESUMED);
	assert_int_equal(dom_state("a"), VIR_DOMAIN_RUNNING);
	assert_true(progress_index("b:failed", false) >= 0);
	dump_results(r, "restore-failed");

	/* Restore fails again on the same image: still kept. */
	assert_int_equal(vm_restore_one(conn, "b", b), -EIO);
	assert_int_equal(dom_has_image("b"), 1);

	inj.target[OP_CREATE] = NULL;
	assert_int_equal(vm_restore_one(conn, "b", b), 0);
	assert_int_equal(b->outcome, VM_OUTCOME_RESUMED);
	assert_true(vm_result_downtime(b) > 0);
	assert_all_running_no_image();
	vm_results_free(r);
}

/* libvirtd killed during a restore on the new kernel: the VM ends running, or with its saved
 * state kept and reported; never paused and reported restored (docs/reliability.md). */
static void test_restore_libvirtd_lost(void **state) {
	const VmPlanEntry b[] = { { "b", VM_STRATEGY_CHECKPOINT } };
	VmPlan plan = { .entries = plan_ab, .n_entries = 3 },
	       only_b = { .entries = b, .n_entries = 1 };
	VmResults *r = NULL;
	int k;

	/* The restarted libvirtd finished the restore: the VM is there, paused, its image
	 * gone. The daemon looks again and resumes it. */
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	inj.target[OP_CREATE_LOST] = "a";
	k = vm_restore_all(conn, &plan, r, NULL, NULL);
	dump_results(r, "libvirtd-lost");
	assert_int_equal(k, 0);
	assert_int_equal(inj.calls[OP_CREATE_LOST], 1);
	assert_int_equal(find(r, "a")->outcome, VM_OUTCOME_RESUMED);
	assert_null(find(r, "a")->error);
	assert_all_running_no_image();
	vm_results_free(r);
	inj.target[OP_CREATE_LOST] = NULL;

	/* It did not: the image is still there, restored once libvirtd is back. */
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	inj.target[OP_CREATE_LOST_UNDONE] = "b";
	assert_int_equal(vm_restore_all(conn, &plan, r, NULL, NULL), 0);
	assert_int_equal(inj.calls[OP_CREATE_LOST_UNDONE], 1);
	assert_int_equal(find(r, "b")->outcome, VM_OUTCOME_RESUMED);
	assert_all_running_no_image();
	vm_results_free(r);
	inj.target[OP_CREATE_LOST_UNDONE] = NULL;

	/* Gone and not back in time: failed, the image kept and named. */
	assert_int_equal(vm_checkpoint_all(conn, &only_b, NULL, NULL, &r), 0);
	inj.target[OP_CREATE_LOST_UNDONE] = "b";
	inj.lost_for_good = true;
	assert_int_equal(vm_restore_all(conn, &only_b, r, NULL, NULL), -EIO);
	assert_int_equal(find(r, "b")->outcome, VM_OUTCOME_FAILED);
	assert_error_contains(find(r, "b"), "the image is kept");
	assert_int_equal(dom_has_image("b"), 1);
	inj.connect_failures = 0;
	inj.lost_for_good = false;
	inj.target[OP_CREATE_LOST_UNDONE] = NULL;
	assert_int_equal(vm_restore_one(conn, "b", (VmResult *)find(r, "b")), 0);
	assert_all_running_no_image();
	vm_results_free(r);
}

static void test_restore_resume_fails(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3 };
	VmResults *r = NULL;

	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	/* test is active and paused at the restore (it survived): only resumed, and that fails */
	dom_start_paused("test");
	inj.target[OP_RESUME] = "test";
	assert_int_equal(vm_restore_all(conn, &plan, r, NULL, NULL), -EIO);
	assert_int_equal(find(r, "test")->outcome, VM_OUTCOME_FAILED);
	assert_error_contains(find(r, "test"), "resume failed");
	assert_int_equal(find(r, "a")->outcome, VM_OUTCOME_RESUMED);
	assert_int_equal(find(r, "b")->outcome, VM_OUTCOME_RESUMED);
	vm_results_free(r);
}

static void test_restore_state_not_preserved(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3 };
	VmResults *r = NULL;
	virDomainPtr d;

	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	/* test's and a's images are gone. */
	d = virDomainLookupByName(conn, "test");
	assert_int_equal(virDomainManagedSaveRemove(d, 0), 0);
	virDomainFree(d);
	d = virDomainLookupByName(conn, "a");
	assert_int_equal(virDomainManagedSaveRemove(d, 0), 0);
	virDomainFree(d);
	inj.target[OP_HAS_SAVE] = "nobody";
	assert_int_equal(vm_restore_all(conn, &plan, r, NULL, NULL), -ENODATA);
	assert_error_contains(find(r, "test"), "state was not preserved");
	assert_error_contains(find(r, "a"), "state was not preserved");
	assert_int_equal(find(r, "b")->outcome, VM_OUTCOME_RESUMED);
	vm_results_free(r);
}

static void test_restore_one_errors(void **state) {
	VmResult other = { .name = (char *)"b" };

	assert_int_equal(vm_restore_one(conn, NULL, NULL), -EINVAL);
	assert_int_equal(vm_restore_one(conn, "", NULL), -EINVAL);
	assert_int_equal(vm_restore_one(NULL, "a", NULL), -EINVAL);
	assert_int_equal(vm_restore_one(conn, "a", &other), -EINVAL);
	assert_int_equal(vm_restore_one(conn, "nope", NULL), -ENOENT);
	assert_int_equal(vm_restore_one(conn, "a", NULL), -EBUSY);
	define_domain("off", "", false);
	assert_int_equal(vm_restore_one(conn, "off", NULL), -ENODATA);
	assert_int_equal(dom_state("off"), VIR_DOMAIN_SHUTOFF);
}

static void test_restore_one_without_record(void **state) {
	virDomainPtr d = virDomainLookupByName(conn, "a");

	assert_int_equal(virDomainManagedSave(d, 0), 0);
	virDomainFree(d);
	assert_int_equal(vm_restore_one(conn, "a", NULL), 0);
	assert_all_running_no_image();
}

/* The clocks after the restore: the test driver has no guest agent, so every VM restored is
 * reported not synced with libvirt's reason, and the restore still succeeds; the policy's
 * switch is a reason of its own; the record keeps all of it through the handoff JSON. */
static void test_restore_clock_sync(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3 };
	VmPlan off = { .entries = plan_ab, .n_entries = 3, .no_clock_sync = true };
	VmResults *r = NULL, *back = NULL;
	json_object *j;

	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	j = vm_results_to_json(r); /* before the restore: no clock_sync at all */
	assert_int_equal(vm_results_from_json(j, &back), 0);
	assert_int_equal(find(back, "a")->clock_sync, VM_CLOCK_SYNC_NONE);
	assert_null(strstr(json_object_to_json_string(j), "clock_sync"));
	json_object_put(j);
	vm_results_free(back);
	back = NULL;
	assert_int_equal(vm_restore_all(conn, &plan, r, NULL, NULL), 0);
	assert_all_running_no_image();
	for (int i = 0; i < 2; i++) {
		const VmResult *v = find(r, i == 0 ? "a" : "b");

		assert_int_equal(v->outcome, VM_OUTCOME_RESUMED);
		assert_int_equal(v->clock_sync, VM_CLOCK_SYNC_FAILED);
		assert_non_null(v->clock_sync_reason);
		assert_int_equal(v->clock_synced_at, 0);
	}
	dump_results(r, "clock-not-synced");

	j = vm_results_to_json(r);
	assert_int_equal(vm_results_from_json(j, &back), 0);
	assert_int_equal(find(back, "a")->clock_sync, VM_CLOCK_SYNC_FAILED);
	assert_string_equal(find(back, "a")->clock_sync_reason, find(r, "a")->clock_sync_reason);
	json_object_put(j);
	vm_results_free(back);
	vm_results_free(r);

	r = NULL;
	assert_int_equal(vm_checkpoint_all(conn, &off, NULL, NULL, &r), 0);
	assert_int_equal(vm_restore_all(conn, &off, r, NULL, NULL), 0);
	assert_string_equal(find(r, "b")->clock_sync_reason,
	                    "disabled by the policy ([VM] SyncGuestClock=no)");
	assert_int_equal(find(r, "b")->clock_sync_time, 0);
	vm_results_free(r);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		T(test_restore_fails_keeps_image), T(test_restore_libvirtd_lost),
		T(test_restore_resume_fails),      T(test_restore_state_not_preserved),
		T(test_restore_one_errors),        T(test_restore_one_without_record),
		T(test_restore_clock_sync),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
