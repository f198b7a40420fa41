/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The step table (context.h, ContextStepVTable): steps run in the order ContextStepId declares,
 * whatever the order they were plugged in; a step plugs in once; a failing step rolls back the
 * ones that ran before it.
 */
#include "context-test-util.h"

/* A second step, the measurement's slot, that records what the VMs' step (boot()) had done
 * when it ran. */
typedef struct StepProbe {
	World *world;
	unsigned pre, rollback, handoff_prepared;
	unsigned vm_pre_seen; /* World.pre when the pre-handoff hook ran */
} StepProbe;

static int probe_pre(Context *c, Update *u, void *userdata, char **ret_reason) {
	StepProbe *p = userdata;

	p->vm_pre_seen = p->world->pre;
	p->pre++;
	return 0;
}

static int probe_rollback(Context *c, Update *u, void *userdata, char **ret_reason) {
	((StepProbe *)userdata)->rollback++;
	return 0;
}

static void probe_handoff_prepare(Context *c, Update *u, void *userdata) {
	((StepProbe *)userdata)->handoff_prepared++;
}

static const ContextStepVTable probe_step = {
	.name = "probe",
	.hooks = { [HOOK_PRE_HANDOFF] = { "probe-open", probe_pre },
	           [HOOK_ROLLBACK] = { "probe-rollback", probe_rollback } },
	.handoff_prepare = probe_handoff_prepare,
};

static int refuse_nothing(Context *c, Update *u, void *userdata, json_object **ret_decisions,
                          char **ret_refusal) {
	return 1;
}

static void test_steps_run_in_declared_order(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	World *w = *state;
	StepProbe p = { .world = w };
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true); /* the VMs' step is in already */
	Update *u;

	/* Plugged in after the VMs' step, runs before it: ContextStepId says so. */
	assert_int_equal(context_add_step(c, CONTEXT_STEP_MEASURE, &probe_step, &p), 0);
	u = stage(c, &e);
	assert_int_equal(context_commit_begin(c, "", &u, &e), 0);
	assert_int_equal(context_commit_run(c, u), 0);
	assert_int_equal(p.pre, 1);
	assert_int_equal(p.vm_pre_seen, 0);
	assert_int_equal(w->pre, 1);
	assert_int_equal(p.handoff_prepared, 1);
	assert_int_equal(p.rollback, 0);
	assert_true(update_hook_done(u, "pre:probe-open"));
	assert_true(update_hook_done(u, "pre:vm-checkpoint"));
	assert_true(update_hook_done(u, "pre:kexec-image-loaded"));
	context_free(c);
}

static void test_steps_plug_in_once(void **state) {
	static const ContextStepVTable no_key = {
		.name = "no-key",
		.hooks = { [HOOK_POST_BOOT] = { NULL, probe_pre } },
	};
	static const ContextStepVTable checking = { .name = "checking",
		                                    .commit_check = refuse_nothing };
	World *w = *state;
	StepProbe p = { .world = w };
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);

	assert_int_equal(context_add_step(c, CONTEXT_STEP_VMS, &probe_step, &p), -EEXIST);
	assert_int_equal(context_add_step(c, CONTEXT_STEP_KEXEC_IMAGE, &probe_step, &p), -EEXIST);
	assert_int_equal(context_add_step(c, _CONTEXT_STEP_MAX, &probe_step, &p), -EINVAL);
	assert_int_equal(context_add_step(c, CONTEXT_STEP_MEASURE, &no_key, &p), -EINVAL);
	assert_int_equal(context_add_step(c, CONTEXT_STEP_MEASURE, NULL, &p), -EINVAL);
	assert_int_equal(context_add_step(c, CONTEXT_STEP_MEASURE, &checking, &p), 0);
	context_free(c);

	/* A second commit check has nowhere to go: the decisions are one. */
	c = boot(w, OLD_KERNEL, BOOT_A, true);
	assert_int_equal(context_add_step(c, CONTEXT_STEP_MEASURE, &checking, &p), 0);
	c->steps[CONTEXT_STEP_VMS] = (ContextStep){};
	assert_int_equal(context_add_step(c, CONTEXT_STEP_VMS, &checking, &p), -EBUSY);
	context_free(c);
}

static void test_steps_failure_rolls_back_the_earlier_ones(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	World *w = *state;
	StepProbe p = { .world = w };
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	Update *u;

	assert_int_equal(context_add_step(c, CONTEXT_STEP_MEASURE, &probe_step, &p), 0);
	u = stage(c, &e);
	w->fail_pre = true; /* the VMs' step, after the probe's, fails */
	assert_int_equal(context_commit_begin(c, "", &u, &e), 0);
	assert_int_equal(context_commit_run(c, u), 0);
	assert_int_equal(u->state, UPDATE_FAILED);
	assert_int_equal(p.pre, 1);
	assert_int_equal(p.rollback, 1);
	assert_int_equal(w->rollback, 1);
	assert_int_equal(p.handoff_prepared, 0);
	assert_int_equal(w->requests, 0);
	context_free(c);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_steps_run_in_declared_order),
		T(test_steps_plug_in_once),
		T(test_steps_failure_rolls_back_the_earlier_ones),
	};
#undef T
	log_set_max_level(LOG_CRIT);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
