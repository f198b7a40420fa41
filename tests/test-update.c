/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "string-util.h"
#include "update.h"

static Update *make_update(void) {
	Update *u = update_new("0123456789abcdef");

	assert_non_null(u);
	u->state = UPDATE_COMMITTING;
	assert_int_equal(update_set_string(&u->phase, PHASE_HANDOFF), 0);
	u->progress = 90;
	assert_int_equal(update_set_string(&u->kernel.path, "/boot/vmlinuz-6.1"), 0);
	u->kernel.size = 123456789012ULL;
	u->kernel.mtime_usec = 1700000000123456ULL;
	memset(u->kernel.sha256, 'a', 64);
	assert_int_equal(update_set_string(&u->kernel_version, "6.1.0-57-cloud-amd64"), 0);
	assert_int_equal(update_set_string(&u->kernel_version_source, "file-name"), 0);
	assert_int_equal(update_set_string(&u->initrd.path, "/boot/initrd.img-6.1"), 0);
	u->initrd.size = 7;
	memset(u->initrd.sha256, 'b', 64);
	assert_int_equal(update_set_string(&u->cmdline, "root=/dev/vda1 \"quoted value\" é"), 0);
	u->reuse_cmdline = true;
	u->crash_image_loaded = true;
	assert_int_equal(update_set_string(&u->backend, "kexec_file"), 0);
	assert_int_equal(update_set_string(&u->old_kernel, "6.1.0-47-cloud-amd64"), 0);
	u->handoff = HANDOFF_MODE_VERIFIED;
	assert_int_equal(update_set_string(&u->handoff_boot_id, "0123456789abcdef0123456789abcdef"),
	                 0);
	assert_int_equal(strv_extend(&u->hooks_done, "pre:vm-checkpoint"), 0);
	assert_int_equal(update_add_stamp(u, "staged", false, "0123456789abcdef0123456789abcdef"),
	                 0);
	assert_int_equal(update_add_stamp(u, "handoff", true, NULL), 0);
	u->deferred = json_tokener_parse("{\"units\":[\"apt-daily.timer\"],"
	                                 "\"released_after\":\"restore\"}");
	assert_non_null(u->deferred);
	return u;
}

static char *to_string(const Update *u) {
	json_object *o;
	char *s;

	assert_int_equal(update_to_json(u, &o), 0);
	s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return s;
}

static void test_update_json_round_trip_is_lossless(void **state) {
	_cleanup_(update_freep) Update *u = make_update(), *v = NULL;
	_cleanup_free_ char *a = NULL, *b = NULL;

	assert_int_equal(update_copy(u, &v), 0);
	a = to_string(u);
	b = to_string(v);
	assert_string_equal(a, b);
	assert_int_equal(v->state, UPDATE_COMMITTING);
	assert_int_equal(v->kernel.size, 123456789012ULL);
	assert_int_equal(v->n_stamps, 2);
	assert_string_equal(v->stamps[0].boot_id, "0123456789abcdef0123456789abcdef");
	assert_true(update_hook_done(v, "pre:vm-checkpoint"));
	assert_false(update_hook_done(v, "post:vm-restore"));
	assert_true(v->reuse_cmdline && v->crash_image_loaded);
	assert_null(v->error);
	/* The deferred units the report names survive the record (deferred-units.h). */
	assert_non_null(v->deferred);
	assert_true(json_object_equal(u->deferred, v->deferred));
}

static void test_update_from_json_rejects_damaged_records(void **state) {
	static const char *const bad[] = {
		"{}",
		"[]",
		"{\"id\":\"xyz\"}",
		"{\"id\":\"0123456789abcdef\",\"state\":\"bogus\"}",
		"{\"id\":\"0123456789abcdef\",\"state\":\"staged\",\"phase\":\"staged\"}",
	};
	_cleanup_(update_freep) Update *u = make_update();
	json_object *o;

	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		Update *v = NULL;

		o = json_tokener_parse(bad[i]);
		assert_non_null(o);
		assert_int_equal(update_from_json(o, &v), -EBADMSG);
		assert_null(v);
		json_object_put(o);
	}

	/* A good record with one field of the wrong type. */
	assert_int_equal(update_to_json(u, &o), 0);
	json_object_object_add(o, "progress", json_object_new_string("ninety"));
	{
		Update *v = NULL;

		assert_int_equal(update_from_json(o, &v), -EBADMSG);
		assert_null(v);
	}
	json_object_put(o);
}

static void test_update_state_names(void **state) {
	for (int s = 0; s < _UPDATE_STATE_MAX; s++)
		assert_int_equal(update_state_from_string(update_state_to_string(s)), s);
	assert_int_equal(update_state_from_string("idle"), _UPDATE_STATE_INVALID);
	assert_null(update_state_to_string(_UPDATE_STATE_MAX));
	assert_true(update_state_is_terminal(UPDATE_DONE));
	assert_false(update_state_is_terminal(UPDATE_COMPLETING));
}

static void test_update_ids(void **state) {
	_cleanup_free_ char *a = NULL, *b = NULL;

	assert_int_equal(update_id_new(&a), 0);
	assert_int_equal(update_id_new(&b), 0);
	assert_true(update_id_is_valid(a));
	assert_string_not_equal(a, b);
	assert_false(update_id_is_valid("0123456789ABCDEF"));
	assert_false(update_id_is_valid("0123456789abcde"));
	assert_false(update_id_is_valid("../../etc/passwd"));
	assert_false(update_id_is_valid(NULL));
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_update_json_round_trip_is_lossless),
		cmocka_unit_test(test_update_from_json_rejects_damaged_records),
		cmocka_unit_test(test_update_state_names),
		cmocka_unit_test(test_update_ids),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
