/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "cli-json.h"
#include "json-util.h"
#include "macros.h"
#include "terminal.h"

static void check_key(const char *in, const char *want) {
	char out[64];

	cli_json_snake_key(in, out);
	assert_string_equal(out, want);
}

/* The keys Describe() has today, and the shapes a new property name could take. */
static void test_snake_key(void **state) {
	check_key("RunningKernel", "running_kernel");
	check_key("CrashKernelReserved", "crash_kernel_reserved");
	check_key("AllowedRoots", "allowed_roots");
	check_key("TestOnly", "test_only");
	check_key("State", "state");
	check_key("VMs", "vms");
	check_key("VMTransfers", "vm_transfers");
	check_key("KernelSha256", "kernel_sha256");
	check_key("PanicKernelID", "panic_kernel_id");
	/* snake_case is left alone. */
	check_key("old_kernel", "old_kernel");
	check_key("panic_from_phase", "panic_from_phase");
	check_key("x", "x");
	check_key("", "");
}

static bool all_snake(json_object *o) {
	if (json_object_is_type(o, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(o); i++)
			if (!all_snake(json_object_array_get_idx(o, i)))
				return false;
	} else if (json_object_is_type(o, json_type_object)) {
		json_object_object_foreach(o, k, v) {
			for (const char *p = k; *p; p++)
				if (*p >= 'A' && *p <= 'Z')
					return false;
			if (!all_snake(v))
				return false;
		}
	}
	return true;
}

/* Every key at every depth, inside arrays too; values (and nulls) untouched. */
static void test_snake_keys_deep(void **state) {
	_cleanup_(json_object_putp) json_object *o = json_tokener_parse(
	        "{\"State\":\"idle\",\"Backend\":{\"Name\":\"KeepMe\",\"Reason\":null,"
	        "\"CrashKernelReserved\":false},\"Updates\":[{\"id\":\"a\",\"vms\":[{\"Name\":"
	        "\"Web\"}]}],\"Big\":18446744073709551615}");
	_cleanup_(json_object_putp) json_object *s = NULL;
	json_object *b, *u;

	assert_non_null(o);
	s = cli_json_snake_keys(o);
	assert_non_null(s);
	assert_true(all_snake(s));
	assert_false(all_snake(o));
	assert_true(json_object_object_get_ex(s, "backend", &b));
	assert_string_equal(json_object_get_string(cli_jobj(b, "name")), "KeepMe");
	assert_true(json_object_object_get_ex(b, "reason", NULL));
	assert_null(cli_jobj(b, "reason"));
	u = json_object_array_get_idx(cli_jarray(s, "updates"), 0);
	assert_string_equal(cli_jstr(json_object_array_get_idx(cli_jarray(u, "vms"), 0), "name"),
	                    "Web");
	assert_int_equal(json_object_get_uint64(cli_jobj(s, "big")), UINT64_MAX);
	assert_null(cli_json_snake_keys(NULL));
}

static void test_json_format(void **state) {
	assert_int_equal(cli_json_format_from_string(NULL), CLI_JSON_SHORT);
	assert_int_equal(cli_json_format_from_string("short"), CLI_JSON_SHORT);
	assert_int_equal(cli_json_format_from_string("pretty"), CLI_JSON_PRETTY);
	assert_true(cli_json_format_from_string("") < 0);
	assert_true(cli_json_format_from_string("bogus") < 0);
	assert_true(cli_json_format_from_string("PRETTY") < 0);
}

/* $SYSTEMD_COLORS forces, $NO_COLOR and TERM=dumb turn off; a pipe (the test's output) is
 * not a terminal. */
static void test_colors(void **state) {
	unsetenv("SYSTEMD_COLORS");
	unsetenv("NO_COLOR");
	setenv("TERM", "xterm", 1);
	if (!isatty(STDOUT_FILENO)) {
		terminal_init();
		assert_string_equal(term_color(stdout, TERM_COLOR_RED), "");
	}
	setenv("SYSTEMD_COLORS", "1", 1);
	setenv("NO_COLOR", "1", 1);
	terminal_init();
	assert_string_equal(term_color(stdout, TERM_COLOR_RED), "\x1b[0;1;31m");
	assert_string_equal(term_normal(stderr), "\x1b[0m");
	assert_string_equal(term_color(stdout, TERM_COLOR_NONE), "");
	unsetenv("SYSTEMD_COLORS");
	terminal_init();
	assert_string_equal(term_color(stdout, TERM_COLOR_RED), "");
	unsetenv("NO_COLOR");
	setenv("SYSTEMD_COLORS", "0", 1);
	terminal_init();
	assert_string_equal(term_color(stderr, TERM_COLOR_GREEN), "");
	unsetenv("SYSTEMD_COLORS");
	setenv("TERM", "dumb", 1);
	terminal_init();
	assert_string_equal(term_normal(stdout), "");

	assert_int_equal(term_color_of_state("failed"), TERM_COLOR_RED);
	assert_int_equal(term_color_of_state("rolled-back"), TERM_COLOR_RED);
	assert_int_equal(term_color_of_state("cancelled"), TERM_COLOR_YELLOW);
	assert_int_equal(term_color_of_state("done"), TERM_COLOR_GREEN);
	assert_int_equal(term_color_of_state("staged"), TERM_COLOR_NONE);
	assert_int_equal(term_color_of_state(NULL), TERM_COLOR_NONE);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_snake_key),
		cmocka_unit_test(test_snake_keys_deep),
		cmocka_unit_test(test_json_format),
		cmocka_unit_test(test_colors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
