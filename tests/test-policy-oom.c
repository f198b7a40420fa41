/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Allocation failures: every allocation libpolicy makes itself is made to fail
 * in turn (-Wl,--wrap= on malloc, calloc, realloc, strdup, strndup, vasprintf).
 * Each must surface as -ENOMEM, never as success with missing data, a crash or a
 * leak (valgrind and ASan run this too). Allocations inside libinih, json-c and
 * libc are not covered.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "macros.h"
#include "policy.h"

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
int __real_vasprintf(char **ret, const char *fmt, va_list ap);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);
int __wrap_vasprintf(char **ret, const char *fmt, va_list ap);

static long fail_at = -1; /* index of the allocation to fail; -1: none */
static long n_allocs;

static bool fail_now(void) {
	return fail_at >= 0 && n_allocs++ == fail_at;
}

void *__wrap_malloc(size_t size) {
	return fail_now() ? NULL : __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size) {
	return fail_now() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t size) {
	return fail_now() ? NULL : __real_realloc(p, size);
}

char *__wrap_strdup(const char *s) {
	return fail_now() ? NULL : __real_strdup(s);
}

char *__wrap_strndup(const char *s, size_t n) {
	return fail_now() ? NULL : __real_strndup(s, n);
}

int __wrap_vasprintf(char **ret, const char *fmt, va_list ap) {
	return fail_now() ? -1 : __real_vasprintf(ret, fmt, ap);
}

/* Parse, finish, and take every decision; the first failure is returned. */
static int scenario(const char *text) {
	static const PolicyMetadata md[] = { { "role", "db" } };
	const VmFacts vf = { .name = "db-1",
		             .memory_bytes = 1 << 30,
		             .persistent = true,
		             .metadata = md,
		             .n_metadata = 1 };
	const HandoffFacts hf = { .digests_at_stage = true, .have_taint = true, .taint = 1 << 7 };
	Policy *p = NULL;
	PolicyErrors e = {};
	HandoffDecision hd = {};
	VmDecision vd = {};
	PolicyVerdict v = {};
	CommitFacts cf = { .staged = true };
	json_object *j = NULL;
	int r;

	r = policy_new_default(&p);
	if (r < 0)
		return r;
	r = policy_parse_buffer(p, "oom.conf", text, strlen(text), &e);
	if (r == 0)
		r = policy_finish(p, &e);
	if (r == 0)
		r = policy_decide_handoff(p, &hf, &hd);
	if (r == 0) {
		hd.handoff = HANDOFF_MODE_VERIFIED;
		r = policy_decide_vm(p, &vf, &vd);
	}
	if (r == 0) {
		cf.vms = &vd;
		cf.n_vms = 1;
		r = policy_check_commit(p, &cf, &v);
	}
	if (r == 0)
		r = policy_to_json(p, &j);
	json_object_put(j);
	policy_verdict_done(&v);
	policy_vm_decision_done(&vd);
	policy_handoff_decision_done(&hd);
	policy_errors_done(&e);
	policy_free(p);
	return r;
}

static void run_all_failures(const char *text, int expected) {
	long n;

	fail_at = -1;
	assert_int_equal(scenario(text), expected);
	for (n = 0;; n++) {
		int r;

		fail_at = n;
		n_allocs = 0;
		r = scenario(text);
		if (n_allocs <= n) /* ran to the end without reaching allocation n */
			break;
		if (r != -ENOMEM)
			fail_msg("allocation %ld failed, but the result was %d", n, r);
	}
	fail_at = -1;
	print_message("%ld allocations failed in turn\n", n);
	assert_true(n > 20);
}

static void test_oom_valid_config(void **state) {
	run_all_failures("[Handoff]\nMode=auto\nAllowFast=yes\nAllowTaint=O\n"
	                 "[Paths]\nAllowedRoots=/srv/a /srv/b\n"
	                 "[Commit]\nMaintenanceWindow=Sat 02:00-04:00\nFreeSpaceMargin=5%\n"
	                 "CheckpointDir=/srv/ckpt\nMaxVMs=\n"
	                 "[VMRule:db]\nName=db-* pg-*\nMetadata=role=db\nStrategy=keep-ram\n"
	                 "[VMRule:big]\nMemoryAbove=1G\nStrategy=shutdown\n",
	                 0);
}

static void test_oom_invalid_config(void **state) {
	run_all_failures("[Handoff]\ngarbage\nMode=quick\nMode=fast\n[Bogus]\nA=1\n"
	                 "[VMRule:x]\nName=a\n[Broken\nK=v\n",
	                 -EBADMSG);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_oom_valid_config),
		cmocka_unit_test(test_oom_invalid_config),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
