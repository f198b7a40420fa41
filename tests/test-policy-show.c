/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* `upgraded --check-config --show`: the settings in effect and where each came from
 * (policy_show(), policy_origin()), and the warning about a missing configuration directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "macros.h"
#include "path-util.h"
#include "policy-internal.h"
#include "policy-test-util.h"
#include "string-util.h"

/* The line of out that starts with "KEY=VALUE" (then blanks, "# ", the origin). */
static void assert_shown(const char *out, const char *assignment, const char *origin) {
	_cleanup_free_ char *want_start = NULL;
	const char *l;
	char *end;

	assert_true(asprintf(&want_start, "\n%s ", assignment) > 0);
	l = strstr(out, want_start);
	if (!l)
		fail_msg("no line '%s' in:\n%s", assignment, out);
	l = strstr(l + 1, "# ");
	assert_non_null(l);
	end = strchr(l, '\n');
	assert_non_null(end);
	if ((size_t)(end - l - 2) != strlen(origin) || strncmp(l + 2, origin, strlen(origin)) != 0)
		fail_msg("'%s' came from '%.*s', expected '%s'", assignment, (int)(end - l - 2),
		         l + 2, origin);
}

static void test_show_origins(void **state) {
	char *root = make_root();
	_cleanup_free_ char *out = NULL, *main_conf = NULL, *dropin = NULL, *where = NULL;
	Policy *p = NULL;
	size_t size;
	FILE *f;

	write_at(root, "/etc/upgraded/upgraded.conf",
	         "[Handoff]\nMode=verified\nAllowTaint=O\n[VM]\nSaveParallel=3\n"
	         "[VMRule:db]\nName=db-*\nStrategy=shutdown\n");
	/* the drop-in overrides one key and appends to a list */
	write_at(root, "/etc/upgraded/upgraded.conf.d/50-site.conf",
	         "[VM]\nSaveParallel=4\n\n[Handoff]\nAllowTaint=E\n[Paths]\nAllowedRoots=\n"
	         "AllowedRoots=/srv/k\n");
	assert_true(asprintf(&main_conf, "%s/etc/upgraded/upgraded.conf", root) > 0);
	assert_true(asprintf(&dropin, "%s/etc/upgraded/upgraded.conf.d/50-site.conf", root) > 0);
	assert_int_equal(policy_load(root, &p, NULL), 0);

	assert_string_equal(policy_origin(p, "Handoff", "AllowFast"), "default");
	assert_true(asprintf(&where, "%s:2", main_conf) > 0);
	assert_string_equal(policy_origin(p, "Handoff", "Mode"), where);

	f = open_memstream(&out, &size);
	assert_int_equal(policy_show(p, f), 0);
	fclose(f);
	free(where);
	assert_true(asprintf(&where, "%s:2", dropin) > 0);
	assert_shown(out, "SaveParallel=4", where);
	free(where);
	assert_true(asprintf(&where, "%s:2", main_conf) > 0);
	assert_shown(out, "Mode=verified", where);
	free(where);
	assert_true(asprintf(&where, "default, %s:3, %s:5", main_conf, dropin) > 0);
	assert_shown(out, "AllowTaint=OE", where);
	free(where);
	/* an empty assignment clears the defaults: it and the line after it are the origin */
	assert_true(asprintf(&where, "%s:7, %s:8", dropin, dropin) > 0);
	assert_shown(out, "AllowedRoots=/srv/k", where);
	free(where);
	assert_shown(out, "AllowFast=no", "default");
	assert_shown(out, "Keep=100", "default");
	assert_shown(out, "MemoryBackingDir=", "default");
	assert_non_null(strstr(out, "\n[VMRule:db]\n"));
	assert_true(asprintf(&where, "%s:7", main_conf) > 0);
	assert_shown(out, "Name=db-*", where);
	/* the files read, in order */
	free(where);
	assert_true(asprintf(&where, "# Read: %s\n# Read: %s\n", main_conf, dropin) > 0);
	assert_non_null(strstr(out, where));
	policy_free(p);
	rm_root(root);
}

static void test_show_defaults_and_missing_dir(void **state) {
	char *root = make_root();
	_cleanup_free_ char *out = NULL, *err = NULL, *want = NULL;
	size_t size, esize;
	FILE *f, *e;

	f = open_memstream(&out, &size);
	e = open_memstream(&err, &esize);
	/* no /etc/upgraded: valid (the defaults), but said on the error stream */
	assert_int_equal(policy_check_config(root, true, f, e), 0);
	fclose(f);
	fclose(e);
	assert_true(asprintf(&want, "warning: configuration directory %s/etc/upgraded: ", root) >
	            0);
	assert_non_null(strstr(err, want));
	assert_non_null(strstr(out, "# No file read: every setting is the default."));
	assert_shown(out, "Mode=auto", "default");
	assert_shown(out, "AllowedRoots=/boot /var/lib/upgraded/images", "default");
	assert_non_null(strstr(out, "configuration OK"));
	free(out);
	free(err);
	out = err = NULL;

	/* with the directory: no warning */
	write_at(root, "/etc/upgraded/upgraded.conf", "# nothing set\n");
	f = open_memstream(&out, &size);
	e = open_memstream(&err, &esize);
	assert_int_equal(policy_check_config(root, false, f, e), 0);
	fclose(f);
	fclose(e);
	assert_string_equal(err, "");
	assert_string_equal(out, "configuration OK\n");
	rm_root(root);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_show_origins),
		cmocka_unit_test(test_show_defaults_and_missing_dir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
