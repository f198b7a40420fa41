/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The state machine without a bus: stage, commit, cancel, recovery after a
 * restart or a kexec, and a crash after every single persisted step.
 * "Crash" = the persist seam makes the running operation stop right after a
 * record hit the disk; the context is dropped and a new one loads and recovers
 * from disk, as a restarted daemon would.
 */
#include "config.h"
#include "context-test-util.h"
#include "defer-units.h"
#include "fileio.h"
#include "json-util.h"
#include "report-schema.h"

/* Schema 2's identity: the machine id below the daemon's root, its version, ISO times. */
static void assert_report_identity(const char *text, const char *machine_id) {
	_cleanup_(json_object_putp) json_object *o = json_tokener_parse(text);
	json_object *host, *daemon, *v;
	uint64_t started, finished;

	assert_non_null(o);
	assert_true(json_object_object_get_ex(o, "schema", &v));
	assert_int_equal(json_object_get_int(v), 2);
	assert_true(json_object_object_get_ex(o, "host", &host));
	assert_true(json_object_object_get_ex(host, "machine_id", &v));
	assert_string_equal(json_object_get_string(v), machine_id);
	/* The platform facts of the stage (the world: a BIOS boot, lockdown "none"). */
	assert_true(json_object_object_get_ex(host, "platform", &v));
	assert_string_equal(
	        json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN),
	        "{\"firmware\":\"bios\",\"secure_boot\":\"unsupported\",\"lockdown\":\"none\"}");
	assert_true(json_object_object_get_ex(o, "daemon", &daemon));
	assert_true(json_object_object_get_ex(daemon, "version", &v));
	assert_string_equal(json_object_get_string(v), PACKAGE_VERSION);
	assert_true(json_object_object_get_ex(o, "started_at", &v));
	assert_int_equal(report_iso_parse(json_object_get_string(v), &started), 0);
	assert_true(json_object_object_get_ex(o, "finished_at", &v));
	assert_int_equal(report_iso_parse(json_object_get_string(v), &finished), 0);
	assert_true(started > 0 && started <= finished);
}

static void test_context_stage_commit_complete(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_free_ char *id = NULL, *report = NULL, *path = NULL, *dropin = NULL;
	World *w = *state;
	Context *c;
	Update *u;

	assert_int_equal(test_write_file(w->root, "/sys/kernel/security/lockdown",
	                                 "[none] integrity confidentiality\n", 0444),
	                 0);
	c = boot(w, OLD_KERNEL, BOOT_A, true);
	assert_int_equal(context_describe(c, &id), 0);
	assert_non_null(strstr(id, "\"Platform\":{\"Firmware\":\"bios\",\"SecureBoot\":"
	                           "\"unsupported\",\"Lockdown\":\"none\"}"));
	free(TAKE_PTR(id));
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
	assert_int_equal(u->handoff, HANDOFF_MODE_VERIFIED);
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

	/* The new kernel boots with a fresh /run, where upgraded-defer-generator held a
	 * unit back; the daemon starts, restores, releases it. */
	assert_true(asprintf(&path, "%s/run/upgraded/restored", w->root) > 0);
	assert_int_equal(access(path, F_OK), 0); /* released on the old boot: nothing held */
	assert_int_equal(unlink(path), 0);
	assert_true(asprintf(&dropin, "%s/run/systemd/generator/apt-daily.timer.d", w->root) > 0);
	assert_int_equal(mkdir_p(dropin, 0755), 0);
	free(dropin);
	assert_true(asprintf(&dropin, "%s/run/systemd/generator/apt-daily.timer.d/%s", w->root,
	                     DEFER_DROPIN_NAME) > 0);
	assert_int_equal(write_file_atomic(dropin, "", 0, 0644), 0);
	assert_int_equal(test_write_file(w->root, "/etc/machine-id",
	                                 "00112233445566778899aabbccddeeff\n", 0444),
	                 0);
	c = boot(w, NEW_KERNEL, BOOT_B, true);
	u = context_find(c, id);
	assert_int_equal(u->state, UPDATE_DONE);
	assert_int_equal(access(path, F_OK), 0);
	assert_non_null(update_find_stamp(u, "deferred-released"));
	assert_true(update_find_stamp(u, "deferred-released")->monotonic_usec <=
	            update_find_stamp(u, "completed")->monotonic_usec);
	assert_string_equal(u->booted_kernel, NEW_KERNEL);
	assert_int_equal(w->post, 1);
	assert_int_equal(w->rollback, 0);
	assert_string_equal(context_state(c), "idle");
	assert_string_equal(c->last_report, id);
	assert_int_equal(context_get_report(c, "", &report, &e), 0);
	assert_non_null(strstr(report, NEW_KERNEL));
	assert_non_null(strstr(report, "\"deferred_units\""));
	assert_non_null(strstr(report, "\"apt-daily.timer\""));
	assert_report_valid(w, id);
	assert_report_identity(report, "00112233445566778899aabbccddeeff");
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
		/* Reset the root for the next round (validating its report). */
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

/* The record of id cannot be written (as on a full disk): a directory takes its name, so
 * the rename of every new version fails, for root too. */
static void block_record(World *w, const char *id, bool block) {
	_cleanup_free_ char *path = NULL, *saved = NULL;

	assert_true(asprintf(&path, "%s/var/lib/upgraded/updates/%s.json", w->root, id) > 0);
	assert_true(asprintf(&saved, "%s.blocked", path) > 0);
	if (block) {
		assert_int_equal(rename(path, saved), 0);
		assert_int_equal(mkdir(path, 0755), 0);
	} else {
		assert_int_equal(rmdir(path), 0);
		assert_int_equal(rename(saved, path), 0);
	}
}

/* The phase history as one line: "staged cancelled". */
static char *stamp_names(const Update *u) {
	char *s = strdup("");

	for (size_t i = 0; s && i < u->n_stamps; i++) {
		char *n = NULL;

		if (asprintf(&n, "%s%s%s", s, i ? " " : "", u->stamps[i].name) < 0)
			n = NULL;
		free(s);
		s = n;
	}
	assert_non_null(s);
	return s;
}

/* A transition that cannot be persisted leaves no trace, in memory or on disk: not a
 * stamp in the phase history, not the commit's mode, reason or decisions. */
static void test_context_failed_persist_leaves_no_trace(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	_cleanup_free_ char *id = NULL, *names = NULL;
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	Update *u = stage(c, &e), *v = NULL;

	id = strdup(u->id);
	block_record(w, id, true);
	for (int i = 0; i < 3; i++) {
		assert_true(context_cancel(c, id, &e) < 0);
		assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_PERSIST_FAILED));
		sd_bus_error_free(&e);
		assert_true(context_commit_begin(c, id, &v, &e) < 0);
		assert_true(sd_bus_error_has_name(&e, UPGRADE_ERROR_PERSIST_FAILED));
		sd_bus_error_free(&e);
	}
	assert_int_equal(u->state, UPDATE_STAGED);
	assert_string_equal(u->phase, PHASE_STAGED);
	names = stamp_names(u);
	assert_string_equal(names, "staged");
	assert_null(u->handoff_reason);
	assert_null(u->decisions);
	block_record(w, id, false);
	assert_disk_matches(w, c, u);

	assert_int_equal(context_cancel(c, id, &e), 0);
	free(names);
	names = stamp_names(u);
	assert_string_equal(names, "staged cancelled");
	assert_disk_matches(w, c, u);
	context_free(c);
}

static bool exists_in(World *w, const char *rel) {
	_cleanup_free_ char *p = NULL;
	struct stat st;

	assert_true(asprintf(&p, "%s/var/lib/upgraded/%s", w->root, rel) > 0);
	return lstat(p, &st) == 0;
}

/* The temporary files a crash left beside the records and reports go at the next start:
 * regular files of the exact pattern only, never what a symbolic link names, never in a
 * directory that others can write. */
static void test_context_removes_leftover_temporaries(void **state) {
	static const char *const gone[] = { "updates/0123456789abcdef.json.tmpAb3xYz",
		                            "reports/0123456789abcdef.json.tmp000000" };
	static const char *const kept[] = {
		"updates/0123456789abcdef.json.tmpAb3xY",   /* five random characters */
		"updates/0123456789abcdeg.json.tmpAb3xYz",  /* not an id */
		"updates/0123456789abcdef.json.tmpAb3x-z",  /* not mkstemp()'s */
		"updates/0123456789abcdef.json.tmpAb3xYz~", /* longer */
		"updates/notes.txt",
	};
	_cleanup_free_ char *link = NULL, *target = NULL, *dir = NULL, *upd = NULL;
	World *w = *state;
	Context *c;

	for (size_t i = 0; i < ELEMENTSOF(gone); i++) {
		_cleanup_free_ char *rel = NULL;

		assert_true(asprintf(&rel, "/var/lib/upgraded/%s", gone[i]) > 0);
		assert_int_equal(test_write_file(w->root, rel, "{", 0600), 0);
	}
	for (size_t i = 0; i < ELEMENTSOF(kept); i++) {
		_cleanup_free_ char *rel = NULL;

		assert_true(asprintf(&rel, "/var/lib/upgraded/%s", kept[i]) > 0);
		assert_int_equal(test_write_file(w->root, rel, "{", 0600), 0);
	}
	/* A symbolic link and a directory with the name: neither goes, nor what the link names. */
	assert_int_equal(test_write_file(w->root, "/etc/precious", "x", 0644), 0);
	assert_true(asprintf(&target, "%s/etc/precious", w->root) > 0);
	assert_true(asprintf(&link, "%s/var/lib/upgraded/updates/fedcba9876543210.json.tmpLINK00",
	                     w->root) > 0);
	assert_int_equal(symlink(target, link), 0);
	assert_true(asprintf(&dir, "%s/var/lib/upgraded/updates/fedcba9876543210.json.tmpDIR000",
	                     w->root) > 0);
	assert_int_equal(mkdir(dir, 0755), 0);

	/* A directory others can write: nothing is removed there. */
	assert_true(asprintf(&upd, "%s/var/lib/upgraded/updates", w->root) > 0);
	assert_int_equal(chmod(upd, 0777), 0);
	c = boot(w, OLD_KERNEL, BOOT_A, true);
	context_free(c);
	assert_true(exists_in(w, gone[0]));
	assert_false(exists_in(w, gone[1]));
	assert_int_equal(chmod(upd, 0755), 0);

	c = boot(w, OLD_KERNEL, BOOT_A, true);
	assert_int_equal(c->n_updates, 0);
	context_free(c);
	assert_false(exists_in(w, gone[0]));
	for (size_t i = 0; i < ELEMENTSOF(kept); i++)
		assert_true(exists_in(w, kept[i]));
	assert_true(exists_in(w, "updates/fedcba9876543210.json.tmpLINK00"));
	assert_true(exists_in(w, "updates/fedcba9876543210.json.tmpDIR000"));
	assert_int_equal(access(target, F_OK), 0);
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
/* [Reports] Keep=: at the start, the oldest finished updates beyond it go, record, report
 * and saved memory map; the newest finished ones and the active one stay. */
static void test_context_prunes_old_updates(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	char *ids[4] = {};
	_cleanup_free_ char *active = NULL, *path = NULL;
	Policy *p = NULL;

	for (size_t i = 0; i < ELEMENTSOF(ids); i++) {
		ids[i] = strdup(stage(c, &e)->id);
		assert_int_equal(context_cancel(c, "", &e), 0);
	}
	active = strdup(stage(c, &e)->id);
	/* The oldest one has a saved memory map and a report, as a crash image and a
	 * finished update leave them. */
	assert_true(asprintf(&path, "/var/lib/upgraded/memmap/%s/0/start", ids[0]) > 0);
	assert_int_equal(test_write_file(w->root, path, "0x0\n", 0644), 0);
	free(path);
	assert_true(asprintf(&path, "/var/lib/upgraded/memmap/%s.pmem", ids[0]) > 0);
	assert_int_equal(test_write_file(w->root, path, "x\n", 0644), 0);
	free(path);
	assert_true(asprintf(&path, "/var/lib/upgraded/reports/%s.json", ids[0]) > 0);
	assert_int_equal(test_write_file(w->root, path, "{}\n", 0644), 0);
	free(path);
	path = NULL;
	context_free(c);

	/* A start with Keep=2: ids[0] and ids[1] go, ids[2], ids[3] and the staged one stay. */
	assert_int_equal(context_new(w->root, &kexec_backend_record, &c), 0);
	assert_int_equal(policy_new_default(&p), 0);
	p->keep_reports = 2;
	assert_int_equal(context_set_policy(c, p), 0);
	assert_int_equal(context_load(c), 0);
	assert_int_equal(c->n_updates, 3);
	assert_null(context_find(c, ids[0]));
	assert_null(context_find(c, ids[1]));
	assert_non_null(context_find(c, ids[2]));
	assert_non_null(context_find(c, ids[3]));
	assert_non_null(context_find(c, active));
	for (size_t i = 0; i < 2; i++) {
		const char *const tail[] = { "updates/%.json", "reports/%.json", "memmap/%",
			                     "memmap/%.pmem" };

		for (size_t k = 0; k < ELEMENTSOF(tail); k++) {
			const char *pct = strchr(tail[k], '%');

			assert_true(asprintf(&path, "%s/var/lib/upgraded/%.*s%s%s", w->root,
			                     (int)(pct - tail[k]), tail[k], ids[i], pct + 1) > 0);
			assert_int_equal(access(path, F_OK), -1);
			free(path);
		}
	}
	assert_true(asprintf(&path, "%s/var/lib/upgraded/updates/%s.json", w->root, ids[2]) > 0);
	assert_int_equal(access(path, F_OK), 0);
	context_free(c);

	/* Keep=infinity (and the default, 100): nothing more goes. */
	c = boot(w, OLD_KERNEL, BOOT_A, false);
	assert_int_equal(c->n_updates, 3);
	context_free(c);
	for (size_t i = 0; i < ELEMENTSOF(ids); i++)
		free(ids[i]);
}

/* context_retain(): u still listed when announced; counts the announcements. */
static unsigned n_removed;
static void count_removed(Context *c, Update *u, void *userdata) {
	assert_ptr_equal(context_find(c, u->id), u);
	n_removed++;
}

/* [Reports] Keep= within one process: once an update finished, the oldest finished ones
 * beyond it go, files and memory, each announced first; the active one stays. Before,
 * only a start pruned: a daemon that rolled back again and again kept every update. */
static void test_context_retain_prunes_while_running(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	_cleanup_free_ char *first = NULL, *path = NULL;
	Policy *p = NULL;
	Update *u;

	assert_int_equal(policy_new_default(&p), 0);
	p->keep_reports = 2;
	assert_int_equal(context_set_policy(c, p), 0);
	c->ops.update_removed = count_removed;
	n_removed = 0;
	for (unsigned i = 0; i < 6; i++) {
		u = stage(c, &e);
		if (!first)
			first = strdup(u->id);
		assert_int_equal(context_cancel(c, "", &e), 0);
		assert_int_equal(context_retain(c), 0);
		assert_int_equal(c->n_updates, i < 2 ? i + 1 : 2);
	}
	assert_int_equal(n_removed, 4);
	assert_null(context_find(c, first));
	assert_true(asprintf(&path, "%s/var/lib/upgraded/updates/%s.json", w->root, first) > 0);
	assert_int_equal(access(path, F_OK), -1);

	/* An update in flight is never pruned, and does not count against Keep=. */
	u = stage(c, &e);
	assert_int_equal(context_retain(c), 0);
	assert_int_equal(c->n_updates, 3);
	assert_ptr_equal(context_find(c, u->id), u);
	assert_int_equal(n_removed, 4);
	context_free(c);
}

static void test_context_policy_decides(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
	World *w = *state;
	Context *c = boot(w, OLD_KERNEL, BOOT_A, true);
	StageRequest req = { .kernel = KERNEL, .cmdline = "" };
	KexecBackend verified_only;
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
	assert_int_equal(u->handoff, HANDOFF_MODE_VERIFIED);
	assert_non_null(u->handoff_reason);
	assert_true(strlen(u->handoff_reason) > 0);
	assert_string_not_equal(u->handoff_reason, "no policy loaded: verify every segment");
	assert_null(strstr(u->handoff_reason, "always verifies"));
	context_free(c);

	/* A backend without a fast mode (kexec_file) says so even when verified was chosen. */
	verified_only = kexec_backend_record;
	verified_only.supported_modes = HANDOFF_MODE_BIT(HANDOFF_MODE_VERIFIED);
	c = boot(w, OLD_KERNEL, BOOT_A, true);
	c->backend = &verified_only;
	u = stage(c, &e);
	assert_int_equal(context_commit_begin(c, "", &u, &e), 0);
	assert_int_equal(u->handoff, HANDOFF_MODE_VERIFIED);
	assert_non_null(strstr(u->handoff_reason,
	                       "; info: backend-verifies-only: backend record always verifies: no "
	                       "fast handoff and no purgatory stamps there"));
	context_free(c);
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
		T(test_context_failed_persist_leaves_no_trace),
		T(test_context_crash_at_every_step_of_a_good_update),
		T(test_context_crash_at_every_step_of_a_failing_update),
		T(test_context_ignores_damaged_records),
		T(test_context_removes_leftover_temporaries),
		T(test_context_policy_decides),
		T(test_context_prunes_old_updates),
		T(test_context_retain_prunes_while_running),
		T(test_context_crash_image),
	};
#undef T
	log_set_max_level(LOG_CRIT);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
