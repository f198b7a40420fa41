/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The VM orchestration against libvirt's test driver when it goes as planned or is handed bad
 * input: checkpoint and restore of each strategy, the moments announced, the save flags and
 * the parallel limit, the plan's validation, the inventory and the JSON records. Failures of
 * the commit path: test-vm-rollback.c; of the boot path: test-vm-restore.c.
 */

#include "vm-test-util.h"

/* ---- tests ---- */

static const char *vm_state_to_string_for_test(const char *name) {
	virDomainPtr d = virDomainLookupByName(conn, name);
	int st = -1, reason;

	if (d) {
		(void)virDomainGetState(d, &st, &reason, 0);
		virDomainFree(d);
	}
	return st == VIR_DOMAIN_PAUSED || st == VIR_DOMAIN_RUNNING ? "(active)" : "(inactive)";
}

/* The VmEvent callback: where it ran, and the domain's state at RESTORED. */
static void on_event(const VmResult *r, VmEvent e, void *userdata) {
	bool main_thread = pthread_equal(pthread_self(), trace.main_thread);
	const char *state = "";

	assert_ptr_equal(userdata, &trace);
	if (e == VM_EVENT_RESTORED)
		state = vm_state_to_string_for_test(r->name);
	trace_add("%s:%s%s%s", vm_event_to_string(e), r->name, main_thread ? "" : "@worker", state);
}

static void test_strategy_strings(void **state) {
	for (int s = 0; s < _VM_STRATEGY_MAX; s++)
		assert_int_equal(vm_strategy_from_string(vm_strategy_to_string(s)), s);
	for (int o = 0; o < _VM_OUTCOME_MAX; o++)
		assert_int_equal(vm_outcome_from_string(vm_outcome_to_string(o)), o);
	assert_int_equal(vm_strategy_from_string("suspend"), _VM_STRATEGY_INVALID);
	assert_int_equal(vm_strategy_from_string(NULL), _VM_STRATEGY_INVALID);
	assert_null(vm_strategy_to_string(_VM_STRATEGY_MAX));
	assert_null(vm_outcome_to_string(-1));
}

static void test_inventory_facts(void **state) {
	VmList *l = NULL;
	virDomainPtr t;
	const VmInfo *v;
	struct json_object *j;

	define_domain("dev",
	              "<hostdev mode='subsystem' type='pci' managed='yes'><source>"
	              "<address domain='0' bus='6' slot='7' function='0'/></source></hostdev>",
	              false);
	define_domain("off", "", false);
	t = virDomainCreateXML(conn,
	                       "<domain type='test'><name>tr</name><memory>32768</memory>"
	                       "<os><type>hvm</type></os></domain>",
	                       0);
	assert_non_null(t);
	virDomainFree(t);

	assert_int_equal(vm_inventory(NULL, &l), -EINVAL);
	assert_int_equal(vm_inventory(conn, &l), 0);
	assert_int_equal(l->n, 6);

	v = vm_list_find(l, "a");
	assert_non_null(v);
	assert_true(v->active && v->persistent && v->checkpoint_possible);
	assert_int_equal(v->state, VIR_DOMAIN_RUNNING);
	assert_int_equal(v->memory_kib, 65536);
	assert_int_equal(v->vcpus, 1);
	assert_null(v->checkpoint_blocker);

	v = vm_list_find(l, "tr");
	assert_non_null(v);
	assert_false(v->persistent);
	assert_false(v->checkpoint_possible);
	assert_non_null(strstr(v->checkpoint_blocker, "transient"));

	v = vm_list_find(l, "dev");
	assert_non_null(v);
	assert_false(v->checkpoint_possible);
	assert_non_null(strstr(v->checkpoint_blocker, "<hostdev>"));

	v = vm_list_find(l, "off");
	assert_non_null(v);
	assert_false(v->active);
	assert_int_equal(v->state, VIR_DOMAIN_SHUTOFF);
	assert_null(vm_list_find(l, "nope"));

	j = vm_list_to_json(l);
	assert_int_equal(json_object_array_length(j), 6);
	dump_json(j, "inventory");
	assert_non_null(strstr(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN),
	                       "\"checkpoint_blocker\":\"host device"));
	json_object_put(j);
	vm_list_free(l);
}

static void test_checkpoint_restore_ok(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3 };
	VmResults *r = NULL;
	const VmResult *a, *b, *t;
	ssize_t last_pause, first_save;

	assert_int_equal(vm_checkpoint_all(conn, &plan, on_progress, &conn, &r), 0);
	a = find(r, "a");
	b = find(r, "b");
	t = find(r, "test");
	assert_int_equal(a->outcome, VM_OUTCOME_SAVED);
	assert_int_equal(b->outcome, VM_OUTCOME_SAVED);
	assert_int_equal(t->outcome, VM_OUTCOME_SAVED);
	assert_null(a->error);
	assert_int_equal(a->orig_state, VIR_DOMAIN_RUNNING);
	assert_int_equal(dom_state("a"), VIR_DOMAIN_SHUTOFF);
	assert_int_equal(dom_has_image("a"), 1);
	assert_int_equal(dom_has_image("b"), 1);
	assert_int_equal(dom_state("test"), VIR_DOMAIN_SHUTOFF);
	/* The test driver writes no file: size unknown. */
	assert_int_equal(a->saved_bytes, -1);
	assert_true(a->paused_at > 0 && a->save_started_at >= a->paused_at);
	assert_true(a->save_finished_at >= a->save_started_at);

	/* Every pause is reported before the first save starts. */
	last_pause = MAX(progress_index("a:paused", true), progress_index("b:paused", true));
	first_save = progress_index("a:saving", false);
	assert_true(last_pause >= 0 && first_save > last_pause);
	assert_true(progress_index("b:saved", true) > first_save);

	dump_results(r, "checkpointed");
	n_progress = 0;
	assert_int_equal(vm_restore_all(conn, NULL, r, on_progress, &conn), 0);
	assert_all_running_no_image();
	dump_results(r, "restored");
	for (size_t i = 0; i < r->n; i++) {
		assert_int_equal(r->items[i].outcome, VM_OUTCOME_RESUMED);
		assert_null(r->items[i].error);
		assert_true(r->items[i].resumed_at >= r->items[i].paused_at);
		assert_int_equal(vm_result_downtime(&r->items[i]),
		                 r->items[i].resumed_at - r->items[i].paused_at);
	}
	assert_true(progress_index("a:restoring", false) >= 0);
	assert_true(progress_index("a:resumed", false) > progress_index("a:restoring", false));
	vm_results_free(r);
}

static void test_events_at_the_moment(void **state) {
	VmPlan plan = {
		.entries = plan_ab, .n_entries = 3, .on_event = on_event, .event_userdata = &trace
	};
	VmResults *r = NULL;

	trace.main_thread = pthread_self();
	trace.on = true;
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	/* Pauses: on the caller's thread, right around virDomainSuspend. */
	for (size_t i = 0; i < 3; i++) {
		char a[48], b[48], c[48];

		snprintf(a, sizeof(a), "pausing:%s", plan_ab[i].name);
		snprintf(b, sizeof(b), "suspend:%s", plan_ab[i].name);
		snprintf(c, sizeof(c), "paused:%s", plan_ab[i].name);
		assert_true(trace_index(a) >= 0);
		assert_int_equal(trace_index(b), trace_index(a) + 1);
		assert_int_equal(trace_index(c), trace_index(b) + 1);
	}
	assert_int_equal(trace.n, 9);

	/* Restores: on the workers; restored (active: paused with libvirt's QEMU driver, the
	 * test driver ignores VIR_DOMAIN_START_PAUSED and needs no resume) -> resuming ->
	 * resumed. */
	trace.n = 0;
	assert_int_equal(vm_restore_all(conn, &plan, r, NULL, NULL), 0);
	for (size_t i = 0; i < 3; i++) {
		const char *n = plan_ab[i].name;
		char cr[48], rd[48], rg[48], ru[48];

		snprintf(cr, sizeof(cr), "create:%s", n);
		snprintf(rd, sizeof(rd), "restored:%s@worker(active)", n);
		snprintf(rg, sizeof(rg), "resuming:%s@worker", n);
		snprintf(ru, sizeof(ru), "resumed:%s@worker", n);
		assert_true(trace_index(cr) >= 0);
		assert_true(trace_index(rd) > trace_index(cr));
		assert_true(trace_index(rg) > trace_index(rd));
		assert_true(trace_index(ru) > trace_index(rg));
	}
	assert_all_running_no_image();
	vm_results_free(r);
}

static void test_events_not_on_failure(void **state) {
	VmPlan plan = {
		.entries = plan_ab, .n_entries = 3, .on_event = on_event, .event_userdata = &trace
	};
	VmResults *r = NULL;

	trace.main_thread = pthread_self();
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	trace.on = true;
	/* a's restore fails: no moment of a restored or resumed VM is announced; test is found
	 * active and paused (it survived), its resume fails: it was announced as resuming,
	 * never as resumed. */
	inj.target[OP_CREATE] = "a";
	inj.target[OP_RESUME] = "test";
	dom_start_paused("test");
	assert_int_equal(vm_restore_all(conn, &plan, r, NULL, NULL), -EIO);
	assert_int_equal(trace_index("restored:a@worker(active)"), -1);
	assert_int_equal(trace_index("resuming:a@worker"), -1);
	assert_int_equal(trace_index("resumed:a@worker"), -1);
	assert_true(trace_index("restored:b@worker(active)") >= 0);
	assert_true(trace_index("resumed:b@worker") > trace_index("resuming:b@worker"));
	assert_true(trace_index("resuming:test@worker") >= 0);
	assert_int_equal(trace_index("resumed:test@worker"), -1);
	assert_null(vm_event_to_string(_VM_EVENT_MAX));
	assert_null(vm_event_to_string((VmEvent)-1));
	vm_results_free(r);
}

static void test_checkpoint_bypass_cache(void **state) {
	const VmPlanEntry e[] = { { "a", VM_STRATEGY_CHECKPOINT } };
	VmPlan plan = { .entries = e, .n_entries = 1, .save_dir = "/tmp" };
	VmResults *r = NULL;

	/* A directory that takes O_DIRECT: the page cache is bypassed, the image comes back
	 * paused. */
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	assert_int_equal(inj.save_flags, VIR_DOMAIN_SAVE_PAUSED | VIR_DOMAIN_SAVE_BYPASS_CACHE);
	assert_int_equal(vm_restore_all(conn, NULL, r, NULL, NULL), 0);
	vm_results_free(r);

	plan.no_bypass_cache = true;
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	assert_int_equal(inj.save_flags, VIR_DOMAIN_SAVE_PAUSED);
	assert_int_equal(vm_restore_all(conn, NULL, r, NULL, NULL), 0);
	vm_results_free(r);

	/* The driver refuses the flag: saved without it rather than rolled back. */
	plan.no_bypass_cache = false;
	inj.target[OP_SAVE_NO_BYPASS] = "a";
	inj.save_flags = 0;
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	assert_int_equal(inj.calls[OP_SAVE_NO_BYPASS], 1);
	assert_int_equal(inj.save_flags, VIR_DOMAIN_SAVE_PAUSED);
	assert_int_equal(find(r, "a")->outcome, VM_OUTCOME_SAVED);
	assert_int_equal(vm_restore_all(conn, NULL, r, NULL, NULL), 0);
	assert_all_running_no_image();
	vm_results_free(r);
}

static void test_checkpoint_parallel_limit(void **state) {
	const VmPlanEntry e[] = {
		{ "a", VM_STRATEGY_CHECKPOINT },
		{ "b", VM_STRATEGY_CHECKPOINT },
		{ "test", VM_STRATEGY_CHECKPOINT },
	};
	VmPlan plan = { .entries = e, .n_entries = 3, .parallel = 1 };
	VmResults *r = NULL;

	inj.target[OP_SAVE_SLOW] = "*";
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	assert_int_equal(inj.max_saving, 1);
	assert_int_equal(vm_restore_all(conn, NULL, r, NULL, NULL), 0);
	vm_results_free(r);

	inj.max_saving = 0;
	plan.parallel = 2;
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	assert_int_equal(inj.max_saving, 2);
	for (size_t i = 0; i < r->n; i++)
		assert_int_equal(r->items[i].outcome, VM_OUTCOME_SAVED);
	assert_int_equal(vm_restore_all(conn, NULL, r, NULL, NULL), 0);
	assert_all_running_no_image();
	vm_results_free(r);
}

static void test_null_arguments(void **state) {
	VmResults *r = NULL;

	assert_int_equal(vm_rollback(NULL, r, "x", NULL, NULL), -EINVAL);
	assert_int_equal(vm_rollback(conn, NULL, "x", NULL, NULL), -EINVAL);
	assert_int_equal(vm_restore_all(NULL, NULL, r, NULL, NULL), -EINVAL);
	assert_int_equal(vm_restore_all(conn, NULL, NULL, NULL, NULL), -EINVAL);
	assert_int_equal(vm_inventory(conn, NULL), -EINVAL);
	assert_null(vm_results_find(NULL, "a"));
	assert_null(vm_list_find(NULL, "a"));
	vm_results_free(NULL);
	vm_list_free(NULL);
	assert_int_equal(dom_state("a"), VIR_DOMAIN_RUNNING);
}

static void test_checkpoint_bad_plan(void **state) {
	VmPlanEntry e[2];
	VmPlan plan = { .entries = e, .n_entries = 2 };
	VmResults *r = NULL;
	virDomainPtr t;

	assert_int_equal(vm_checkpoint_all(NULL, &plan, NULL, NULL, &r), -EINVAL);
	assert_int_equal(vm_checkpoint_all(conn, NULL, NULL, NULL, &r), -EINVAL);

	e[0] = (VmPlanEntry){ "a", VM_STRATEGY_CHECKPOINT };
	e[1] = (VmPlanEntry){ "nope", VM_STRATEGY_CHECKPOINT };
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -ENOENT);
	assert_error_contains(find(r, "nope"), "no such domain 'nope'");
	vm_results_free(r);

	e[1] = (VmPlanEntry){ "a", VM_STRATEGY_KEEP_RAM };
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EINVAL);
	assert_error_contains(&r->items[1], "listed twice");
	vm_results_free(r);

	e[1] = (VmPlanEntry){ "b", (VmStrategy)17 };
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EINVAL);
	assert_error_contains(find(r, "b"), "invalid strategy");
	vm_results_free(r);

	e[1] = (VmPlanEntry){ NULL, VM_STRATEGY_KEEP_RAM };
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EINVAL);
	vm_results_free(r);

	t = virDomainCreateXML(conn,
	                       "<domain type='test'><name>tr</name><memory>32768</memory>"
	                       "<os><type>hvm</type></os></domain>",
	                       0);
	assert_non_null(t);
	virDomainFree(t);
	e[1] = (VmPlanEntry){ "tr", VM_STRATEGY_CHECKPOINT };
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EINVAL);
	assert_error_contains(find(r, "tr"), "transient");
	vm_results_free(r);

	dom_suspend("b");
	e[1] = (VmPlanEntry){ "b", VM_STRATEGY_SHUTDOWN };
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EBUSY);
	assert_error_contains(find(r, "b"), "paused domain cannot shut down");
	vm_results_free(r);

	inj.target[OP_GET_STATE] = "b";
	e[1] = (VmPlanEntry){ "b", VM_STRATEGY_KEEP_RAM };
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), -EIO);
	assert_error_contains(find(r, "b"), "injected state query failure");
	vm_results_free(r);

	/* Nothing was touched by any of them. */
	assert_int_equal(dom_state("a"), VIR_DOMAIN_RUNNING);
	assert_int_equal(dom_state("b"), VIR_DOMAIN_PAUSED);
	assert_int_equal(dom_has_image("a"), 0);
}

static void test_shutdown_strategy(void **state) {
	const VmPlanEntry e[] = {
		{ "a", VM_STRATEGY_SHUTDOWN },
		{ "b", VM_STRATEGY_IGNORE },
		{ "test", VM_STRATEGY_CHECKPOINT },
	};
	VmPlan plan = { .entries = e, .n_entries = 3 };
	VmResults *r = NULL;

	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	assert_int_equal(find(r, "a")->outcome, VM_OUTCOME_SHUT_DOWN);
	assert_int_equal(find(r, "b")->outcome, VM_OUTCOME_IGNORED);
	assert_int_equal(dom_state("a"), VIR_DOMAIN_SHUTOFF);
	assert_int_equal(dom_state("b"), VIR_DOMAIN_RUNNING);
	assert_int_equal(vm_restore_all(conn, NULL, r, NULL, NULL), 0);
	assert_int_equal(find(r, "a")->outcome, VM_OUTCOME_RESUMED);
	assert_int_equal(find(r, "b")->outcome, VM_OUTCOME_IGNORED);
	assert_all_running_no_image();
	dump_results(r, "shutdown-ignore");
	vm_results_free(r);
}

static void test_not_running_is_ignored(void **state) {
	const VmPlanEntry e[] = { { "off", VM_STRATEGY_CHECKPOINT },
		                  { "a", VM_STRATEGY_CHECKPOINT } };
	VmPlan plan = { .entries = e, .n_entries = 2 };
	VmResults *r = NULL;

	define_domain("off", "", false);
	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	assert_int_equal(find(r, "off")->outcome, VM_OUTCOME_IGNORED);
	assert_int_equal(find(r, "off")->paused_at, 0);
	assert_int_equal(dom_state("off"), VIR_DOMAIN_SHUTOFF);
	assert_int_equal(dom_has_image("off"), 0);
	assert_int_equal(vm_restore_all(conn, NULL, r, NULL, NULL), 0);
	assert_int_equal(dom_state("off"), VIR_DOMAIN_SHUTOFF);
	assert_int_equal(dom_state("a"), VIR_DOMAIN_RUNNING);
	vm_results_free(r);
}

static void test_results_json_roundtrip(void **state) {
	VmPlan plan = { .entries = plan_ab, .n_entries = 3 };
	VmResults *r = NULL, *back = NULL;
	struct json_object *j, *j2;

	assert_int_equal(vm_checkpoint_all(conn, &plan, NULL, NULL, &r), 0);
	r->items[0].saved_bytes = 593920;
	j = vm_results_to_json(r);
	assert_int_equal(vm_results_from_json(j, &back), 0);
	assert_int_equal(back->n, 3);
	for (size_t i = 0; i < 3; i++) {
		assert_string_equal(back->items[i].name, r->items[i].name);
		assert_string_equal(back->items[i].uuid, r->items[i].uuid);
		assert_int_equal(back->items[i].strategy, r->items[i].strategy);
		assert_int_equal(back->items[i].outcome, r->items[i].outcome);
		assert_int_equal(back->items[i].orig_state, r->items[i].orig_state);
		assert_int_equal(back->items[i].paused_at, r->items[i].paused_at);
		assert_int_equal(back->items[i].save_time, r->items[i].save_time);
		assert_int_equal(back->items[i].saved_bytes, r->items[i].saved_bytes);
	}
	/* The record read back drives the restore, as after a real handoff. */
	assert_int_equal(vm_restore_all(conn, NULL, back, NULL, NULL), 0);
	assert_all_running_no_image();
	j2 = vm_results_to_json(back);
	assert_non_null(strstr(json_object_to_json_string_ext(j2, JSON_C_TO_STRING_PLAIN),
	                       "\"result\":\"resumed\""));
	assert_non_null(strstr(json_object_to_json_string_ext(j2, JSON_C_TO_STRING_PLAIN),
	                       "\"downtime\":"));
	assert_non_null(strstr(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN),
	                       "\"saved_bytes\":593920"));
	assert_non_null(strstr(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN),
	                       "\"resumed_at\":null"));
	json_object_put(j);
	json_object_put(j2);
	vm_results_free(r);
	vm_results_free(back);
}

static void test_results_json_malformed(void **state) {
	static const char *const bad[] = {
		"{}",
		"[1]",
		"[{}]",
		"[{\"name\":\"a\",\"uuid\":\"x\",\"strategy\":\"checkpoint\",\"result\":\"saved\","
		"\"original_state\":\"running\"}]",
		"[{\"name\":\"a\",\"uuid\":\"6695eb01-f6a4-8304-79aa-97f2502e193f\","
		"\"strategy\":\"teleport\",\"result\":\"saved\",\"original_state\":\"running\"}]",
		"[{\"name\":\"a\",\"uuid\":\"6695eb01-f6a4-8304-79aa-97f2502e193f\","
		"\"strategy\":\"keep-ram\",\"result\":\"saved\",\"original_state\":\"running\","
		"\"paused_at\":-5}]",
		"[{\"name\":\"a\",\"uuid\":\"6695eb01-f6a4-8304-79aa-97f2502e193f\","
		"\"strategy\":\"keep-ram\",\"result\":\"saved\",\"original_state\":\"running\","
		"\"paused_at\":\"soon\"}]",
		"[{\"name\":\"\",\"uuid\":\"6695eb01-f6a4-8304-79aa-97f2502e193f\","
		"\"strategy\":\"keep-ram\",\"result\":\"saved\",\"original_state\":\"running\"}]",
		"[{\"name\":\"a\",\"uuid\":\"6695eb01-f6a4-8304-79aa-97f2502e193f\","
		"\"strategy\":\"keep-ram\",\"result\":\"saved\",\"original_state\":\"running\"},"
		"{\"name\":\"a\",\"uuid\":\"6695eb01-f6a4-8304-79aa-97f2502e193f\","
		"\"strategy\":\"keep-ram\",\"result\":\"saved\",\"original_state\":\"running\"}]",
	};
	VmResults *r = (VmResults *)0x1;

	assert_int_equal(vm_results_from_json(NULL, &r), -EBADMSG);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct json_object *j = json_tokener_parse(bad[i]);

		assert_non_null(j);
		assert_int_equal(vm_results_from_json(j, &r), -EBADMSG);
		assert_ptr_equal(r, (VmResults *)0x1); /* untouched on failure */
		json_object_put(j);
	}
}

int main(void) {
	const struct CMUnitTest tests[] = {
		T(test_strategy_strings),          T(test_inventory_facts),
		T(test_checkpoint_restore_ok),     T(test_events_at_the_moment),
		T(test_events_not_on_failure),     T(test_checkpoint_bypass_cache),
		T(test_checkpoint_parallel_limit), T(test_null_arguments),
		T(test_checkpoint_bad_plan),       T(test_shutdown_strategy),
		T(test_not_running_is_ignored),    T(test_results_json_roundtrip),
		T(test_results_json_malformed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
