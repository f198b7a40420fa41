/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The world the state machine tests run in (tests/test-context*.c): a test
 * root with a staged kernel and initrd, counting steps and kexec requests
 * that survive "crashes", and a daemon start (boot()) that loads and recovers
 * from disk as a restarted daemon would.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>

#include "context-private.h" /* the tests look inside the state machine */
#include "daemon-test-util.h"
#include "log.h"
#include "path-util.h"
#include "string-util.h"
#include "upgrade-bus.h"

#define OLD_KERNEL "6.1.0-47-cloud-amd64"
#define NEW_KERNEL "6.1.0-57-cloud-amd64"
#define KERNEL     "/boot/vmlinuz-" NEW_KERNEL
#define BOOT_A     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define BOOT_B     "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define BOOT_P     "cccccccccccccccccccccccccccccccc" /* the crash kernel's boot */

/* Counts that survive "crashes" (they model effects outside the daemon). */
typedef struct World {
	char *root;
	unsigned pre, rollback, post, requests;
	bool fail_pre, fail_request;
	unsigned crash_at; /* global persist step to crash after; 0: never */
	unsigned steps;
	bool crashed;
} World;

static inline int hook_pre(Context *c, Update *u, void *userdata, char **ret_reason) {
	World *w = userdata;

	if (w->fail_pre) {
		*ret_reason = strdup("VM 'db' refused to pause");
		return -EBUSY;
	}
	w->pre++;
	return 0;
}

static inline int hook_rollback(Context *c, Update *u, void *userdata, char **ret_reason) {
	((World *)userdata)->rollback++;
	return 0;
}

static inline int hook_post(Context *c, Update *u, void *userdata, char **ret_reason) {
	((World *)userdata)->post++;
	return 0;
}

static inline int request_kexec(Context *c, Update *u, void *userdata) {
	World *w = userdata;

	w->requests++;
	if (w->fail_request)
		return -ECONNREFUSED;
	context_handoff_result(c, u, 0, NULL);
	return 0;
}

static inline int crash_seam(Context *c, Update *u, unsigned step, void *userdata) {
	World *w = userdata;

	w->steps++;
	if (w->crash_at > 0 && w->steps == w->crash_at) {
		w->crashed = true;
		return -ECANCELED;
	}
	return 0;
}

/* A daemon start: new context on the world's root, records loaded, recovered. */
static Context *boot(World *w, const char *running, const char *boot_id, bool recover) {
	static const ContextStepVTable vm_step = {
		.name = "vms",
		.hooks = { [HOOK_PRE_HANDOFF] = { "vm-checkpoint", hook_pre },
		           [HOOK_ROLLBACK] = { "vm-resume", hook_rollback },
		           [HOOK_POST_BOOT] = { "vm-restore", hook_post } },
	};
	Context *c = NULL;
	int r;

	assert_int_equal(context_new(w->root, &kexec_backend_record, &c), 0);
	c->image_owner = getuid();
	free(c->running_kernel);
	c->running_kernel = strdup(running);
	memcpy(c->boot_id, boot_id, 33);
	assert_int_equal(context_add_step(c, CONTEXT_STEP_VMS, &vm_step, w), 0);
	c->ops.request_kexec = request_kexec;
	c->ops_userdata = w;
	c->persist_hook = crash_seam;
	c->persist_hook_userdata = w;
	assert_int_equal(context_load(c), 0);
	if (recover) {
		r = context_recover(c);
		assert_true(r >= 0 || r == -ECANCELED);
	}
	return c;
}

static inline int setup(void **state) {
	World *w = calloc(1, sizeof(*w));

	if (!w || !(w->root = test_mkroot()))
		return -1;
	if (test_write_bzimage(w->root, KERNEL, NEW_KERNEL, BZ_OK, 0644) < 0)
		return -1;
	if (test_write_file(w->root, "/boot/initrd.img", "initrd", 0644) < 0)
		return -1;
	*state = w;
	return 0;
}

static inline int teardown(void **state) {
	World *w = *state;

	test_rmroot(w->root);
	free(w);
	return 0;
}

static inline Update *stage(Context *c, sd_bus_error *e) {
	StageRequest req = { .kernel = KERNEL,
		             .initrd = "/boot/initrd.img",
		             .cmdline = "root=/dev/vda1 ro" };
	Update *u = NULL;

	assert_int_equal(context_stage(c, &req, &u, e), 0);
	return u;
}

static char *read_disk(World *w, const char *dir, const char *id) {
	_cleanup_free_ char *rel = NULL, *path = NULL;
	char *data = NULL;

	assert_true(asprintf(&rel, "/var/lib/upgraded/%s/%s.json", dir, id) > 0);
	assert_int_equal(path_prefix_root(w->root, rel, &path), 0);
	if (read_file_full(path, 1 << 20, &data, NULL) < 0)
		return NULL;
	return data;
}

/* The record on disk must say what memory says. */
static inline void assert_disk_matches(World *w, Context *c, Update *u) {
	_cleanup_free_ char *disk = read_disk(w, "updates", u->id);
	json_object *o = json_tokener_parse(disk), *m;
	Update *v = NULL;

	assert_non_null(o);
	assert_int_equal(update_from_json(o, &v), 0);
	assert_int_equal(update_to_json(u, &m), 0);
	assert_string_equal(json_object_to_json_string(o), json_object_to_json_string(m));
	json_object_put(o);
	json_object_put(m);
	update_free(v);
}

/* The report exists; test_rmroot() validates it (and every other report of the
 * root) against the schema when the test ends. */
static inline void assert_report_valid(World *w, const char *id) {
	_cleanup_free_ char *rel = NULL, *path = NULL;

	assert_true(asprintf(&rel, "/var/lib/upgraded/reports/%s.json", id) > 0);
	assert_int_equal(path_prefix_root(w->root, rel, &path), 0);
	assert_int_equal(access(path, R_OK), 0);
}
