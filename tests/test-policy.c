/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The decisions: handoff, commit preconditions, reasons output (VM strategies:
 * test-policy-vm.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <string.h>

#include "macros.h"
#include "policy-internal.h"
#include "policy-test-util.h"

#define GiB (UINT64_C(1) << 30)

static const HandoffFacts all_safe = {
	.digests_at_stage = true,
	.files_unchanged = true,
	.memory_map_unchanged = true,
	.have_mce = true,
	.have_edac = true,
	.iommu_enabled = true,
	.have_taint = true,
};

/* ---------- handoff ---------- */

/* Facts from 11 bits, covering every safe/unsafe value of every condition. */
#define N_FACT_BITS 11
static HandoffFacts facts_from_bits(unsigned bits) {
	return (HandoffFacts){
		.digests_at_stage = bits & 1,
		.files_unchanged = bits & 2,
		.memory_map_unchanged = bits & 4,
		.have_mce = bits & 8,
		.mce_errors = (bits & 16) ? 3 : 0,
		.have_edac = bits & 32,
		.edac_errors = (bits & 64) ? 1 : 0,
		.iommu_enabled = bits & 128,
		.have_taint = bits & 512,
		.taint = (bits & 1024) ? (1u << 12) | (1u << 9) : 0, /* O and W */
	};
}

/* The rules of docs/policy.md, written out independently of policy.c. */
static bool expect_fast(const Policy *p, const HandoffFacts *f) {
	bool intact = f->digests_at_stage && f->files_unchanged && f->memory_map_unchanged;
	/* nothing known to be wrong; a count is only valid with its have_* flag */
	bool no_known_problem = !(f->have_mce && f->mce_errors > 0) &&
	                        !(f->have_edac && f->edac_errors > 0) && f->iommu_enabled &&
	                        !(f->have_taint && (f->taint & ~p->allow_taint) != 0);
	bool all_known = f->have_mce && f->have_edac && f->have_taint;

	if (!p->allow_fast)
		return false;
	switch (p->mode) {
	case POLICY_HANDOFF_MODE_VERIFIED:
		return false;
	case POLICY_HANDOFF_MODE_FAST:
		return intact && no_known_problem;
	case POLICY_HANDOFF_MODE_AUTO:
		return intact && no_known_problem && all_known;
	default:
		fail();
	}
	return false;
}

static void test_handoff_every_combination(void **state) {
	_cleanup_(policy_freep) Policy *p = policy_from("");
	unsigned fast[_POLICY_HANDOFF_MODE_MAX] = {};

	for (int mode = 0; mode < _POLICY_HANDOFF_MODE_MAX; mode++)
		for (int allow = 0; allow < 2; allow++)
			for (int at = 0; at < 2; at++)
				for (unsigned bits = 0; bits < (1u << N_FACT_BITS); bits++) {
					HandoffFacts f = facts_from_bits(bits);
					HandoffDecision d = {};
					bool want;

					p->mode = (PolicyHandoffMode)mode;
					p->allow_fast = allow;
					p->allow_taint = at ? (1u << 12) | (1u << 9) : 0;
					want = expect_fast(p, &f);
					assert_int_equal(policy_decide_handoff(p, &f, &d), 0);
					assert_int_equal(d.handoff, want ? HANDOFF_MODE_FAST
					                                 : HANDOFF_MODE_VERIFIED);
					assert_int_equal(d.mode, mode);
					assert_true(d.reasons.n > 0);
					fast[mode] += want;
					policy_handoff_decision_done(&d);
				}
	/* the oracle is not trivially false; fast is laxer than auto (unknown facts) */
	assert_int_equal(fast[POLICY_HANDOFF_MODE_VERIFIED], 0);
	assert_true(fast[POLICY_HANDOFF_MODE_AUTO] > 0);
	assert_true(fast[POLICY_HANDOFF_MODE_FAST] > fast[POLICY_HANDOFF_MODE_AUTO]);
}

static void test_handoff_zero_facts_never_fast(void **state) {
	_cleanup_(policy_freep) Policy *p = policy_from("[Handoff]\nMode=fast\nAllowFast=yes\n");
	HandoffFacts f = {};
	HandoffDecision d = {};

	assert_int_equal(policy_decide_handoff(p, &f, &d), 0);
	assert_int_equal(d.handoff, HANDOFF_MODE_VERIFIED);
	assert_true(policy_reasons_has(&d.reasons, "no-stage-digests"));
	assert_true(policy_reasons_has(&d.reasons, "files-changed"));
	policy_handoff_decision_done(&d);
	p->mode = POLICY_HANDOFF_MODE_AUTO;
	assert_int_equal(policy_decide_handoff(p, &f, &d), 0);
	assert_int_equal(d.handoff, HANDOFF_MODE_VERIFIED);
	assert_true(policy_reasons_has(&d.reasons, "mce-unknown"));
	assert_true(policy_reasons_has(&d.reasons, "taint-unknown"));
	policy_handoff_decision_done(&d);
}

/* The text of the reason CODE in r, or NULL. */
static const char *reason_text(const PolicyReasons *r, const char *code) {
	for (size_t i = 0; i < r->n; i++)
		if (streq(r->items[i].code, code))
			return r->items[i].text;
	return NULL;
}

/* The hardware facts' reasons name the architecture and why a count is unknown; the
 * codes are the same on x86_64 and arm64, and facts without an architecture (older
 * callers) keep the plain sentences. */
static void test_handoff_hardware_reasons_name_architecture(void **state) {
	_cleanup_(policy_freep) Policy *p = policy_from("[Handoff]\nMode=fast\nAllowFast=yes\n");
	HandoffFacts f = all_safe;
	HandoffDecision d = {};

	f.architecture = "arm64";
	f.have_mce = false;
	f.mce_unknown = "no firmware error source";
	f.have_edac = false;
	f.edac_unknown = "no EDAC driver";
	assert_int_equal(policy_decide_handoff(p, &f, &d), 0);
	assert_int_equal(d.handoff, HANDOFF_MODE_FAST); /* warnings under Mode=fast */
	assert_string_equal(reason_text(&d.reasons, "mce-unknown"),
	                    "The hardware error count (SEA, SError, RAS through APEI GHES) since "
	                    "boot is unknown on this arm64 host: no firmware error source");
	assert_string_equal(reason_text(&d.reasons, "edac-unknown"),
	                    "The EDAC memory error count since boot is unknown on this arm64 "
	                    "host: no EDAC driver");
	policy_handoff_decision_done(&d);

	f.have_mce = true;
	f.mce_errors = 2;
	f.have_edac = true;
	f.edac_errors = 1;
	assert_int_equal(policy_decide_handoff(p, &f, &d), 0);
	assert_int_equal(d.handoff, HANDOFF_MODE_VERIFIED);
	assert_string_equal(reason_text(&d.reasons, "mce-errors"),
	                    "2 hardware errors (SEA, SError, RAS through APEI GHES) logged since "
	                    "boot on this arm64 host");
	assert_string_equal(reason_text(&d.reasons, "memory-errors"),
	                    "1 memory error (EDAC) logged since boot on this arm64 host");
	policy_handoff_decision_done(&d);

	f.architecture = "x86_64";
	f.mce_errors = 1;
	assert_int_equal(policy_decide_handoff(p, &f, &d), 0);
	assert_string_equal(reason_text(&d.reasons, "mce-errors"),
	                    "1 machine-check error logged since boot on this x86_64 host");
	policy_handoff_decision_done(&d);

	f.architecture = NULL;
	f.have_mce = false;
	f.mce_unknown = NULL;
	assert_int_equal(policy_decide_handoff(p, &f, &d), 0);
	assert_string_equal(reason_text(&d.reasons, "mce-unknown"),
	                    "The machine-check error count since boot is unknown");
	policy_handoff_decision_done(&d);
}

/* One unsafe condition at a time, under auto and fast. */
static void spoil_handoff(HandoffFacts *f, size_t which) {
	switch (which) {
	case 0:
		f->digests_at_stage = false;
		break;
	case 1:
		f->files_unchanged = false;
		break;
	case 2:
		f->memory_map_unchanged = false;
		break;
	case 3:
		f->have_mce = false;
		break;
	case 4:
		f->mce_errors = 2;
		break;
	case 5:
		f->have_edac = false;
		break;
	case 6:
		f->edac_errors = 1;
		break;
	case 7:
		f->iommu_enabled = false;
		break;
	case 8:
		f->have_taint = false;
		break;
	case 9:
		f->taint = 1u << 7;
		break;
	default:
		fail();
	}
}

static void test_handoff_reason_codes(void **state) {
	/* in the order of spoil_handoff() */
	static const struct {
		const char *code;
		bool fast_mode_blocks; /* known problems block even Mode=fast */
	} cases[] = {
		{ "no-stage-digests", true },   { "files-changed", true },
		{ "memory-map-changed", true }, { "mce-unknown", false },
		{ "mce-errors", true },         { "edac-unknown", false },
		{ "memory-errors", true },      { "iommu-off", true },
		{ "taint-unknown", false },     { "taint", true },
	};
	_cleanup_(policy_freep) Policy *p = policy_from("[Handoff]\nAllowFast=yes\n");

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		HandoffFacts f = all_safe;
		HandoffDecision d = {};

		spoil_handoff(&f, i);
		p->mode = POLICY_HANDOFF_MODE_AUTO;
		assert_int_equal(policy_decide_handoff(p, &f, &d), 0);
		assert_int_equal(d.handoff, HANDOFF_MODE_VERIFIED);
		assert_true(policy_reasons_has(&d.reasons, cases[i].code));
		assert_int_equal(d.reasons.n, 1);
		assert_int_equal(d.reasons.items[0].severity, POLICY_REASON_BLOCKING);
		policy_handoff_decision_done(&d);

		p->mode = POLICY_HANDOFF_MODE_FAST;
		assert_int_equal(policy_decide_handoff(p, &f, &d), 0);
		assert_int_equal(d.handoff, cases[i].fast_mode_blocks ? HANDOFF_MODE_VERIFIED
		                                                      : HANDOFF_MODE_FAST);
		assert_true(policy_reasons_has(&d.reasons, cases[i].code));
		assert_int_equal(d.reasons.items[0].severity, cases[i].fast_mode_blocks
		                                                      ? POLICY_REASON_BLOCKING
		                                                      : POLICY_REASON_WARNING);
		policy_handoff_decision_done(&d);
	}
}

static void test_handoff_modes(void **state) {
	_cleanup_(policy_freep) Policy *p = policy_from("");
	HandoffFacts f = all_safe;
	HandoffDecision d = {};

	/* defaults: auto, but fast is not allowed on the host */
	assert_int_equal(policy_decide_handoff(p, &f, &d), 0);
	assert_int_equal(d.handoff, HANDOFF_MODE_VERIFIED);
	assert_true(policy_reasons_has(&d.reasons, "fast-not-allowed"));
	policy_handoff_decision_done(&d);

	p->allow_fast = true;
	assert_int_equal(policy_decide_handoff(p, &f, &d), 0);
	assert_int_equal(d.handoff, HANDOFF_MODE_FAST);
	assert_true(policy_reasons_has(&d.reasons, "all-conditions-hold"));
	policy_handoff_decision_done(&d);

	p->mode = POLICY_HANDOFF_MODE_VERIFIED;
	assert_int_equal(policy_decide_handoff(p, &f, &d), 0);
	assert_int_equal(d.handoff, HANDOFF_MODE_VERIFIED);
	assert_true(policy_reasons_has(&d.reasons, "mode-verified"));
	policy_handoff_decision_done(&d);

	p->mode = POLICY_HANDOFF_MODE_FAST;
	p->allow_fast = false;
	assert_int_equal(policy_decide_handoff(p, &f, &d), 0);
	assert_int_equal(d.handoff, HANDOFF_MODE_VERIFIED);
	assert_true(policy_reasons_has(&d.reasons, "fast-not-allowed"));
	policy_handoff_decision_done(&d);

	/* An IOMMU that does not translate (off, or passthrough) blocks fast, even under
	 * Mode=fast: nothing the daemon can know makes a device's DMA safe then. */
	p->mode = POLICY_HANDOFF_MODE_FAST;
	p->allow_fast = true;
	f.iommu_enabled = false;
	assert_int_equal(policy_decide_handoff(p, &f, &d), 0);
	assert_int_equal(d.handoff, HANDOFF_MODE_VERIFIED);
	assert_true(policy_reasons_has(&d.reasons, "iommu-off"));
	policy_handoff_decision_done(&d);
	p->mode = POLICY_HANDOFF_MODE_AUTO;
	f.iommu_enabled = true;

	/* an allowed taint flag does not block, another one does */
	f.taint = 1u << 12; /* O */
	p->allow_taint = 1u << 12;
	assert_int_equal(policy_decide_handoff(p, &f, &d), 0);
	assert_int_equal(d.handoff, HANDOFF_MODE_FAST);
	policy_handoff_decision_done(&d);
	f.taint |= 1u << 7; /* D */
	assert_int_equal(policy_decide_handoff(p, &f, &d), 0);
	assert_int_equal(d.handoff, HANDOFF_MODE_VERIFIED);
	assert_non_null(strstr(d.reasons.items[0].text, "(D,"));
	policy_handoff_decision_done(&d);

	assert_int_equal(policy_decide_handoff(NULL, &f, &d), -EINVAL);
	assert_int_equal(policy_decide_handoff(p, NULL, &d), -EINVAL);
	assert_int_equal(policy_decide_handoff(p, &f, NULL), -EINVAL);
}

/* ---------- commit ---------- */

static VmDecision vm(const char *name, PolicyVmStrategy s, uint64_t mem, bool refused) {
	return (VmDecision){
		.name = (char *)name, .strategy = s, .memory_bytes = mem, .refused = refused
	};
}

static void test_commit_preconditions(void **state) {
	static const char conf[] = "[Commit]\n"
	                           "MaintenanceWindow=Sat,Sun 02:00-04:00\n"
	                           "MaxVMs=3\n"
	                           "MaxVMMemory=32G\n"
	                           "FreeSpaceMargin=10%\n";
	const struct tm sat_0300 = { .tm_wday = 6, .tm_hour = 3, .tm_min = 0 };
	const struct tm sat_0400 = { .tm_wday = 6, .tm_hour = 4, .tm_min = 0 };
	const struct tm fri_0300 = { .tm_wday = 5, .tm_hour = 3, .tm_min = 0 };
	VmDecision two[] = { vm("a", POLICY_VM_CHECKPOINT, 10 * GiB, false),
		             vm("b", POLICY_VM_SHUTDOWN, 100 * GiB, false) };
	VmDecision refused[] = { vm("a", POLICY_VM_CHECKPOINT, 1 * GiB, true) };
	VmDecision four[] = { vm("a", POLICY_VM_CHECKPOINT, 1, false),
		              vm("b", POLICY_VM_KEEP_RAM, 1, false),
		              vm("c", POLICY_VM_CHECKPOINT, 1, false),
		              vm("d", POLICY_VM_KEEP_RAM, 1, false) };
	VmDecision heavy[] = { vm("a", POLICY_VM_KEEP_RAM, 20 * GiB, false),
		               vm("b", POLICY_VM_CHECKPOINT, 13 * GiB, false) };
	const CommitFacts good = { .vms = two,
		                   .n_vms = 2,
		                   .have_free_space = true,
		                   .checkpoint_free_bytes = 11 * GiB,
		                   .staged = true,
		                   .kernel_loaded = true,
		                   .staged_unchanged = true,
		                   .have_time = true,
		                   .now = sat_0300 };
	static const char *const cases[] = {
		NULL, /* allowed */
		"not-staged",
		"kernel-not-loaded",
		"staged-changed",
		"insufficient-space",
		"free-space-unknown",
		"outside-window",
		"outside-window",
		"time-unknown",
	};
	_cleanup_(policy_freep) Policy *p = policy_from(conf);

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		CommitFacts f = good;
		PolicyVerdict v = {};

		switch (i) {
		case 1:
			f.staged = false;
			break;
		case 2:
			f.kernel_loaded = false;
			break;
		case 3:
			f.staged_unchanged = false;
			break;
		case 4:
			f.checkpoint_free_bytes = 11 * GiB - 1;
			break;
		case 5:
			f.have_free_space = false;
			break;
		case 6:
			f.now = fri_0300;
			break;
		case 7:
			f.now = sat_0400;
			break;
		case 8:
			f.have_time = false;
			break;
		}
		assert_int_equal(policy_check_commit(p, &f, &v), 0);
		assert_int_equal(v.allowed, cases[i] == NULL);
		assert_true(policy_reasons_has(&v.reasons, cases[i] ?: "preconditions-met"));
		/* only the checkpointed VM counts for space; 10 GiB + 10% */
		assert_true(v.checkpoint_bytes == 10 * GiB);
		assert_true(v.required_bytes == 11 * GiB);
		policy_verdict_done(&v);
	}

	{
		CommitFacts f = good;
		PolicyVerdict v = {};

		f.vms = refused;
		f.n_vms = 1;
		assert_int_equal(policy_check_commit(p, &f, &v), 0);
		assert_false(v.allowed);
		assert_true(policy_reasons_has(&v.reasons, "vm-refused"));
		policy_verdict_done(&v);

		f.vms = four;
		f.n_vms = 4;
		assert_int_equal(policy_check_commit(p, &f, &v), 0);
		assert_false(v.allowed);
		assert_true(policy_reasons_has(&v.reasons, "too-many-vms"));
		policy_verdict_done(&v);
		f.n_vms = 3;
		assert_int_equal(policy_check_commit(p, &f, &v), 0);
		assert_true(v.allowed);
		policy_verdict_done(&v);

		f.vms = heavy;
		f.n_vms = 2;
		f.checkpoint_free_bytes = 100 * GiB;
		assert_int_equal(policy_check_commit(p, &f, &v), 0);
		assert_false(v.allowed);
		assert_true(policy_reasons_has(&v.reasons, "too-much-vm-memory"));
		assert_false(policy_reasons_has(&v.reasons, "insufficient-space"));
		policy_verdict_done(&v);

		/* several failures are all reported */
		f.staged = false;
		f.have_time = false;
		assert_int_equal(policy_check_commit(p, &f, &v), 0);
		assert_true(policy_reasons_has(&v.reasons, "not-staged"));
		assert_true(policy_reasons_has(&v.reasons, "time-unknown"));
		assert_true(policy_reasons_has(&v.reasons, "too-much-vm-memory"));
		assert_int_equal(v.reasons.n, 3);
		policy_verdict_done(&v);
	}
}

static void test_commit_margin_bytes_and_no_window(void **state) {
	_cleanup_(policy_freep) Policy *p = policy_from("[Commit]\nFreeSpaceMargin=1G\n");
	VmDecision one[] = { vm("a", POLICY_VM_CHECKPOINT, 3 * GiB, false) };
	CommitFacts f = { .vms = one,
		          .n_vms = 1,
		          .have_free_space = true,
		          .checkpoint_free_bytes = 4 * GiB,
		          .staged = true,
		          .kernel_loaded = true,
		          .staged_unchanged = true };
	PolicyVerdict v = {};

	/* no window configured: the time is not needed */
	assert_int_equal(policy_check_commit(p, &f, &v), 0);
	assert_true(v.allowed);
	assert_true(v.required_bytes == 4 * GiB);
	policy_verdict_done(&v);
	f.checkpoint_free_bytes--;
	assert_int_equal(policy_check_commit(p, &f, &v), 0);
	assert_false(v.allowed);
	policy_verdict_done(&v);

	/* no checkpoint at all: free space is irrelevant */
	one[0].strategy = POLICY_VM_SHUTDOWN;
	f.have_free_space = false;
	assert_int_equal(policy_check_commit(p, &f, &v), 0);
	assert_true(v.allowed);
	policy_verdict_done(&v);

	/* sizes that overflow saturate instead of wrapping into "enough" */
	one[0].strategy = POLICY_VM_CHECKPOINT;
	one[0].memory_bytes = UINT64_MAX - 10;
	f.have_free_space = true;
	f.checkpoint_free_bytes = UINT64_MAX - 1;
	assert_int_equal(policy_check_commit(p, &f, &v), 0);
	assert_false(v.allowed);
	assert_true(v.required_bytes == UINT64_MAX);
	policy_verdict_done(&v);

	f.vms = NULL;
	assert_int_equal(policy_check_commit(p, &f, &v), -EINVAL);
}

/* ---------- output ---------- */

static void test_reasons_json_and_text(void **state) {
	_cleanup_(policy_freep) Policy *p = policy_from("[Handoff]\nMode=fast\nAllowFast=yes\n");
	HandoffFacts f = all_safe;
	HandoffDecision d = {};
	json_object *j = NULL, *a, *r0, *v;
	_cleanup_free_ char *text = NULL;
	size_t size = 0;
	FILE *out;

	f.have_edac = false; /* no EDAC driver: Mode=fast accepts it with a warning */
	assert_int_equal(policy_decide_handoff(p, &f, &d), 0);
	assert_int_equal(d.handoff, HANDOFF_MODE_FAST);

	assert_int_equal(policy_handoff_decision_to_json(&d, &j), 0);
	assert_true(json_object_object_get_ex(j, "handoff", &v));
	assert_string_equal(json_object_get_string(v), "fast");
	assert_true(json_object_object_get_ex(j, "mode", &v));
	assert_string_equal(json_object_get_string(v), "fast");
	assert_true(json_object_object_get_ex(j, "reasons", &a));
	assert_int_equal(json_object_array_length(a), 2);
	r0 = json_object_array_get_idx(a, 0);
	assert_true(json_object_object_get_ex(r0, "code", &v));
	assert_string_equal(json_object_get_string(v), "edac-unknown");
	assert_true(json_object_object_get_ex(r0, "severity", &v));
	assert_string_equal(json_object_get_string(v), "warning");
	assert_true(json_object_object_get_ex(r0, "text", &v));
	assert_non_null(strstr(json_object_get_string(v), "EDAC"));
	json_object_put(j);

	out = open_memstream(&text, &size);
	assert_non_null(out);
	assert_int_equal(policy_reasons_format(&d.reasons, "  ", out), 0);
	fclose(out);
	assert_string_equal(text, "  warning: edac-unknown: The EDAC memory error count since boot "
	                          "is unknown\n"
	                          "  info: mode-fast: [Handoff] Mode=fast and nothing known blocks "
	                          "it\n");

	/* the JSON form, as upgradectl receives it, formats to the same text */
	{
		_cleanup_free_ char *text2 = NULL;
		json_object *rj = NULL, *bad;

		assert_int_equal(policy_reasons_to_json(&d.reasons, &rj), 0);
		out = open_memstream(&text2, &size);
		assert_int_equal(policy_reasons_format_json(rj, "  ", out), 0);
		fclose(out);
		assert_string_equal(text2, text);
		json_object_put(rj);

		bad = json_tokener_parse("[{\"code\":\"x\",\"severity\":\"info\"}]");
		assert_int_equal(policy_reasons_format_json(bad, "", stdout), -EBADMSG);
		json_object_put(bad);
		bad = json_tokener_parse("{\"code\":\"x\"}");
		assert_int_equal(policy_reasons_format_json(bad, "", stdout), -EBADMSG);
		json_object_put(bad);
		assert_int_equal(policy_reasons_format_json(NULL, "", stdout), -EBADMSG);
	}
	policy_handoff_decision_done(&d);
}

static void test_policy_json(void **state) {
	_cleanup_(policy_freep) Policy *p = policy_from("[Handoff]\nAllowTaint=O E\n"
	                                                "[Commit]\nMaintenanceWindow=Sat,Sun,Mon "
	                                                "22:00-24:00\nMaxVMs=4\n"
	                                                "FreeSpaceMargin=1G\n"
	                                                "[VMRule:r]\nName=a*\nStrategy=keep-ram\n"
	                                                "[Restore]\nDeferUntilRestored=\n"
	                                                "DeferUntilRestored=a.timer b*.service\n");
	_cleanup_(policy_freep) Policy *d = policy_from("");
	json_object *j = NULL;

	assert_int_equal(policy_to_json(p, &j), 0);
	assert_string_equal(
	        json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN |
	                                                  JSON_C_TO_STRING_NOSLASHESCAPE),
	        "{\"handoff\":{\"mode\":\"auto\",\"allow_fast\":false,\"allow_taint\":\"OE\","
	        "\"shutdown\":\"orderly\",\"kdump_initrd\":\"stage\"},"
	        "\"paths\":{\"allowed_roots\":[\"/boot\",\"/var/lib/upgraded/images\"]},"
	        "\"commit\":{\"maintenance_window\":\"Mon,Sat,Sun 22:00-24:00\",\"max_vms\":4,"
	        "\"max_vm_memory\":\"infinity\",\"checkpoint_dir\":\"/var/lib/libvirt/"
	        "qemu/save\","
	        "\"free_space_margin\":\"1073741824\"},"
	        "\"vm\":{\"default_strategy\":\"checkpoint\",\"shutdown_timeout_sec\":120,"
	        "\"pause_timeout_sec\":10,\"save_parallel\":2,\"keep_ram_digest\":\"mark\","
	        "\"keep_ram_fallback\":\"checkpoint\",\"sync_guest_clock\":true},"
	        "\"metrics\":{\"textfile_directory\":\"/var/lib/prometheus/node-exporter\"},"
	        "\"reports\":{\"keep\":100},"
	        "\"restore\":{\"defer_until_restored\":[\"a.timer\",\"b*.service\"]},"
	        "\"rules\":[{\"name\":\"r\",\"match_name\":[\"a*\"],\"match_metadata\":[],"
	        "\"strategy\":\"keep-ram\",\"memory_above\":null,\"memory_below\":null}]}");
	json_object_put(j);
	assert_int_equal(policy_to_json(d, &j), 0);
	assert_non_null(strstr(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN),
	                       "\"maintenance_window\":\"\",\"max_vms\":\"infinity\""));
	json_object_put(j);
	{
		_cleanup_(policy_freep) Policy *n = policy_from("[VM]\nKeepRamFallback=none\n");
		_cleanup_(policy_freep) Policy *b = policy_from("[VM]\nKeepRamFallback=\n");
		_cleanup_(policy_freep) Policy *nc = policy_from("[VM]\nSyncGuestClock=no\n");
		_cleanup_(policy_freep) Policy *bc = policy_from("[VM]\nSyncGuestClock=\n");

		_cleanup_(policy_freep) Policy *k = policy_from("[Reports]\nKeep=3\n");
		_cleanup_(policy_freep) Policy *ki = policy_from("[Reports]\nKeep=infinity\n");

		assert_int_equal(k->keep_reports, 3);
		assert_int_equal(ki->keep_reports, UINT64_MAX);
		assert_int_equal(d->keep_reports, POLICY_KEEP_REPORTS_DEFAULT);
		assert_false(n->keep_ram_fallback);
		assert_true(b->keep_ram_fallback); /* empty: back to the default */
		assert_true(d->keep_ram_fallback);
		assert_true(d->sync_guest_clock);
		assert_false(nc->sync_guest_clock);
		assert_true(bc->sync_guest_clock); /* empty: back to the default */
		assert_int_equal(policy_to_json(n, &j), 0);
		assert_non_null(strstr(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN),
		                       "\"keep_ram_fallback\":\"none\""));
		json_object_put(j);
	}
}

static void test_path_allowed(void **state) {
	_cleanup_(policy_freep) Policy *p = policy_from("[Paths]\nAllowedRoots=/srv/k\n");

	assert_true(policy_path_allowed(p, "/boot/vmlinuz-6.1.0-57-cloud-amd64"));
	assert_true(policy_path_allowed(p, "/var/lib/upgraded/images/a/b"));
	assert_true(policy_path_allowed(p, "/srv/k/vmlinuz"));
	assert_true(policy_path_allowed(p, "/srv/k"));
	assert_false(policy_path_allowed(p, "/srv/kernels/vmlinuz"));
	assert_false(policy_path_allowed(p, "/boot/../etc/shadow"));
	assert_false(policy_path_allowed(p, "boot/vmlinuz"));
	assert_false(policy_path_allowed(p, "/bootx/vmlinuz"));
	assert_false(policy_path_allowed(p, "/"));
	assert_false(policy_path_allowed(p, NULL));
	assert_false(policy_path_allowed(NULL, "/boot/x"));
}

static void test_names(void **state) {
	for (int i = 0; i < _POLICY_HANDOFF_MODE_MAX; i++)
		assert_int_equal(policy_handoff_mode_from_string(policy_handoff_mode_to_string(i)),
		                 i);
	for (int i = 0; i < _POLICY_VM_STRATEGY_MAX; i++)
		assert_int_equal(policy_vm_strategy_from_string(policy_vm_strategy_to_string(i)),
		                 i);
	assert_int_equal(policy_handoff_mode_from_string("Fast"), -1);
	assert_int_equal(policy_vm_strategy_from_string(NULL), -1);
	assert_null(policy_handoff_mode_to_string(_POLICY_HANDOFF_MODE_MAX));
	assert_null(handoff_mode_to_string(-1));
	assert_string_equal(handoff_mode_to_string(HANDOFF_MODE_FAST), "fast");
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_handoff_every_combination),
		cmocka_unit_test(test_handoff_zero_facts_never_fast),
		cmocka_unit_test(test_handoff_hardware_reasons_name_architecture),
		cmocka_unit_test(test_handoff_reason_codes),
		cmocka_unit_test(test_handoff_modes),
		cmocka_unit_test(test_commit_preconditions),
		cmocka_unit_test(test_commit_margin_bytes_and_no_window),
		cmocka_unit_test(test_reasons_json_and_text),
		cmocka_unit_test(test_policy_json),
		cmocka_unit_test(test_path_allowed),
		cmocka_unit_test(test_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
