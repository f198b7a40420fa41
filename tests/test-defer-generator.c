/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* upgraded-defer-generator: when it arms (the handoff mark), which units it names (lists,
 * globs, refused names) and exactly which files it writes, in a temporary root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#define _XOPEN_SOURCE_EXTENDED 1
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "defer-generator.h"
#include "defer-units.h"
#include "fileio.h"
#include "macros.h"
#include "string-util.h"

typedef struct Fixture {
	char root[64];
	char out[300];
	char cmdline[300];
} Fixture;

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
	return remove(path);
}

static void put(const Fixture *f, const char *rel, const char *text) {
	char path[512], *slash;

	snprintf(path, sizeof(path), "%s/%s", f->root, rel);
	slash = strrchr(path, '/');
	*slash = '\0';
	assert_int_equal(mkdir_p(path, 0755), 0);
	*slash = '/';
	assert_int_equal(write_file_atomic(path, text, strlen(text), 0644), 0);
}

static int setup(void **state) {
	Fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	strcpy(f->root, "/tmp/test-defer-generator-XXXXXX");
	assert_non_null(mkdtemp(f->root));
	snprintf(f->out, sizeof(f->out), "%s/run/systemd/generator", f->root);
	snprintf(f->cmdline, sizeof(f->cmdline), "%s/cmdline", f->root);
	/* Unit files as a Debian host has them, one overridden in /etc. */
	put(f, "lib/systemd/system/apt-daily.timer", "[Timer]\n");
	put(f, "lib/systemd/system/apt-daily-upgrade.timer", "[Timer]\n");
	put(f, "lib/systemd/system/apt-daily.service", "[Service]\n");
	put(f, "lib/systemd/system/fstrim.timer", "[Timer]\n");
	put(f, "lib/systemd/system/timers.target", "[Unit]\n");
	put(f, "etc/systemd/system/apt-daily.timer", "[Timer]\n");
	*state = f;
	return 0;
}

static int teardown(void **state) {
	Fixture *f = *state;

	nftw(f->root, remove_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

/* Every regular file under dir, relative to it, sorted, one per line. */
static char *listing(const char *dir) {
	char cmd[600], buf[4096] = "";
	FILE *p;
	size_t n;

	snprintf(cmd, sizeof(cmd), "cd '%s' 2>/dev/null && find . -type f | sort", dir);
	p = popen(cmd, "r");
	assert_non_null(p);
	n = fread(buf, 1, sizeof(buf) - 1, p);
	buf[n] = '\0';
	pclose(p);
	return strdup(buf);
}

static void test_defer_generator_armed_marker(void **state) {
	assert_true(defer_generator_armed("root=/dev/vda upgraded.handoff=1 upgraded.stamps=x"));
	assert_true(defer_generator_armed("upgraded.handoff=1"));
	/* An ordinary boot, the crash kernel, lookalikes and a quoted value: not armed. */
	assert_false(defer_generator_armed("root=/dev/vda quiet"));
	assert_false(defer_generator_armed("reset_devices upgraded.panic=1"));
	assert_false(defer_generator_armed("upgraded.handoff=10 xupgraded.handoff=1"));
	assert_false(defer_generator_armed("init=\"/bin/sh upgraded.handoff=1\""));
	assert_false(defer_generator_armed(""));
	assert_false(defer_generator_armed(NULL));
}

static void test_defer_generator_expand_lists_and_globs(void **state) {
	Fixture *f = *state;
	char *patterns[] = { "man-db.timer",      "apt-daily*.timer", "fstrim.timer",
		             "bad/../name.timer", "timers.target",    "-x.timer",
		             "man-db.timer",      "nothing-*.timer",  NULL };
	_cleanup_strv_free_ char **units = NULL;

	assert_int_equal(defer_generator_expand(f->root, patterns, &units), 0);
	/* Sorted, once each; the glob found the files in /lib and /etc once; a plain
	 * name stands even without a unit file; refused names and empty globs: none. */
	assert_int_equal(strv_length(units), 4);
	assert_string_equal(units[0], "apt-daily-upgrade.timer");
	assert_string_equal(units[1], "apt-daily.timer");
	assert_string_equal(units[2], "fstrim.timer");
	assert_string_equal(units[3], "man-db.timer");
}

static void test_defer_generator_expand_nothing(void **state) {
	Fixture *f = *state;
	char *patterns[] = { "nothing-*.service", "sshd.target", NULL };
	char **units = (char **)0x1;

	assert_int_equal(defer_generator_expand(f->root, patterns, &units), 0);
	assert_null(units);
	assert_int_equal(defer_generator_expand(f->root, NULL, &units), 0);
	assert_null(units);
}

static void test_defer_generator_write_exact_files(void **state) {
	Fixture *f = *state;
	char *units[] = { "apt-daily.timer", "man-db.timer", NULL };
	_cleanup_free_ char *files = NULL, *text = NULL, *path = NULL;

	assert_int_equal(defer_generator_write(f->out, units), 0);
	files = listing(f->out);
	assert_string_equal(files, "./apt-daily.timer.d/" DEFER_DROPIN_NAME "\n"
	                           "./man-db.timer.d/" DEFER_DROPIN_NAME "\n"
	                           "./" DEFER_WAIT_UNIT "\n");
	assert_true(asprintf(&path, "%s/apt-daily.timer.d/%s", f->out, DEFER_DROPIN_NAME) > 0);
	assert_int_equal(read_file_full(path, 4096, &text, NULL), 0);
	assert_non_null(strstr(text, "\nWants=" DEFER_WAIT_UNIT "\n"));
	assert_non_null(strstr(text, "\nAfter=" DEFER_WAIT_UNIT "\n"));
	free(path);
	free(text);
	assert_true(asprintf(&path, "%s/%s", f->out, DEFER_WAIT_UNIT) > 0);
	assert_int_equal(read_file_full(path, 4096, &text, NULL), 0);
	/* No ordering of its own (no cycle can go through it), waits for the release file,
	 * gives up in the end. */
	assert_non_null(strstr(text, "\nDefaultDependencies=no\n"));
	assert_null(strstr(text, "After="));
	assert_non_null(strstr(text, "[ -e " DEFER_RELEASE_FILE " ]"));
	assert_non_null(strstr(text, "\nTimeoutStartSec=" DEFER_WAIT_TIMEOUT "\n"));
}

static void test_defer_generator_write_nothing(void **state) {
	Fixture *f = *state;
	char *none[] = { NULL };

	assert_int_equal(defer_generator_write(f->out, none), 0);
	assert_int_equal(defer_generator_write(f->out, NULL), 0);
	assert_int_equal(access(f->out, F_OK), -1);
}

static void test_defer_generator_run_armed(void **state) {
	Fixture *f = *state;
	_cleanup_free_ char *files = NULL;

	put(f, "cmdline", "root=/dev/vda upgraded.handoff=1 upgraded.stamps=0\n");
	put(f, "etc/upgraded/upgraded.conf.d/defer.conf",
	    "[Restore]\nDeferUntilRestored=\nDeferUntilRestored=fstrim.timer lab-*.timer\n");
	assert_int_equal(defer_generator_run(f->root, f->cmdline, f->out), 1);
	files = listing(f->out);
	assert_string_equal(files,
	                    "./fstrim.timer.d/" DEFER_DROPIN_NAME "\n./" DEFER_WAIT_UNIT "\n");
}

static void test_defer_generator_run_default_list(void **state) {
	Fixture *f = *state;

	/* No configuration: the built-in list, Debian's housekeeping timers. */
	put(f, "cmdline", "upgraded.handoff=1");
	assert_int_equal(defer_generator_run(f->root, f->cmdline, f->out), 7);
	assert_int_equal(access(f->out, F_OK), 0);
}

static void test_defer_generator_run_not_armed(void **state) {
	Fixture *f = *state;

	/* An ordinary boot: nothing at all, whatever the configuration says. */
	put(f, "cmdline", "root=/dev/vda quiet\n");
	assert_int_equal(defer_generator_run(f->root, f->cmdline, f->out), 0);
	assert_int_equal(access(f->out, F_OK), -1);
	/* No command line to read: nothing. */
	assert_int_equal(defer_generator_run(f->root, "/nonexistent/cmdline", f->out), 0);
	assert_int_equal(access(f->out, F_OK), -1);
}

static void test_defer_generator_run_released_or_broken(void **state) {
	Fixture *f = *state;

	put(f, "cmdline", "upgraded.handoff=1");
	/* A broken configuration defers nothing: the boot stays as it would be. */
	put(f, "etc/upgraded/upgraded.conf.d/defer.conf",
	    "[Restore]\nDeferUntilRestored=x.target\n");
	assert_int_equal(defer_generator_run(f->root, f->cmdline, f->out), 0);
	assert_int_equal(access(f->out, F_OK), -1);
	/* A daemon-reload after the restore: the units run free again. */
	put(f, "etc/upgraded/upgraded.conf.d/defer.conf", "[Restore]\n");
	put(f, "run/upgraded/restored", "");
	assert_int_equal(defer_generator_run(f->root, f->cmdline, f->out), 0);
	assert_int_equal(access(f->out, F_OK), -1);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defer_generator_armed_marker),
		cmocka_unit_test_setup_teardown(test_defer_generator_expand_lists_and_globs, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_defer_generator_expand_nothing, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_defer_generator_write_exact_files, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_defer_generator_write_nothing, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_defer_generator_run_armed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_defer_generator_run_default_list, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_defer_generator_run_not_armed, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_defer_generator_run_released_or_broken, setup,
		                                teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
