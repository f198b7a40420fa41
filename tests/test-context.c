/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The state machine without a bus: stage, commit, cancel, recovery after a
 * restart or a kexec, and a crash after every single persisted step.
 * "Crash" = the persist seam makes the running operation stop right after a
 * record hit the disk; the context is dropped and a new one loads and recovers
 * from disk, as a restarted daemon would.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>

#include "context.h"
#include "daemon-test-util.h"
#include "log.h"
#include "path-util.h"
#include "string-util.h"
#include "upgrade-errors.h"

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

static int hook_pre(Context *c, Update *u, void *userdata, char **ret_reason) {
	World *w = userdata;

	if (w->fail_pre) {
		*ret_reason = strdup("VM 'db' refused to pause");
		return -EBUSY;
	}
	w->pre++;
	return 0;
}

static int hook_rollback(Context *c, Update *u, void *userdata, char **ret_reason) {
	((World *)userdata)->rollback++;
	return 0;
}

static int hook_post(Context *c, Update *u, void *userdata, char **ret_reason) {
	((World *)userdata)->post++;
	return 0;
}

static int request_kexec(Context *c, Update *u, void *userdata) {
	World *w = userdata;

	w->requests++;
	if (w->fail_request)
		return -ECONNREFUSED;
	context_handoff_result(c, u, 0, NULL);
	return 0;
}

static int crash_seam(Context *c, Update *u, unsigned step, void *userdata) {
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
	Context *c = NULL;
	int r;

	assert_int_equal(context_new(w->root, &kexec_backend_record, &c), 0);
	c->image_owner = getuid();
	free(c->running_kernel);
	c->running_kernel = strdup(running);
	memcpy(c->boot_id, boot_id, 33);
	assert_int_equal(context_add_hook(c, HOOK_PRE_HANDOFF, "vm-checkpoint", hook_pre, w), 0);
	assert_int_equal(context_add_hook(c, HOOK_ROLLBACK, "vm-resume", hook_rollback, w), 0);
	assert_int_equal(context_add_hook(c, HOOK_POST_BOOT, "vm-restore", hook_post, w), 0);
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

static int setup(void **state) {
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

static int teardown(void **state) {
	World *w = *state;

	test_rmroot(w->root);
	free(w);
	return 0;
}

static Update *stage(Context *c, sd_bus_error *e) {
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
static void assert_disk_matches(World *w, Context *c, Update *u) {
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

static void assert_report_valid(World *w, const char *id) {
	_cleanup_free_ char *rel = NULL, *path = NULL, *cmd = NULL;

	assert_true(asprintf(&rel, "/var/lib/upgraded/reports/%s.json", id) > 0);
	assert_int_equal(path_prefix_root(w->root, rel, &path), 0);
	assert_int_equal(access(path, R_OK), 0);
	assert_true(asprintf(&cmd, "python3 '%s' '%s' '%s'", VALIDATE_REPORT, REPORT_SCHEMA, path) >
	            0);
	assert_int_equal(system(cmd), 0);
}

static void test_context_stage_commit_complete(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_free_ char *id = NULL, *report = NULL;
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	Update *u;

	assert_string_equal(context_state(c), "idle");
	u = stage(c, &e);
	id = strdup(u->id);
	assert_string_equal(context_state(c), "staged");
	assert_string_equal(u->kernel_version, NEW_KERNEL);
	assert_string_equal(u->old_kernel, OLD_KERNEL);
	assert_int_equal(kexec_backend_record.is_loaded(w->root, 0), 1);
	assert_disk_matches(w, c, u);

	assert_int_equal(context_commit_begin(c, "", &u, &e), 0);
	assert_string_equal(u->phase, PHASE_PRE_HANDOFF);
	assert_string_equal(u->handoff, "verified");
	assert_disk_matches(w, c, u);
	assert_int_equal(context_commit_run(c, u), 0);
	assert_string_equal(u->phase, PHASE_HANDOFF_REQUESTED);
	assert_int_equal(w->pre, 1);
	assert_int_equal(w->requests, 1);
	assert_non_null(update_find_stamp(u, "handoff"));
	assert_true(update_find_stamp(u, "commit-requested")->tsc != 0);
	assert_disk_matches(w, c, u);
	/* No report before the new kernel has confirmed. */
	assert_int_equal(context_get_report(c, id, &report, &e), -EIO);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_NO_SUCH_REPORT));
	sd_bus_error_free(&e);
	context_free(c);

	/* The new kernel boots; the daemon starts. */
	c = boot(w, NEW_KERNEL, BOOT_B, true);
	u = context_find(c, id);
	assert_int_equal(u->state, UPDATE_DONE);
	assert_string_equal(u->booted_kernel, NEW_KERNEL);
	assert_int_equal(w->post, 1);
	assert_int_equal(w->rollback, 0);
	assert_string_equal(context_state(c), "idle");
	assert_string_equal(c->last_report, id);
	assert_int_equal(context_get_report(c, "", &report, &e), 0);
	assert_non_null(strstr(report, NEW_KERNEL));
	assert_report_valid(w, id);
	context_free(c);

	/* Another start changes nothing. */
	c = boot(w, NEW_KERNEL, BOOT_B, true);
	assert_int_equal(context_find(c, id)->state, UPDATE_DONE);
	assert_int_equal(w->post, 1);
	context_free(c);
}

static void test_context_restart_before_handoff_rolls_back(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_free_ char *id = NULL;
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	Update *u = stage(c, &e);

	id = strdup(u->id);
	assert_int_equal(context_commit_begin(c, id, &u, &e), 0);
	context_free(c); /* the daemon died before the commit steps ran */

	c = boot(w, OLD_KERNEL, BOOT_A, true);
	u = context_find(c, id);
	assert_int_equal(u->state, UPDATE_FAILED);
	assert_non_null(strstr(u->error, "interrupted"));
	assert_int_equal(w->rollback, 1);
	assert_int_equal(w->pre, 0);
	assert_int_equal(kexec_backend_record.is_loaded(w->root, 0), 0);
	assert_report_valid(w, id);
	context_free(c);
}

static void test_context_wrong_kernel_after_handoff_fails(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_free_ char *id = NULL;
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	Update *u = stage(c, &e);

	id = strdup(u->id);
	assert_int_equal(context_commit_begin(c, id, &u, &e), 0);
	assert_int_equal(context_commit_run(c, u), 0);
	context_free(c);

	/* Same boot: the kexec job is under way, nothing is given back. */
	c = boot(w, OLD_KERNEL, BOOT_A, true);
	assert_int_equal(context_find(c, id)->state, UPDATE_COMMITTING);
	assert_int_equal(w->rollback, 0);
	context_free(c);

	/* The machine came back on the old kernel (kexec failed, firmware reboot). */
	c = boot(w, OLD_KERNEL, BOOT_B, true);
	u = context_find(c, id);
	assert_int_equal(u->state, UPDATE_FAILED);
	assert_non_null(strstr(u->error, "not the staged"));
	assert_int_equal(w->rollback, 1);
	assert_int_equal(w->post, 0);
	assert_report_valid(w, id);
	context_free(c);
}

static void test_context_pre_handoff_failure_rolls_back(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	Update *u = stage(c, &e);

	w->fail_pre = true;
	assert_int_equal(context_commit_begin(c, "", &u, &e), 0);
	assert_int_equal(context_commit_run(c, u), 0);
	assert_int_equal(u->state, UPDATE_FAILED);
	assert_non_null(strstr(u->error, "refused to pause"));
	assert_int_equal(w->requests, 0); /* never reached the point of no return */
	assert_int_equal(w->rollback, 1);
	assert_int_equal(kexec_backend_record.is_loaded(w->root, 0), 0);
	assert_string_equal(context_state(c), "idle");
	assert_disk_matches(w, c, u);
	assert_report_valid(w, u->id);
	context_free(c);
}

static void test_context_refused_kexec_request_rolls_back(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	Update *u = stage(c, &e);

	w->fail_request = true;
	assert_int_equal(context_commit_begin(c, "", &u, &e), 0);
	assert_int_equal(context_commit_run(c, u), 0);
	assert_int_equal(u->state, UPDATE_FAILED);
	assert_int_equal(w->pre, 1);
	assert_int_equal(w->rollback, 1);
	assert_non_null(strstr(u->error, "kexec reboot"));
	assert_report_valid(w, u->id);
	context_free(c);
}

static void test_context_cancel_and_bad_states(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	StageRequest req = { .kernel = KERNEL, .cmdline = "" };
	Update *u = stage(c, &e), *v = NULL;
	_cleanup_free_ char *id = strdup(u->id), *report = NULL;

	/* A second stage is refused while one is active. */
	assert_true(context_stage(c, &req, &v, &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_ALREADY_STAGED));
	assert_null(v);
	sd_bus_error_free(&e);

	assert_int_equal(context_cancel(c, "", &e), 0);
	assert_int_equal(u->state, UPDATE_CANCELLED);
	assert_int_equal(kexec_backend_record.is_loaded(w->root, 0), 0);
	assert_string_equal(context_state(c), "idle");
	assert_disk_matches(w, c, u);

	assert_true(context_cancel(c, id, &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_BAD_STATE));
	sd_bus_error_free(&e);
	assert_true(context_commit_begin(c, id, &v, &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_BAD_STATE));
	sd_bus_error_free(&e);
	assert_true(context_commit_begin(c, "", &v, &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_NO_SUCH_UPDATE));
	sd_bus_error_free(&e);
	/* A cancelled update has no report. */
	assert_true(context_get_report(c, id, &report, &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_NO_SUCH_REPORT));
	sd_bus_error_free(&e);

	/* Staging again after a cancel works. */
	assert_int_equal(context_stage(c, &req, &v, &e), 0);
	assert_string_not_equal(v->id, id);
	context_free(c);
}

static void test_context_unknown_and_invalid_ids(void **state) {
	static const char *const bad[] = { "xyz", "../../../etc/passwd", "0123456789ABCDEF",
		                           "0123456789abcdef0" };
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	char *json = NULL;
	Update *u = NULL;

	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		assert_true(context_commit_begin(c, bad[i], &u, &e) < 0);
		assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_INVALID_ID));
		sd_bus_error_free(&e);
		assert_true(context_cancel(c, bad[i], &e) < 0);
		assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_INVALID_ID));
		sd_bus_error_free(&e);
		assert_true(context_get_report(c, bad[i], &json, &e) < 0);
		assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_INVALID_ID));
		sd_bus_error_free(&e);
	}
	assert_true(context_cancel(c, "0123456789abcdef", &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_NO_SUCH_UPDATE));
	sd_bus_error_free(&e);
	assert_true(context_get_report(c, "0123456789abcdef", &json, &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_NO_SUCH_UPDATE));
	sd_bus_error_free(&e);
	assert_true(context_get_report(c, "", &json, &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_NO_SUCH_REPORT));
	assert_null(json);
	assert_null(u);
	context_free(c);
}

/* Stage's bad input: named error, and nothing on disk or in memory changed. */
static void test_context_stage_bad_input_changes_nothing(void **state) {
	static const struct {
		const char *kernel, *initrd, *cmdline, *error;
	} cases[] = {
		{ "vmlinuz", "", "", UPGRADE_ERROR_INVALID_PATH },
		{ "/boot/../etc/x", "", "", UPGRADE_ERROR_INVALID_PATH },
		{ "/etc/passwd", "", "", UPGRADE_ERROR_NOT_ALLOWED_PATH },
		{ KERNEL, "/boot/missing", "", UPGRADE_ERROR_INVALID_PATH },
		{ KERNEL, "relative", "", UPGRADE_ERROR_INVALID_PATH },
		{ "/boot/initrd.img", "", "", UPGRADE_ERROR_INVALID_IMAGE },
		{ KERNEL, "", "a\nb", UPGRADE_ERROR_INVALID_CMDLINE },
		{ KERNEL, "", "upgraded.stamps=1", UPGRADE_ERROR_INVALID_CMDLINE },
	};
	_cleanup_free_ char *before = NULL, *after = NULL;
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);

	assert_int_equal(context_describe(c, &before), 0);
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
		StageRequest req = { .kernel = cases[i].kernel,
			             .initrd = cases[i].initrd,
			             .cmdline = cases[i].cmdline };
		Update *u = NULL;

		assert_true(context_stage(c, &req, &u, &e) < 0);
		if (!sd_bus_error_has_name(&e, cases[i].error))
			fail_msg("case %zu: expected %s, got %s", i, cases[i].error, e.name);
		assert_null(u);
	}
	/* reuse-cmdline with an explicit one, and without /proc/cmdline in the root. */
	{
		_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
		StageRequest req = { .kernel = KERNEL, .cmdline = "x", .reuse_cmdline = true };
		Update *u = NULL;

		assert_true(context_stage(c, &req, &u, &e) < 0);
		assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_INVALID_CMDLINE));
	}
	assert_int_equal(context_describe(c, &after), 0);
	assert_string_equal(before, after);
	assert_int_equal(kexec_backend_record.is_loaded(w->root, 0), 0);
	assert_int_equal(w->steps, 0); /* not a single record written */
	context_free(c);
}

static void test_context_reuse_cmdline(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_free_ char *proc = NULL;
	World *w = *state;
	Context *c;
	StageRequest req = { .kernel = KERNEL, .reuse_cmdline = true };
	Update *u = NULL;

	assert_true(asprintf(&proc, "%s/proc", w->root) > 0);
	assert_int_equal(mkdir(proc, 0755), 0);
	assert_int_equal(test_write_file(w->root, "/proc/cmdline",
	                                 "BOOT_IMAGE=/vmlinuz-old root=/dev/vda1 upgraded.stamps=7 "
	                                 "console=ttyS0\n",
	                                 0644),
	                 0);
	c = boot(w, OLD_KERNEL, BOOT_A, true);
	assert_int_equal(context_stage(c, &req, &u, &e), 0);
	assert_string_equal(u->cmdline, "root=/dev/vda1 console=ttyS0");
	assert_true(u->reuse_cmdline);
	context_free(c);
}

/* A backend that cannot work here (like kexec_file on a kernel without kexec). */
static int probe_unusable(const char *root, char **ret_reason) {
	*ret_reason = strdup("no kexec in this kernel");
	return -ENOSYS;
}

static int load_enosys(const char *root, const KexecImage *image) {
	return -ENOSYS;
}

static void test_context_kexec_unavailable_is_named(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_free_ char *dir = NULL;
	KexecBackend broken = kexec_backend_record;
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	StageRequest req = { .kernel = KERNEL, .cmdline = "" };
	Update *u = NULL;
	struct dirent *de;
	DIR *d;

	/* Probe says no: refused before anything is written. */
	broken.probe = probe_unusable;
	c->backend = &broken;
	c->backend_status = c->backend->probe(w->root, &c->backend_reason);
	assert_true(context_stage(c, &req, &u, &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_KEXEC_UNAVAILABLE));
	assert_non_null(strstr(e.message, "no kexec in this kernel"));
	sd_bus_error_free(&e);

	/* Probe says yes but the syscall says ENOSYS: the record is removed again. */
	broken = kexec_backend_record;
	broken.load = load_enosys;
	c->backend_status = 0;
	assert_true(context_stage(c, &req, &u, &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_KEXEC_UNAVAILABLE));
	assert_null(u);
	assert_null(c->active);
	assert_true(asprintf(&dir, "%s/var/lib/upgraded/updates", w->root) > 0);
	d = opendir(dir);
	assert_non_null(d);
	while ((de = readdir(d)))
		assert_true(de->d_name[0] == '.');
	closedir(d);
	context_free(c);
}

/* Drives one update to its end across crashes: each crash drops the context and
 * starts a new one in the same boot; a requested kexec boots the new kernel. */
static Update *drive(World *w, Context **cp, char **id) {
	Context *c = *cp;
	const char *boot_id = BOOT_A, *running = OLD_KERNEL;
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;

	for (unsigned round = 0; round < 50; round++) {
		Update *u = *id ? context_find(c, *id) : NULL;
		int r = 0;

		if (w->crashed) {
			w->crashed = false;
			context_free(c);
			c = boot(w, running, boot_id, true);
			continue;
		}
		if (!u) {
			StageRequest req = { .kernel = KERNEL,
				             .initrd = "/boot/initrd.img",
				             .cmdline = "ro" };

			r = context_stage(c, &req, &u, &e);
			if (r == -ECANCELED) {
				*id = strdup(c->updates[c->n_updates - 1]->id);
				continue;
			}
			assert_int_equal(r, 0);
			*id = strdup(u->id);
			continue;
		}
		if (update_state_is_terminal(u->state)) {
			*cp = c;
			return u;
		}
		if (u->state == UPDATE_STAGED) {
			r = context_commit_begin(c, *id, &u, &e);
			if (r == -ECANCELED)
				continue;
			assert_int_equal(r, 0);
			r = context_commit_run(c, u);
			assert_true(r == 0 || r == -ECANCELED);
			continue;
		}
		if (u->state == UPDATE_COMMITTING && streq(u->phase, PHASE_HANDOFF_REQUESTED)) {
			/* systemd does its job: the new kernel starts the daemon. */
			context_free(c);
			boot_id = BOOT_B;
			running = NEW_KERNEL;
			c = boot(w, running, boot_id, true);
			continue;
		}
		fail_msg("stuck in %s/%s", update_state_to_string(u->state), u->phase);
	}
	fail_msg("did not finish");
	return NULL;
}

static void crash_everywhere(World *w, bool fail_pre) {
	unsigned total;

	/* First a run without crashes counts the persisted steps. */
	for (unsigned k = 0;; k++) {
		_cleanup_free_ char *id = NULL;
		char *root = w->root;
		Context *c;
		Update *u;

		*w = (World){ .root = root, .crash_at = k, .fail_pre = fail_pre };
		c = boot(w, OLD_KERNEL, BOOT_A, true);
		u = drive(w, &c, &id);

		/* Nothing done twice, nothing left undone. */
		assert_true(w->pre <= 1);
		assert_true(w->rollback <= 1);
		assert_true(w->post <= 1);
		assert_true(w->requests <= 1);
		if (u->state == UPDATE_DONE) {
			assert_int_equal(w->post, 1);
			assert_int_equal(w->rollback, 0);
			assert_int_equal(w->pre, 1);
		} else {
			assert_int_equal(u->state, UPDATE_FAILED);
			assert_int_equal(w->rollback, 1);
			assert_int_equal(w->post, 0);
			assert_non_null(u->error);
		}
		assert_disk_matches(w, c, u);
		assert_report_valid(w, u->id);
		assert_null(c->active);
		context_free(c);

		if (k == 0)
			total = w->steps;
		/* Reset the root for the next round. */
		test_rmroot(w->root);
		w->root = test_mkroot();
		assert_non_null(w->root);
		assert_int_equal(test_write_bzimage(w->root, KERNEL, NEW_KERNEL, BZ_OK, 0644), 0);
		assert_int_equal(test_write_file(w->root, "/boot/initrd.img", "initrd", 0644), 0);
		if (k >= total)
			break;
	}
	assert_true(total >= (fail_pre ? 4u : 7u));
}

static void test_context_crash_at_every_step_of_a_good_update(void **state) {
	crash_everywhere(*state, false);
}

static void test_context_crash_at_every_step_of_a_failing_update(void **state) {
	crash_everywhere(*state, true);
}

static void test_context_ignores_damaged_records(void **state) {
	_cleanup_free_ char *dir = NULL;
	World *w = *state;
	Context *c;

	assert_true(asprintf(&dir, "%s/var/lib/upgraded/updates", w->root) > 0);
	assert_int_equal(mkdir_p(dir, 0755), 0);
	assert_int_equal(test_write_file(w->root, "/var/lib/upgraded/updates/0123456789abcdef.json",
	                                 "{not json", 0644),
	                 0);
	assert_int_equal(
	        test_write_file(w->root, "/var/lib/upgraded/updates/stranger.json", "{}", 0644), 0);
	c = boot(w, OLD_KERNEL, BOOT_A, true);
	assert_int_equal(c->n_updates, 0);
	assert_string_equal(context_state(c), "idle");
	context_free(c);
	/* Left untouched for a human to look at. */
	{
		_cleanup_free_ char *s = read_disk(w, "updates", "0123456789abcdef");
		assert_string_equal(s, "{not json");
	}
}

/* With crash memory reserved, the staged kernel is also the (verified) crash image,
 * and cancelling drops both. */
static void test_context_crash_image(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_free_ char *dir = NULL, *path = NULL, *data = NULL;
	World *w = *state;
	Context *c;
	Update *u;

	assert_true(asprintf(&dir, "%s/sys/kernel", w->root) > 0);
	assert_int_equal(mkdir_p(dir, 0755), 0);
	assert_int_equal(
	        test_write_file(w->root, "/sys/kernel/kexec_crash_size", "268435456\n", 0644), 0);
	/* No memory map to save for the panic path: no crash image. */
	c = boot(w, OLD_KERNEL, BOOT_A, true);
	u = stage(c, &e);
	assert_false(u->crash_image_loaded);
	assert_int_equal(kexec_backend_record.is_loaded(w->root, KEXEC_IMAGE_PANIC), 0);
	assert_int_equal(context_cancel(c, "", &e), 0);
	context_free(c);

	assert_int_equal(test_write_file(w->root, "/sys/firmware/memmap/0/start", "0x0\n", 0644),
	                 0);
	assert_int_equal(test_write_file(w->root, "/sys/firmware/memmap/0/end", "0x9fbff\n", 0644),
	                 0);
	assert_int_equal(
	        test_write_file(w->root, "/sys/firmware/memmap/0/type", "System RAM\n", 0644), 0);
	c = boot(w, OLD_KERNEL, BOOT_A, true);
	u = stage(c, &e);
	assert_true(u->crash_image_loaded);
	free(path);
	assert_true(asprintf(&path, "%s/var/lib/upgraded/memmap/%s/0/type", w->root, u->id) > 0);
	assert_int_equal(read_file_full(path, 64, &data, NULL), 0);
	assert_string_equal(data, "System RAM\n");
	free(data);
	data = NULL;
	free(path);
	path = NULL;
	assert_int_equal(kexec_backend_record.is_loaded(w->root, 0), 1);
	assert_int_equal(kexec_backend_record.is_loaded(w->root, KEXEC_IMAGE_PANIC), 1);
	assert_true(asprintf(&path, "%s/run/upgraded/kexec-record.json", w->root) > 0);
	assert_int_equal(read_file_full(path, 1 << 20, &data, NULL), 0);
	/* The panic load never asks for a fast handoff. */
	assert_non_null(strstr(data, "\"panic\":true"));
	assert_null(strstr(data, "\"mode\":\"fast\""));
	assert_disk_matches(w, c, u);

	assert_int_equal(context_cancel(c, "", &e), 0);
	assert_int_equal(kexec_backend_record.is_loaded(w->root, 0), 0);
	assert_int_equal(kexec_backend_record.is_loaded(w->root, KEXEC_IMAGE_PANIC), 0);
	context_free(c);
}

/* With a policy loaded, it decides the handoff and its [Paths] rule the staging. */
static void test_context_policy_decides(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	StageRequest req = { .kernel = KERNEL, .cmdline = "" };
	Policy *p = NULL;
	Update *u = NULL;

	assert_int_equal(policy_new_default(&p), 0);
	strv_free(p->allowed_roots);
	p->allowed_roots = NULL;
	assert_int_equal(strv_extend(&p->allowed_roots, "/var/lib/upgraded/images"), 0);
	assert_int_equal(context_set_policy(c, p), 0);

	/* /boot is no longer allowed. */
	assert_true(context_stage(c, &req, &u, &e) < 0);
	assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_NOT_ALLOWED_PATH));
	sd_bus_error_free(&e);
	context_free(c);

	/* Default policy: the zero facts never allow fast; the reasons say why. */
	c = boot(w, OLD_KERNEL, BOOT_A, true);
	assert_int_equal(policy_new_default(&p), 0);
	assert_int_equal(context_set_policy(c, p), 0);
	u = stage(c, &e);
	assert_int_equal(context_commit_begin(c, "", &u, &e), 0);
	assert_string_equal(u->handoff, "verified");
	assert_non_null(u->handoff_reason);
	assert_true(strlen(u->handoff_reason) > 0);
	assert_string_not_equal(u->handoff_reason, "no policy loaded: verify every segment");
	context_free(c);
}

/* ---- the panic path ---- */

/* Where the old kernel crashes, in persisted steps after commit_begin():
 * 1 = after the image check, inside the checkpoint (the VM step not done),
 * 2 = every pre-handoff step done, no handoff record (the lab's hold point),
 * 3 = handoff record written, reboot not requested,
 * 0 = after systemd accepted the kexec (crash during the shutdown). */
enum {
	CRASH_IN_CHECKPOINT = 1,
	CRASH_AFTER_CHECKPOINT = 2,
	CRASH_AFTER_HANDOFF_RECORD = 3,
	CRASH_AFTER_REQUEST = 0,
};

static void write_cmdline(World *w, const char *cmdline) {
	assert_int_equal(test_write_file(w->root, "/proc/cmdline", cmdline, 0644), 0);
}

/* The old kernel, with a crash reservation and a firmware memory map: stage
 * (kernel + verified crash image), commit, and crash at the given point. */
static char *commit_then_crash(World *w, unsigned point, bool fast) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	char *id;
	Context *c;
	Update *u;

	assert_int_equal(
	        test_write_file(w->root, "/sys/kernel/kexec_crash_size", "402653184\n", 0644), 0);
	assert_int_equal(test_write_file(w->root, "/sys/firmware/memmap/0/start", "0x0\n", 0644),
	                 0);
	assert_int_equal(test_write_file(w->root, "/sys/firmware/memmap/0/end", "0x9fbff\n", 0644),
	                 0);
	assert_int_equal(
	        test_write_file(w->root, "/sys/firmware/memmap/0/type", "System RAM\n", 0644), 0);
	assert_int_equal(
	        test_write_file(w->root, "/sys/firmware/memmap/1/start", "0x100000\n", 0644), 0);
	assert_int_equal(
	        test_write_file(w->root, "/sys/firmware/memmap/1/end", "0xfffdffff\n", 0644), 0);
	assert_int_equal(
	        test_write_file(w->root, "/sys/firmware/memmap/1/type", "System RAM\n", 0644), 0);
	write_cmdline(w, "root=/dev/vda1 ro crashkernel=384M\n");

	c = boot(w, OLD_KERNEL, BOOT_A, true);
	assert_false(c->panic_kernel);
	u = stage(c, &e);
	assert_true(u->crash_image_loaded);
	id = strdup(u->id);
	assert_non_null(id);
	assert_int_equal(context_commit_begin(c, "", &u, &e), 0);
	if (fast) /* as if the policy had chosen fast */
		assert_int_equal(update_set_string(&u->handoff, "fast"), 0);
	if (point > 0)
		w->crash_at = w->steps + point;
	assert_true(context_commit_run(c, u) == (point > 0 ? -ECANCELED : 0));
	context_free(c); /* the old kernel is gone */
	w->crash_at = 0;
	w->crashed = false;
	return id;
}

static Context *boot_crash_kernel(World *w) {
	write_cmdline(w, "root=/dev/vda1 ro crashkernel=384M reset_devices upgraded.panic=1 "
	                 "upgraded.stamps=x\n");
	return boot(w, NEW_KERNEL, BOOT_P, true);
}

/* The last load request the record backend saw for the normal (not crash) slot. */
static json_object *last_normal_load(World *w) {
	_cleanup_free_ char *path = NULL, *data = NULL;
	json_object *o, *a, *found = NULL;

	assert_true(asprintf(&path, "%s/run/upgraded/kexec-record.json", w->root) > 0);
	assert_int_equal(read_file_full(path, 1 << 20, &data, NULL), 0);
	o = json_tokener_parse(data);
	assert_non_null(o);
	assert_true(json_object_object_get_ex(o, "requests", &a));
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *r = json_object_array_get_idx(a, i), *v;

		if (json_object_object_get_ex(r, "op", &v) &&
		    streq(json_object_get_string(v), "load") &&
		    json_object_object_get_ex(r, "panic", &v) && !json_object_get_boolean(v))
			found = r;
	}
	if (found)
		json_object_get(found);
	json_object_put(o);
	return found;
}

static const char *jstr(json_object *o, const char *key) {
	json_object *v;

	return json_object_object_get_ex(o, key, &v) ? json_object_get_string(v) : NULL;
}

static void assert_report_has_panic_path(World *w, const char *id, const char *phase) {
	_cleanup_free_ char *data = read_disk(w, "reports", id);
	json_object *o, *p;

	assert_non_null(data);
	o = json_tokener_parse(data);
	assert_non_null(o);
	assert_true(json_object_object_get_ex(o, "panic_path", &p));
	assert_non_null(p);
	assert_string_equal(jstr(p, "crash_kernel_boot_id"), BOOT_P);
	assert_string_equal(jstr(p, "crashed_in_phase"), phase);
	json_object_put(o);
	assert_report_valid(w, id);
}

/* The three states in which the crash kernel can finish the update: it loads the
 * staged kernel as an ordinary, verified image with the saved full memory map,
 * requests the reboot, restores no VM; the staged kernel then completes. */
static void panic_takeover_completes(World *w, unsigned point, const char *phase, bool fast) {
	_cleanup_free_ char *id = commit_then_crash(w, point, fast), *memmap = NULL;
	json_object *load;
	unsigned requests = w->requests;
	Context *c;
	Update *u;

	assert_int_equal(w->pre, point == CRASH_IN_CHECKPOINT ? 0 : 1);
	c = boot_crash_kernel(w);
	assert_true(c->panic_kernel);
	{
		_cleanup_free_ char *json = NULL;

		assert_int_equal(context_describe(c, &json), 0);
		assert_non_null(strstr(json, "\"PanicKernel\":true"));
	}
	u = context_find(c, id);
	assert_int_equal(u->state, UPDATE_COMMITTING);
	assert_string_equal(u->phase, PHASE_HANDOFF_REQUESTED);
	assert_string_equal(u->panic_boot_id, BOOT_P);
	assert_string_equal(u->panic_from_phase, phase);
	assert_string_equal(u->handoff_boot_id, BOOT_P);
	assert_string_equal(u->handoff, "verified");
	assert_non_null(update_find_stamp(u, "panic-recovery"));
	assert_non_null(update_find_stamp(u, "panic-handoff"));
	assert_int_equal(w->requests, requests + 1);
	assert_int_equal(w->post, 0);     /* no VM restored on the crash kernel */
	assert_int_equal(w->rollback, 0); /* nor resumed */
	load = last_normal_load(w);
	assert_non_null(load);
	assert_string_equal(jstr(load, "mode"), "verified");
	assert_string_equal(jstr(load, "kernel_sha256"), u->kernel.sha256);
	assert_int_equal(context_memmap_path(c, id, &memmap), 0);
	assert_string_equal(jstr(load, "memmap_dir"), memmap);
	json_object_put(load);
	assert_disk_matches(w, c, u);
	context_free(c);

	/* A restart on the same crash kernel waits for the requested kexec. */
	c = boot_crash_kernel(w);
	assert_int_equal(context_find(c, id)->state, UPDATE_COMMITTING);
	assert_int_equal(w->requests, requests + 1);
	context_free(c);

	/* The staged kernel, with the full map: the regular completion. */
	write_cmdline(w, "root=/dev/vda1 ro crashkernel=384M upgraded.stamps=x\n");
	c = boot(w, NEW_KERNEL, BOOT_B, true);
	assert_false(c->panic_kernel);
	u = context_find(c, id);
	assert_int_equal(u->state, UPDATE_DONE);
	assert_int_equal(w->post, 1);
	assert_int_equal(w->rollback, 0);
	assert_report_has_panic_path(w, id, phase);
	context_free(c);
}

static void test_context_panic_after_checkpoint(void **state) {
	panic_takeover_completes(*state, CRASH_AFTER_CHECKPOINT, PHASE_PRE_HANDOFF, false);
}

static void test_context_panic_after_handoff_record(void **state) {
	panic_takeover_completes(*state, CRASH_AFTER_HANDOFF_RECORD, PHASE_HANDOFF, false);
}

static void test_context_panic_after_request_fast_becomes_verified(void **state) {
	panic_takeover_completes(*state, CRASH_AFTER_REQUEST, PHASE_HANDOFF_REQUESTED, true);
}

/* Crashed before every VM was checkpointed: failed with the step named, nothing
 * loaded or requested, no VM step run on the crash kernel. */
static void test_context_panic_during_checkpoint_fails(void **state) {
	World *w = *state;
	_cleanup_free_ char *id = commit_then_crash(w, CRASH_IN_CHECKPOINT, false);
	json_object *before = last_normal_load(w), *after;
	Context *c = boot_crash_kernel(w);
	Update *u = context_find(c, id);

	assert_int_equal(u->state, UPDATE_FAILED);
	assert_non_null(strstr(u->error, "'vm-checkpoint'"));
	assert_int_equal(w->requests, 0);
	assert_int_equal(w->rollback, 0);
	assert_int_equal(w->post, 0);
	after = last_normal_load(w);
	/* No new load: the last one is still stage's. */
	assert_string_equal(json_object_to_json_string(before), json_object_to_json_string(after));
	json_object_put(before);
	json_object_put(after);
	assert_report_has_panic_path(w, id, PHASE_PRE_HANDOFF);
	context_free(c);
}

/* The staged kernel changed on disk between stage and the crash: refused and
 * named, nothing loaded, nothing requested. Same for the initrd. */
static void panic_files_changed(World *w, bool initrd) {
	_cleanup_free_ char *id = commit_then_crash(w, CRASH_AFTER_CHECKPOINT, false);
	json_object *before = last_normal_load(w), *after;
	Context *c;
	Update *u;

	if (initrd)
		assert_int_equal(test_write_file(w->root, "/boot/initrd.img", "other", 0644), 0);
	else
		assert_int_equal(test_write_bzimage(w->root, KERNEL, "6.1.0-99-evil", BZ_OK, 0644),
		                 0);
	c = boot_crash_kernel(w);
	u = context_find(c, id);
	assert_int_equal(u->state, UPDATE_FAILED);
	assert_non_null(strstr(u->error, "changed"));
	assert_non_null(strstr(u->error, initrd ? "initrd" : "kernel"));
	assert_int_equal(w->requests, 0);
	assert_int_equal(w->post, 0);
	assert_int_equal(w->rollback, 0);
	after = last_normal_load(w);
	assert_string_equal(json_object_to_json_string(before), json_object_to_json_string(after));
	json_object_put(before);
	json_object_put(after);
	assert_report_has_panic_path(w, id, PHASE_PRE_HANDOFF);
	context_free(c);

	/* The next regular boot leaves the finished update alone. */
	write_cmdline(w, "root=/dev/vda1 ro\n");
	c = boot(w, OLD_KERNEL, BOOT_B, true);
	assert_int_equal(context_find(c, id)->state, UPDATE_FAILED);
	assert_int_equal(w->rollback, 0);
	context_free(c);
}

static void test_context_panic_kernel_changed_fails(void **state) {
	panic_files_changed(*state, false);
}

static void test_context_panic_initrd_changed_fails(void **state) {
	panic_files_changed(*state, true);
}

/* No memory map saved at stage (removed here): the crash kernel cannot give the
 * next kernel the machine, so it refuses. */
static void test_context_panic_without_memmap_fails(void **state) {
	World *w = *state;
	_cleanup_free_ char *id = commit_then_crash(w, CRASH_AFTER_HANDOFF_RECORD, false);
	_cleanup_free_ char *cmd = NULL;
	Context *c;
	Update *u;

	assert_true(asprintf(&cmd, "rm -rf '%s/var/lib/upgraded/memmap'", w->root) > 0);
	assert_int_equal(system(cmd), 0);
	c = boot_crash_kernel(w);
	u = context_find(c, id);
	assert_int_equal(u->state, UPDATE_FAILED);
	assert_non_null(strstr(u->error, "memory map"));
	assert_int_equal(w->requests, 0);
	assert_int_equal(w->post, 0);
	assert_report_has_panic_path(w, id, PHASE_HANDOFF);
	context_free(c);
}

/* Without the mark the same record is a regular reboot before the handoff: it
 * rolls back (VMs given back), nothing is loaded or requested. */
static void test_context_no_panic_mark_rolls_back(void **state) {
	World *w = *state;
	_cleanup_free_ char *id = commit_then_crash(w, CRASH_AFTER_CHECKPOINT, false);
	Context *c;
	Update *u;

	write_cmdline(w, "root=/dev/vda1 ro crashkernel=384M\n");
	c = boot(w, NEW_KERNEL, BOOT_P, true);
	assert_false(c->panic_kernel);
	u = context_find(c, id);
	assert_int_equal(u->state, UPDATE_FAILED);
	assert_int_equal(w->rollback, 1);
	assert_int_equal(w->requests, 0);
	assert_null(u->panic_boot_id);
	context_free(c);
}

/* A crash during the rollback: the crash kernel gives nothing back either. */
static void test_context_panic_during_rollback_fails_without_vm_steps(void **state) {
	World *w = *state;
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_free_ char *id = NULL;
	Context *c;
	Update *u;

	assert_int_equal(
	        test_write_file(w->root, "/sys/kernel/kexec_crash_size", "402653184\n", 0644), 0);
	c = boot(w, OLD_KERNEL, BOOT_A, true);
	u = stage(c, &e);
	id = strdup(u->id);
	w->fail_pre = true;
	assert_int_equal(context_commit_begin(c, "", &u, &e), 0);
	/* image check mark, then the rollback phase: crash right there. */
	w->crash_at = w->steps + 2;
	assert_int_equal(context_commit_run(c, u), -ECANCELED);
	assert_string_equal(u->phase, PHASE_ROLLBACK);
	context_free(c);
	w->crash_at = 0;

	c = boot_crash_kernel(w);
	u = context_find(c, id);
	assert_int_equal(u->state, UPDATE_FAILED);
	assert_non_null(strstr(u->error, "refused to pause"));
	assert_int_equal(w->rollback, 0);
	assert_int_equal(w->requests, 0);
	assert_report_valid(w, id);
	context_free(c);
}

/* A staged (never committed) update is left alone on the crash kernel: not
 * loaded into the reservation's view of the machine, still staged. */
static void test_context_panic_kernel_leaves_staged_alone(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	World *w = *state;
	_cleanup_free_ char *id = NULL, *path = NULL;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	Update *u = stage(c, &e);

	id = strdup(u->id);
	context_free(c);
	/* The crash wiped what the kernel had loaded. */
	assert_true(asprintf(&path, "%s/run/upgraded/kexec-record.json", w->root) > 0);
	assert_int_equal(unlink(path), 0);
	c = boot_crash_kernel(w);
	u = context_find(c, id);
	assert_int_equal(u->state, UPDATE_STAGED);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(w->requests, 0);
	context_free(c);
}

/* The kernel's own kexec_file_load cannot hand over a map: it refuses. */
static void test_context_kexec_file_refuses_memmap(void **state) {
	World *w = *state;
	_cleanup_free_ char *path = NULL;
	KexecImage img = { .initrd_fd = -EBADF,
		           .cmdline = "",
		           .flags = KEXEC_IMAGE_VERIFIED,
		           .memmap_dir = "/var/lib/upgraded/memmap/x" };

	assert_true(asprintf(&path, "%s%s", w->root, KERNEL) > 0);
	img.kernel_fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(img.kernel_fd >= 0);
	assert_int_equal(kexec_backend_file.load(w->root, &img), -EOPNOTSUPP);
	close(img.kernel_fd);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_context_stage_commit_complete),
		T(test_context_restart_before_handoff_rolls_back),
		T(test_context_wrong_kernel_after_handoff_fails),
		T(test_context_pre_handoff_failure_rolls_back),
		T(test_context_refused_kexec_request_rolls_back),
		T(test_context_cancel_and_bad_states),
		T(test_context_unknown_and_invalid_ids),
		T(test_context_stage_bad_input_changes_nothing),
		T(test_context_reuse_cmdline),
		T(test_context_kexec_unavailable_is_named),
		T(test_context_crash_at_every_step_of_a_good_update),
		T(test_context_crash_at_every_step_of_a_failing_update),
		T(test_context_ignores_damaged_records),
		T(test_context_policy_decides),
		T(test_context_crash_image),
		T(test_context_panic_after_checkpoint),
		T(test_context_panic_after_handoff_record),
		T(test_context_panic_after_request_fast_becomes_verified),
		T(test_context_panic_during_checkpoint_fails),
		T(test_context_panic_kernel_changed_fails),
		T(test_context_panic_initrd_changed_fails),
		T(test_context_panic_without_memmap_fails),
		T(test_context_no_panic_mark_rolls_back),
		T(test_context_panic_during_rollback_fails_without_vm_steps),
		T(test_context_panic_kernel_leaves_staged_alone),
		T(test_context_kexec_file_refuses_memmap),
	};
#undef T
	log_set_max_level(LOG_CRIT);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
