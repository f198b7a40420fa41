/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What the configuration tests share: a temporary root with files below it.
 * Include after <cmocka.h>.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "macros.h"
#include "path-util.h"
#include "policy-internal.h"

static inline char *make_root(void) {
	char *root = strdup("/tmp/test-policy-XXXXXX");

	assert_non_null(root);
	assert_non_null(mkdtemp(root));
	return root;
}

static inline void write_at(const char *root, const char *path, const char *text) {
	_cleanup_free_ char *full = NULL, *dir = NULL;

	assert_int_equal(path_prefix_root(root, path, &full), 0);
	dir = strdup(full);
	*strrchr(dir, '/') = '\0';
	assert_int_equal(mkdir_p(dir, 0755), 0);
	assert_int_equal(write_file_atomic(full, text, strlen(text), 0644), 0);
}

static inline void rm_root(char *root) {
	_cleanup_free_ char *cmd = NULL;

	assert_true(asprintf(&cmd, "rm -rf '%s'", root) > 0);
	assert_int_equal(system(cmd), 0);
	free(root);
}

/* A policy parsed from text as a file named test.conf would be; fails the test if it does not
 * parse. */
static inline Policy *policy_from(const char *text) {
	Policy *p = NULL;
	PolicyErrors e = {};

	assert_int_equal(policy_new_default(&p), 0);
	if (policy_parse_buffer(p, "test.conf", text, strlen(text), &e) < 0 ||
	    policy_finish(p, &e) < 0) {
		policy_errors_print(&e, stdout);
		fail_msg("test configuration does not parse");
	}
	policy_errors_done(&e);
	return p;
}
