/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The daemon's side of the deferred units: it names exactly the units holding the
 * generator's drop-in (for the report) and releases them once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "defer-units.h"
#include "deferred-units.h"
#include "fileio.h"
#include "macros.h"

static void test_deferred_units_list_and_release(void **state) {
	char root[] = "/tmp/test-deferred-units-XXXXXX", path[512], cmd[600];
	static const char *const units[] = { "man-db.timer", "apt-daily.timer" };
	json_object *a = NULL;

	assert_non_null(mkdtemp(root));
	/* A boot that held nothing back: an empty list, no generator directory needed. */
	assert_int_equal(deferred_units_list(root, &a), 0);
	assert_int_equal(json_object_array_length(a), 0);
	json_object_put(a);

	/* What the generator writes, next to a drop-in of someone else's. */
	for (size_t i = 0; i < ELEMENTSOF(units); i++) {
		snprintf(path, sizeof(path), "%s" DEFER_GENERATOR_DIR "/%s.d", root, units[i]);
		assert_int_equal(mkdir_p(path, 0755), 0);
		strcat(path, "/" DEFER_DROPIN_NAME);
		assert_int_equal(write_file_atomic(path, "", 0, 0644), 0);
	}
	snprintf(path, sizeof(path), "%s" DEFER_GENERATOR_DIR "/other.service.d/x.conf", root);
	assert_int_equal(mkdir_p(path, 0755), 0);
	assert_int_equal(deferred_units_list(root, &a), 0);
	assert_string_equal(json_object_to_json_string_ext(a, JSON_C_TO_STRING_PLAIN),
	                    "[\"apt-daily.timer\",\"man-db.timer\"]");
	json_object_put(a);

	/* The release: created once, then already there. */
	snprintf(path, sizeof(path), "%s" DEFER_RELEASE_FILE, root);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(deferred_units_release(root), 1);
	assert_int_equal(access(path, F_OK), 0);
	assert_int_equal(deferred_units_release(root), 0);

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_deferred_units_list_and_release),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
