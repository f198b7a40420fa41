/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The commit path against libvirt's test driver with a failure injected at each libvirt call
 * (pause, save, shutdown, connect), and a rollback asked for after a commit went through. Every
 * case ends by checking the rollback guarantee: every VM in its original state, no managed save
 * image left (or the image kept where a restore failed).
 */

#include "vm-test-util.h"

/* ---- tests ---- */

static void test_checkpoint_suspend_fails(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3 };
	VmResults *r = NULL;

	inj.target[OP_SUSPEND] = "b";
	assert_int_equal(vm_checkpoint_all(conn, &plan, on_progress, &conn, &r), -EIO);
	assert_all_running_no_image();
	assert_error_contains(find(r, "b"), "pause failed: ");
	assert_error_contains(find(r, "b"), "injected suspend failure on b");
	assert_int_equal(find(r, "a")->outcome, VM_OUTCOME_ROLLED_BACK);
	assert_error_contains(find(r, "a"), "rolled back: VM 'b' failed: pause failed");
	assert_int_equal(find(r, "test")->outcome, VM_OUTCOME_ROLLED_BACK);
	/* a was paused before b failed and got resumed; nothing was saved. */
	assert_true(progress_index("a:paused", false) >= 0);
	assert_true(progress_index("a:saving", false) < 0);
	dump_results(r, "rollback-pause-failed");
	vm_results_free(r);
}

static void test_checkpoint_save_fails(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3, .parallel = 1 };
	VmResults *r = NULL;

	/* parallel = 1: a is saved (shut off, image written) before b fails. */
	inj.target[OP_SAVE] = "b";
	assert_int_equal(vm_checkpoint_all(conn, &plan, on_progress, &conn, &r), -EIO);
	assert_true(progress_index("a:saved", false) >= 0);
	assert_all_running_no_image();
	assert_int_equal(find(r, "b")->outcome, VM_OUTCOME_ROLLED_BACK);
	assert_error_contains(find(r, "b"), "managed save failed: ");
	assert_error_contains(find(r, "b"), "injected managed save failure on b");
	assert_int_equal(find(r, "a")->outcome, VM_OUTCOME_ROLLED_BACK);
	assert_error_contains(find(r, "a"), "rolled back: VM 'b' failed");
	assert_true(progress_index("a:rolled-back", false) > progress_index("b:failed", false));
	/* The report says what the failed attempt cost. */
	assert_true(find(r, "a")->resumed_at > find(r, "a")->paused_at);
	assert_true(find(r, "b")->resumed_at > find(r, "b")->paused_at);
	dump_results(r, "rollback-save-failed");
	vm_results_free(r);
}

static void test_checkpoint_save_fails_parallel(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3, .parallel = 8 };
	VmResults *r = NULL;

	inj.target[OP_SAVE] = "a";
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EIO);
	assert_all_running_no_image();
	vm_results_free(r);
}

static void test_checkpoint_save_timeout(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3, .save_timeout_usec = 200000 };
	VmResults *r = NULL;

	inj.target[OP_SAVE_HANG] = "b";
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EIO);
	assert_true(inj.aborted);
	assert_all_running_no_image();
	assert_error_contains(find(r, "b"), "timed out after 0.2 s, aborted");
	assert_error_contains(find(r, "a"), "rolled back: VM 'b' failed: timed out");
	vm_results_free(r);
}

static void test_checkpoint_connect_fails(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3 };
	VmResults *r = NULL;

	inj.target[OP_CONNECT] = "*";
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -ECONNREFUSED);
	/* The rollback's workers cannot connect either: the VMs stay paused, and say so. */
	assert_int_equal(dom_state("a"), VIR_DOMAIN_PAUSED);
	assert_int_equal(find(r, "a")->outcome, VM_OUTCOME_FAILED);
	assert_error_contains(find(r, "a"), "cannot connect to test:///default: ");
	assert_error_contains(find(r, "a"), "injected-connect-failure");

	inj.target[OP_CONNECT] = NULL;
	assert_int_equal(vm_rollback(conn, r, "retry", NULL, NULL), 0);
	assert_all_running_no_image();
	vm_results_free(r);
}

/* A QEMU that stops answering its monitor: the pause is abandoned after the timeout, the
 * others are rolled back, and when the pause goes through later it is undone at once. */
static void test_checkpoint_pause_timeout(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3, .pause_timeout_usec = 200000 };
	VmResults *r = NULL;

	inj.target[OP_SUSPEND_HANG] = "b";
	assert_int_equal(vm_checkpoint_all(conn, &plan, on_progress, &conn, &r), -ETIMEDOUT);
	assert_error_contains(find(r, "b"), "pause did not complete within 0.2 s");
	assert_error_contains(find(r, "a"), "rolled back: VM 'b' failed: pause did not complete");
	assert_int_equal(find(r, "a")->outcome, VM_OUTCOME_ROLLED_BACK);
	assert_int_equal(dom_state("a"), VIR_DOMAIN_RUNNING);
	assert_int_equal(dom_state("b"), VIR_DOMAIN_RUNNING); /* its pause is still pending */
	assert_true(progress_index("a:saving", false) < 0);   /* nothing was saved */

	/* QEMU answers again: the late pause happens and is undone by its own thread. */
	pthread_mutex_lock(&inj.lock);
	inj.released = true;
	pthread_cond_broadcast(&inj.cond);
	pthread_mutex_unlock(&inj.lock);
	for (int i = 0; i < 500 && __atomic_load_n(&inj.late_resumes, __ATOMIC_SEQ_CST) == 0; i++)
		usleep(10000);
	assert_int_equal(inj.late_resumes, 1);
	assert_all_running_no_image();
	/* The thread drops its domain reference after the resume. */
	assert_int_equal(vm_wait_detached(10 * 1000000ULL), 0);
	vm_results_free(r);
}

/* libvirtd restarting: the rollback's workers retry their connection until it answers. */
static void test_rollback_connect_retry(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3 };
	VmResults *r = NULL;

	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	inj.connect_failures = 3;
	vm_set_connect_retry(5 * 1000000ULL);
	assert_int_equal(vm_rollback(conn, r, "handoff failed", NULL, NULL), 0);
	assert_int_equal(inj.connect_failures, 0);
	assert_all_running_no_image();
	vm_results_free(r);

	/* Without a retry window one failure is final, and the VM says why. */
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	vm_set_connect_retry(0);
	inj.connect_failures = 1;
	assert_int_equal(vm_rollback(conn, r, "handoff failed", NULL, NULL), -ECONNREFUSED);
	assert_int_equal(vm_rollback(conn, r, "handoff failed", NULL, NULL), 0);
	assert_all_running_no_image();
	vm_results_free(r);
}

static void test_rollback_restore_fails_keeps_image(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3, .parallel = 1 };
	VmResults *r = NULL;

	inj.target[OP_SAVE] = "b";
	inj.target[OP_CREATE] = "a";
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EIO);
	/* a cannot be restored: its state is kept on disk, never removed. */
	assert_int_equal(find(r, "a")->outcome, VM_OUTCOME_FAILED);
	assert_error_contains(find(r, "a"), "restore from the managed save image failed");
	assert_error_contains(find(r, "a"), "the image is kept");
	assert_int_equal(dom_state("a"), VIR_DOMAIN_SHUTOFF);
	assert_int_equal(dom_has_image("a"), 1);
	assert_int_equal(dom_state("b"), VIR_DOMAIN_RUNNING);
	assert_int_equal(dom_state("test"), VIR_DOMAIN_RUNNING);

	/* The manual retry works once the cause is gone. */
	inj.target[OP_CREATE] = NULL;
	assert_int_equal(vm_restore_one(conn, "a", &r->items[0]), 0);
	assert_int_equal(r->items[0].outcome, VM_OUTCOME_RESUMED);
	assert_null(r->items[0].error);
	assert_all_running_no_image();
	vm_results_free(r);
}

static void test_rollback_removes_stale_image(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3, .parallel = 1 };
	VmResults *r = NULL;

	inj.target[OP_SAVE] = "b";
	inj.target[OP_HAS_SAVE_STALE] = "b";
	inj.target[OP_SAVE_REMOVE] = "nobody"; /* count only */
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EIO);
	assert_int_equal(inj.calls[OP_HAS_SAVE_STALE], 1);
	assert_all_running_no_image();
	assert_int_equal(find(r, "b")->outcome, VM_OUTCOME_ROLLED_BACK);
	vm_results_free(r);

	/* The removal itself fails: reported, not hidden. */
	inj.target[OP_HAS_SAVE_STALE] = "b";
	inj.target[OP_SAVE_REMOVE] = "b";
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EIO);
	assert_int_equal(find(r, "b")->outcome, VM_OUTCOME_FAILED);
	assert_error_contains(find(r, "b"), "cannot remove the managed save image");
	vm_results_free(r);
}

static void test_rollback_resume_fails(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3 };
	VmResults *r = NULL;

	/* b's save fails, it is still paused: its resume fails in the rollback too. */
	inj.target[OP_SAVE] = "b";
	inj.target[OP_RESUME] = "b";
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EIO);
	assert_int_equal(find(r, "b")->outcome, VM_OUTCOME_FAILED);
	assert_error_contains(find(r, "b"), "resume failed: ");
	assert_error_contains(find(r, "b"), "injected resume failure on b");
	assert_int_equal(dom_state("b"), VIR_DOMAIN_PAUSED);
	assert_int_equal(dom_state("a"), VIR_DOMAIN_RUNNING);
	assert_int_equal(dom_state("test"), VIR_DOMAIN_RUNNING);

	/* A repeated rollback is safe and finishes the job. */
	inj.target[OP_RESUME] = NULL;
	assert_int_equal(vm_rollback(conn, r, "retry", NULL, NULL), 0);
	assert_all_running_no_image();
	vm_results_free(r);
}

static void test_rollback_after_success(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3 };
	VmResults *r = NULL;

	/* A later step of the commit failed (e.g. the handoff record): undo everything. */
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	assert_int_equal(dom_has_image("a"), 1);
	assert_int_equal(vm_rollback(conn, r, "handoff record not written", NULL, NULL), 0);
	assert_all_running_no_image();
	for (size_t i = 0; i < r->n; i++) {
		assert_int_equal(r->items[i].outcome, VM_OUTCOME_ROLLED_BACK);
		assert_error_contains(&r->items[i], "rolled back: handoff record not written");
	}
	vm_results_free(r);
}

static void test_originally_paused_stays_paused(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3 };
	VmResults *r = NULL;

	dom_suspend("a");
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	assert_int_equal(find(r, "a")->orig_state, VIR_DOMAIN_PAUSED);
	assert_int_equal(vm_rollback(conn, r, "test", NULL, NULL), 0);
	assert_int_equal(dom_state("a"), VIR_DOMAIN_PAUSED);
	assert_int_equal(dom_has_image("a"), 0);
	assert_int_equal(dom_state("b"), VIR_DOMAIN_RUNNING);
	vm_results_free(r);
}

static void test_shutdown_timeout_rolls_back(void **state) {
	const VmPlanEntry e[] = { { "a", VM_STRATEGY_SHUTDOWN }, { "b", VM_STRATEGY_CHECKPOINT } };
	VmPlan plan = { .entries = e, .n_entries = 2, .shutdown_timeout_usec = 300000 };
	VmResults *r = NULL;

	inj.target[OP_SHUTDOWN_IGNORED] = "a";
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -ETIMEDOUT);
	assert_error_contains(find(r, "a"), "did not shut down within 0.3 s");
	assert_all_running_no_image();
	vm_results_free(r);

	inj.target[OP_SHUTDOWN_IGNORED] = NULL;
	inj.target[OP_SHUTDOWN] = "a";
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EIO);
	assert_error_contains(find(r, "a"), "graceful shutdown request failed");
	assert_all_running_no_image();
	vm_results_free(r);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		T(test_checkpoint_suspend_fails),       T(test_checkpoint_save_fails),
		T(test_checkpoint_save_fails_parallel), T(test_checkpoint_save_timeout),
		T(test_checkpoint_connect_fails),       T(test_checkpoint_pause_timeout),
		T(test_rollback_connect_retry),         T(test_rollback_restore_fails_keeps_image),
		T(test_rollback_removes_stale_image),   T(test_rollback_resume_fails),
		T(test_rollback_after_success),         T(test_originally_paused_stays_paused),
		T(test_shutdown_timeout_rolls_back),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
