/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The VM decisions: rules and their matching, strategies, invalid rules, the VM verdict JSON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <string.h>

#include "macros.h"
#include "policy-internal.h"
#include "policy-test-util.h"

#define GiB (UINT64_C(1) << 30)

static const char rules_conf[] = "[VM]\n"
                                 "DefaultStrategy=checkpoint\n"
                                 "[VMRule:gpu]\n"
                                 "Metadata=role=gpu\n"
                                 "Strategy=shutdown\n"
                                 "[VMRule:scratch]\n"
                                 "Name=ci-* scratch-?\n"
                                 "Strategy=ignore\n"
                                 "[VMRule:huge]\n"
                                 "MemoryAbove=64G\n"
                                 "Strategy=shutdown\n"
                                 "[VMRule:small-db]\n"
                                 "Name=db-*\n"
                                 "Metadata=tier=gold\n"
                                 "Metadata=site=a\n"
                                 "MemoryBelow=4G\n"
                                 "Strategy=keep-ram\n";

static void test_vm_rules(void **state) {
	static const PolicyMetadata gpu[] = { { "role", "gpu" } };
	static const PolicyMetadata gold_a[] = { { "tier", "gold" }, { "site", "a" } };
	static const PolicyMetadata gold_b[] = { { "tier", "gold" }, { "site", "b" } };
	static const PolicyMetadata role_gpux[] = { { "role", "gpux" }, { "rolex", "gpu" } };
	static const struct {
		VmFacts facts;
		PolicyVmStrategy strategy;
		const char *rule;
		bool refused;
		const char *code;
	} cases[] = {
		/* no rule: the default */
		{ { .name = "web-1", .memory_bytes = 2 * GiB, .persistent = true },
		  POLICY_VM_CHECKPOINT,
		  NULL,
		  false,
		  "default-strategy" },
		/* metadata match beats later rules; exact key and value */
		{ { .name = "ci-gpu",
		    .memory_bytes = 128 * GiB,
		    .persistent = true,
		    .metadata = gpu,
		    .n_metadata = 1 },
		  POLICY_VM_SHUTDOWN,
		  "gpu",
		  false,
		  "rule" },
		{ { .name = "web-2", .persistent = true, .metadata = role_gpux, .n_metadata = 2 },
		  POLICY_VM_CHECKPOINT,
		  NULL,
		  false,
		  "default-strategy" },
		/* any of several globs */
		{ { .name = "ci-42", .persistent = true },
		  POLICY_VM_IGNORE,
		  "scratch",
		  false,
		  "vm-lost" },
		{ { .name = "scratch-7", .persistent = true },
		  POLICY_VM_IGNORE,
		  "scratch",
		  false,
		  "rule" },
		{ { .name = "scratch-77", .persistent = true },
		  POLICY_VM_CHECKPOINT,
		  NULL,
		  false,
		  NULL },
		/* memory: strictly above */
		{ { .name = "big", .memory_bytes = 64 * GiB, .persistent = true },
		  POLICY_VM_CHECKPOINT,
		  NULL,
		  false,
		  NULL },
		{ { .name = "big", .memory_bytes = 64 * GiB + 1, .persistent = true },
		  POLICY_VM_SHUTDOWN,
		  "huge",
		  false,
		  NULL },
		/* every condition of a rule must hold */
		{ { .name = "db-1",
		    .memory_bytes = 2 * GiB,
		    .memory_preserved = true,
		    .metadata = gold_a,
		    .n_metadata = 2 },
		  POLICY_VM_KEEP_RAM,
		  "small-db",
		  false,
		  "rule" },
		{ { .name = "db-1",
		    .memory_bytes = 2 * GiB,
		    .persistent = true,
		    .metadata = gold_b,
		    .n_metadata = 2 },
		  POLICY_VM_CHECKPOINT,
		  NULL,
		  false,
		  NULL },
		{ { .name = "db-1",
		    .memory_bytes = 4 * GiB,
		    .persistent = true,
		    .metadata = gold_a,
		    .n_metadata = 2 },
		  POLICY_VM_CHECKPOINT,
		  NULL,
		  false,
		  NULL },
		/* refusals */
		{ { .name = "nic-pt", .has_hostdev = true, .persistent = true },
		  POLICY_VM_CHECKPOINT,
		  NULL,
		  true,
		  "hostdev-checkpoint" },
		{ { .name = "db-1", .memory_bytes = 1 * GiB, .metadata = gold_a, .n_metadata = 2 },
		  POLICY_VM_KEEP_RAM,
		  "small-db",
		  true,
		  "keep-ram-memory-lost" },
		{ { .name = "db-1",
		    .memory_bytes = 1 * GiB,
		    .memory_preserved = true,
		    .has_hostdev = true,
		    .metadata = gold_a,
		    .n_metadata = 2 },
		  POLICY_VM_KEEP_RAM,
		  "small-db",
		  true,
		  "hostdev-keep-ram" },
		{ { .name = "ci-gpu", .metadata = gpu, .n_metadata = 1 },
		  POLICY_VM_SHUTDOWN,
		  "gpu",
		  true,
		  "transient-shutdown" },
		/* a passed-through device is fine for shutdown */
		{ { .name = "ci-gpu",
		    .has_hostdev = true,
		    .persistent = true,
		    .metadata = gpu,
		    .n_metadata = 1 },
		  POLICY_VM_SHUTDOWN,
		  "gpu",
		  false,
		  NULL },
	};
	_cleanup_(policy_freep) Policy *p = policy_from(rules_conf);

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		VmDecision d = {};

		print_message("case %zu: %s\n", i, cases[i].facts.name);
		assert_int_equal(policy_decide_vm(p, &cases[i].facts, &d), 0);
		assert_string_equal(d.name, cases[i].facts.name);
		assert_int_equal(d.strategy, cases[i].strategy);
		if (cases[i].rule)
			assert_string_equal(d.rule, cases[i].rule);
		else
			assert_null(d.rule);
		assert_int_equal(d.refused, cases[i].refused);
		assert_true(d.memory_bytes == cases[i].facts.memory_bytes);
		if (cases[i].code)
			assert_true(policy_reasons_has(&d.reasons, cases[i].code));
		policy_vm_decision_done(&d);
	}
}

static void test_vm_pause_needs_preserved_memory(void **state) {
	/* pause is refused on a stock kernel, for every VM shape */
	_cleanup_(policy_freep) Policy *p = policy_from("[VM]\nDefaultStrategy=keep-ram\n");

	for (unsigned bits = 0; bits < 8; bits++) {
		VmFacts f = { .name = "v",
			      .has_hostdev = bits & 1,
			      .persistent = bits & 2,
			      .memory_bytes = (bits & 4) ? 512 * GiB : 0 };
		VmDecision d = {};

		assert_int_equal(policy_decide_vm(p, &f, &d), 0);
		assert_int_equal(d.strategy, POLICY_VM_KEEP_RAM);
		assert_true(d.refused);
		assert_true(policy_reasons_has(&d.reasons, "keep-ram-memory-lost"));
		policy_vm_decision_done(&d);
		f.memory_preserved = true;
		assert_int_equal(policy_decide_vm(p, &f, &d), 0);
		assert_int_equal(d.refused, f.has_hostdev);
		policy_vm_decision_done(&d);
	}
}

static void test_vm_invalid(void **state) {
	_cleanup_(policy_freep) Policy *p = policy_from("");
	VmFacts f = { .name = NULL };
	VmDecision d = { .strategy = 77 };

	assert_int_equal(policy_decide_vm(p, &f, &d), -EINVAL);
	f.name = "x";
	f.n_metadata = 1;
	assert_int_equal(policy_decide_vm(p, &f, &d), -EINVAL);
	assert_int_equal(d.strategy, 77); /* untouched */
}

static void test_vm_and_verdict_json(void **state) {
	_cleanup_(policy_freep) Policy *p = policy_from(rules_conf);
	VmFacts f = { .name = "ci-1", .memory_bytes = 5, .persistent = true };
	VmDecision d = {};
	PolicyVerdict verdict = {};
	CommitFacts cf = { .n_vms = 1 };
	json_object *j = NULL, *v;

	assert_int_equal(policy_decide_vm(p, &f, &d), 0);
	assert_int_equal(policy_vm_decision_to_json(&d, &j), 0);
	assert_string_equal(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN),
	                    "{\"name\":\"ci-1\",\"strategy\":\"ignore\",\"refused\":false,"
	                    "\"memory_bytes\":5,\"rule\":\"scratch\",\"reasons\":["
	                    "{\"code\":\"rule\",\"severity\":\"info\",\"text\":\"Rule "
	                    "[VMRule:scratch] matched VM 'ci-1': ignore\"},"
	                    "{\"code\":\"vm-lost\",\"severity\":\"warning\",\"text\":\"VM 'ci-1' "
	                    "is left alone: it stops with the old kernel\"}]}");
	json_object_put(j);
	policy_vm_decision_done(&d);

	f.name = "other";
	assert_int_equal(policy_decide_vm(p, &f, &d), 0);
	assert_int_equal(policy_vm_decision_to_json(&d, &j), 0);
	assert_true(json_object_object_get_ex(j, "rule", &v));
	assert_null(v);
	json_object_put(j);

	cf.vms = &d;
	assert_int_equal(policy_check_commit(p, &cf, &verdict), 0);
	assert_int_equal(policy_verdict_to_json(&verdict, &j), 0);
	assert_true(json_object_object_get_ex(j, "allowed", &v));
	assert_false(json_object_get_boolean(v));
	assert_true(json_object_object_get_ex(j, "checkpoint_bytes", &v));
	assert_int_equal(json_object_get_int64(v), 5);
	json_object_put(j);
	policy_verdict_done(&verdict);
	policy_vm_decision_done(&d);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vm_rules),
		cmocka_unit_test(test_vm_pause_needs_preserved_memory),
		cmocka_unit_test(test_vm_invalid),
		cmocka_unit_test(test_vm_and_verdict_json),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
