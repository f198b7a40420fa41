/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <cmocka.h>

#include "macros.h"
#include "path-util.h"

static void test_path_is_normalized_accepts_clean_paths(void **state) {
	assert_true(path_is_normalized("/"));
	assert_true(path_is_normalized("/boot"));
	assert_true(path_is_normalized("/boot/vmlinuz-6.1.0-57-cloud-amd64"));
	assert_true(path_is_normalized("/a/..b/c."));
}

static void test_path_is_normalized_rejects_tricks(void **state) {
	assert_false(path_is_normalized(NULL));
	assert_false(path_is_normalized(""));
	assert_false(path_is_normalized("boot/vmlinuz"));
	assert_false(path_is_normalized("/boot/"));
	assert_false(path_is_normalized("/boot//vmlinuz"));
	assert_false(path_is_normalized("/boot/./vmlinuz"));
	assert_false(path_is_normalized("/boot/../etc/shadow"));
	assert_false(path_is_normalized("/boot/.."));
	assert_false(path_is_normalized("/."));
}

static void test_path_startswith_is_component_wise(void **state) {
	assert_string_equal(path_startswith("/boot/vmlinuz", "/boot"), "vmlinuz");
	assert_string_equal(path_startswith("/boot/vmlinuz", "/boot/"), "vmlinuz");
	assert_string_equal(path_startswith("/boot", "/boot"), "");
	assert_string_equal(path_startswith("/boot/a/b", "/"), "boot/a/b");
	assert_null(path_startswith("/bootx/vmlinuz", "/boot"));
	assert_null(path_startswith("/etc", "/boot"));
	assert_null(path_startswith("boot", "/boot"));
}

static void test_path_join_one_slash(void **state) {
	_cleanup_free_ char *a = NULL, *b = NULL, *c = NULL;

	assert_int_equal(path_join("/tmp/root/", "/var/lib", &a), 0);
	assert_string_equal(a, "/tmp/root/var/lib");
	assert_int_equal(path_join("/x", "y", &b), 0);
	assert_string_equal(b, "/x/y");
	assert_int_equal(path_join("/x", "", &c), 0);
	assert_string_equal(c, "/x");
	assert_int_equal(path_join(NULL, "y", &c), -EINVAL);
}

static void test_path_prefix_root(void **state) {
	_cleanup_free_ char *a = NULL, *b = NULL, *c = NULL;
	char *untouched = (char *)"sentinel";

	assert_int_equal(path_prefix_root(NULL, "/var/lib/upgraded", &a), 0);
	assert_string_equal(a, "/var/lib/upgraded");
	assert_int_equal(path_prefix_root("/", "/etc", &b), 0);
	assert_string_equal(b, "/etc");
	assert_int_equal(path_prefix_root("/tmp/t", "/run/upgraded", &c), 0);
	assert_string_equal(c, "/tmp/t/run/upgraded");
	/* Relative paths are refused and the output is left alone. */
	assert_int_equal(path_prefix_root("/tmp/t", "run", &untouched), -EINVAL);
	assert_string_equal(untouched, "sentinel");
}

static void test_path_is_below_any(void **state) {
	char *roots[] = { (char *)"/boot", (char *)"/var/lib/upgraded/images", NULL };

	assert_true(path_is_below_any("/boot/vmlinuz", roots));
	assert_true(path_is_below_any("/var/lib/upgraded/images/k", roots));
	assert_false(path_is_below_any("/var/lib/upgraded/state", roots));
	assert_false(path_is_below_any("/boot/../etc/shadow", roots));
	assert_false(path_is_below_any("/boot2/vmlinuz", roots));
	assert_false(path_is_below_any("/boot/x", NULL));
}

static void test_path_basename(void **state) {
	assert_string_equal(path_basename("/boot/vmlinuz"), "vmlinuz");
	assert_string_equal(path_basename("vmlinuz"), "vmlinuz");
	assert_null(path_basename("/"));
	assert_null(path_basename(NULL));
}

/* The test backends' guard: every spelling of "/" is the real root, a test root is not. */
static void test_path_is_real_root(void **state) {
	char dir[] = "/tmp/test-path-util.XXXXXX", link[sizeof(dir) + 8];

	assert_true(path_is_real_root(NULL));
	assert_true(path_is_real_root(""));
	assert_true(path_is_real_root("/"));
	assert_true(path_is_real_root("//"));
	assert_true(path_is_real_root("/./"));
	assert_true(path_is_real_root("/tmp/.."));
	assert_non_null(mkdtemp(dir));
	assert_false(path_is_real_root(dir));
	snprintf(link, sizeof(link), "%s/slash", dir);
	assert_int_equal(symlink("/", link), 0);
	assert_true(path_is_real_root(link));
	assert_int_equal(unlink(link), 0);
	assert_int_equal(rmdir(dir), 0);
	assert_false(path_is_real_root(dir)); /* gone: not the root */
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_path_is_normalized_accepts_clean_paths),
		cmocka_unit_test(test_path_is_normalized_rejects_tricks),
		cmocka_unit_test(test_path_startswith_is_component_wise),
		cmocka_unit_test(test_path_join_one_slash),
		cmocka_unit_test(test_path_prefix_root),
		cmocka_unit_test(test_path_is_below_any),
		cmocka_unit_test(test_path_basename),
		cmocka_unit_test(test_path_is_real_root),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
