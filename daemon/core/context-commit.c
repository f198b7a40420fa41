/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <systemd/sd-id128.h>

#include "cmdline.h"
#include "deferred-units.h"
#include "context-private.h"
#include "handoff-shutdown.h"
#include "job.h"
#include "fileio.h"
#include "handoff-facts.h"
#include "image.h"
#include "json-util.h"
#include "kexec-loader.h"
#include "log.h"
#include "log-ids.h"
#include "path-util.h"
#include "report.h"
#include "string-util.h"
#include "upgrade-bus.h"

static const char *const hook_prefix[_HOOK_KIND_MAX] = {
	[HOOK_PRE_HANDOFF] = "pre",
	[HOOK_ROLLBACK] = "rollback",
	[HOOK_POST_BOOT] = "post",
};

int context_hook_key(HookKind kind, const char *key, char **ret) {
	if (asprintf(ret, "%s:%s", hook_prefix[kind], key) < 0)
		return -ENOMEM;
	return 0;
}

/* Runs the hooks of one kind that have not run for u yet, persisting each mark.
 * Stops at the first failure (unless keep_going) and returns its error. */
static int context_run_hooks(Context *c, Update *u, HookKind kind, bool keep_going,
                             char **ret_reason) {
	int first_error = 0;

	CONTEXT_FOREACH_STEP (s, c) {
		const ContextHook *h = &s->vt->hooks[kind];
		_cleanup_free_ char *key = NULL, *why = NULL;
		int r;

		if (!h->func)
			continue;
		if (context_hook_key(kind, h->key, &key) < 0)
			return -ENOMEM;
		if (update_hook_done(u, key))
			continue; /* done before a restart: never twice */

		r = h->func(c, u, s->userdata, &why);
		if (r < 0) {
			log_error_errno(r, "Step '%s' of update %s failed: %s", key, u->id,
			                why ?: "(no reason given)");
			if (first_error == 0) {
				first_error = r;
				if (ret_reason && asprintf(ret_reason, "step '%s' failed: %s", key,
				                           why ?: strerror(-r)) < 0)
					*ret_reason = NULL;
			}
			if (!keep_going)
				return r;
			continue;
		}
		r = strv_extend(&u->hooks_done, key);
		if (r < 0)
			return r;
		r = context_persist(c, u);
		if (r < 0)
			return r;
	}
	return first_error;
}

/*
 * A commit that did not reach the new kernel: give everything back (rollback
 * steps: resume VMs), drop the loaded image, mark the update failed, report.
 * Resumable: entered again after a crash in any of its steps. On the crash
 * kernel nothing is given back (context_panic_fail()).
 */
int context_commit_fail(Context *c, Update *u, const char *reason) {
	int r;

	if (c->panic_kernel)
		return context_panic_fail(
		        c, u, u->error && streq(u->phase, PHASE_ROLLBACK) ? u->error : reason);

	if (!streq(u->phase, PHASE_ROLLBACK)) {
		log_event(LOG_ERR, LOG_MID_ROLLBACK, u->id,
		          "Update %s failed before the handoff, rolling back: %s", u->id, reason);
		r = context_transition_setting(c, u, &u->error, reason, NULL, false,
		                               UPDATE_COMMITTING, PHASE_ROLLBACK, u->progress);
		if (r < 0)
			return r;
	}

	/* Every rollback step runs even if one fails: resume as much as possible. */
	r = context_run_hooks(c, u, HOOK_ROLLBACK, true, NULL);
	if (r == -ECANCELED)
		return r;

	/* Only this boot's kernel can hold the image; after a reboot nothing is loaded. */
	if (!u->handoff_boot_id || streq(u->handoff_boot_id, c->boot_id)) {
		if (c->backend->is_loaded(c->root, 0) > 0)
			(void)c->backend->unload(c->root, 0);
		/* kdump's crash image back, as cancel does. */
		context_give_back_crash_image(c, u);
	}
	if (c->ops.cancel_requested && c->ops.cancel_requested(c, u, c->ops_userdata)) {
		/* Asked for: the caller's Cancel, everything given back. */
		r = context_transition_stamped(c, u, "cancelled", false, UPDATE_CANCELLED,
		                               PHASE_CANCELLED, 100);
		if (r < 0)
			return r;
		return context_finish(c, u, "cancelled");
	}
	return context_mark_failed(c, u, NULL);
}

/* On the new kernel: post-boot steps (restore VMs), then done and the report. */
/* The VM restore is over (done or given up): the units upgraded-defer-generator held back
 * on this boot start now. Which ones, and when, go into the report. Never fails the
 * update: the restore is what mattered. */
static void context_release_deferred(Context *c, Update *u, bool restored) {
	json_object *units = NULL, *d;
	int r;

	r = deferred_units_release(c->root);
	if (r < 0) {
		log_warning_errno(r, "Cannot release the deferred units, ignoring: %m");
		return;
	}
	if (r == 0 || deferred_units_list(c->root, &units) < 0)
		return;
	if (json_object_array_length(units) == 0) {
		json_object_put(units);
		return;
	}
	d = json_object_new_object();
	if (!d || update_add_stamp(u, "deferred-released", false, c->boot_id) < 0) {
		json_object_put(d);
		json_object_put(units);
		return;
	}
	json_object_object_add(d, "units", units);
	json_object_object_add(d, "released_after",
	                       json_object_new_string(restored ? "restore" : "restore-failed"));
	json_object_put(u->deferred);
	u->deferred = d;
	log_info("Update %s: released %zu deferred unit(s) after the restore: %s", u->id,
	         json_object_array_length(units), json_object_to_json_string(units));
}

int context_complete(Context *c, Update *u) {
	_cleanup_free_ char *why = NULL;
	int r;

	if (u->state == UPDATE_COMMITTING) {
		r = context_transition_setting(c, u, &u->booted_kernel, c->running_kernel, "booted",
		                               true, UPDATE_COMPLETING, PHASE_POST_BOOT, 95);
		if (r < 0)
			return r;
	}

	r = context_run_hooks(c, u, HOOK_POST_BOOT, true, &why);
	if (r == -ECANCELED)
		return r;
	context_release_deferred(c, u, r >= 0);
	if (r < 0) {
		/* The new kernel runs; what failed is giving back state: say so. */
		return context_mark_failed(c, u, why ?: "a post-boot step failed");
	}

	r = context_transition_stamped(c, u, "completed", false, UPDATE_DONE, PHASE_DONE, 100);
	if (r < 0)
		return r;
	log_event(LOG_INFO, LOG_MID_COMPLETED, u->id, "Update %s completed: now running %s.", u->id,
	          c->running_kernel);
	return context_finish(c, u, "done");
}

/* The old kernel's way down ([Handoff] Shutdown=), decided once the VMs are saved; it goes
 * into the handoff record written next. */
static int context_decide_shutdown(Context *c, Update *u) {
	json_object *d = NULL;
	int r;

	job_blocking_begin(); /* the journal flush waits for journald */
	r = handoff_shutdown_decide(c->policy, u, c->root, c->journal_sync ?: journal_sync, &d);
	(void)job_blocking_end();
	if (r < 0)
		return r;
	json_object_put(u->shutdown);
	u->shutdown = d;
	log_info("Update %s: %s shutdown of the old kernel (%s).", u->id,
	         shutdown_mode_to_string(handoff_shutdown_mode(u)),
	         json_object_get_string(
	                 json_object_array_get_idx(json_object_object_get(d, "reasons"), 0)));
	return 0;
}

/*
 * The handoff record (what the next boot needs to context_finish the job; stamp names
 * it: "handoff", or "panic-handoff" out of the crash kernel), synced, then THE
 * POINT OF NO RETURN: ask systemd for kexec.target. Once systemd accepted the
 * job, services stop in order and the kernel is replaced; its answer arrives
 * through context_handoff_result(). A failure before that fails the commit.
 */
int context_handoff(Context *c, Update *u, const char *stamp) {
	_cleanup_free_ char *msg = NULL;
	int r;

	r = update_set_string(&u->handoff_boot_id, c->boot_id);
	if (r < 0)
		return r;
	r = context_decide_shutdown(c, u);
	if (r < 0)
		return r;
	r = context_transition_stamped(c, u, stamp, true, UPDATE_COMMITTING, PHASE_HANDOFF, 90);
	if (r == -ECANCELED)
		return r;
	if (r < 0)
		return context_commit_fail(c, u, "cannot persist the handoff record");

	/* Everything on disk before the machine goes down. */
	job_blocking_begin(); /* a job's worker: the loop answers while the disk syncs */
	sync();
	(void)job_blocking_end();

	log_event(LOG_NOTICE, LOG_MID_HANDOFF, u->id, "Update %s: requesting kexec%s into %s.",
	          u->id, c->panic_kernel ? " from the crash kernel" : "", u->kernel_version);
	CONTEXT_FOREACH_STEP (s, c)
		if (s->vt->handoff_request)
			s->vt->handoff_request(c, u, s->userdata);
	r = c->ops.request_kexec ? c->ops.request_kexec(c, u, c->ops_userdata) : -ENOTCONN;
	if (r < 0) {
		if (asprintf(&msg, "requesting the kexec reboot failed: %s", strerror(-r)) < 0)
			return -ENOMEM;
		return context_commit_fail(c, u, msg);
	}
	return 0;
}

/* The staged update u becomes committing with the policy's mode, reason and decisions; if
 * that cannot be persisted, u is left exactly as it was (no stamp, no decisions). */
static int commit_begin_transition(Context *c, Update *u, HandoffMode mode, char **why,
                                   json_object **decisions) {
	HandoffMode old_mode = u->handoff;
	char *old_reason = u->handoff_reason;
	json_object *old_decisions = u->decisions;
	int r;

	u->handoff = mode;
	u->handoff_reason = TAKE_PTR(*why);
	if (context_commit_check_step(c))
		u->decisions = TAKE_PTR(*decisions);
	r = context_transition_stamped(c, u, "commit-requested", true, UPDATE_COMMITTING,
	                               PHASE_PRE_HANDOFF, 10);
	if (r < 0 && r != -ECANCELED) {
		/* Back to the caller's cleanup: what was taken, freed there. */
		*why = u->handoff_reason;
		u->handoff_reason = old_reason;
		u->handoff = old_mode;
		if (context_commit_check_step(c)) {
			*decisions = u->decisions;
			u->decisions = old_decisions;
		}
		return r;
	}
	free(old_reason);
	if (context_commit_check_step(c))
		json_object_put(old_decisions);
	return r;
}

int context_commit_begin(Context *c, const char *id, Update **ret, sd_bus_error *error) {
	_cleanup_(json_object_putp) json_object *decisions = NULL;
	_cleanup_free_ char *why = NULL, *refusal = NULL;
	HandoffMode mode;
	Update *u;
	int r;

	/* The preconditions and the VM decisions: a refusal changes nothing. */
	r = context_decide_commit(c, id, &u, &mode, &why, &decisions, &refusal, error);
	if (r < 0)
		return r;
	if (r == 0)
		return sd_bus_error_setf(error, UPGRADE_ERROR_POLICY_REFUSED,
		                         "The policy refuses to commit update %s: %s", u->id,
		                         refusal ?: "(no reason given)");

	/* The staged image was built verified; the decision may switch it (no I/O,
	 * no hashing: the digests were recorded at stage). */
	if (c->backend->set_mode) {
		r = c->backend->set_mode(c->root, mode);
		if (r < 0)
			return sd_bus_error_setf(
			        error, UPGRADE_ERROR_KEXEC_FAILED,
			        "Cannot switch the staged image of %s to %s mode: %s.", u->id,
			        handoff_mode_to_string(mode), strerror(-r));
	}

	r = commit_begin_transition(c, u, mode, &why, &decisions);
	if (r == -ECANCELED)
		return r;
	if (r < 0) {
		/* Still staged: the image goes back to the mode stage built it in. */
		if (c->backend->set_mode && mode != HANDOFF_MODE_VERIFIED)
			(void)c->backend->set_mode(c->root, HANDOFF_MODE_VERIFIED);
		return sd_bus_error_setf(error, UPGRADE_ERROR_PERSIST_FAILED,
		                         "Cannot write the update record: %s.", strerror(-r));
	}
	log_event(LOG_INFO, LOG_MID_COMMIT, u->id, "Update %s: commit to %s began (handoff %s).",
	          u->id, u->kernel_version, handoff_mode_to_string(u->handoff));
	*ret = u;
	return 0;
}

int context_commit_run(Context *c, Update *u) {
	_cleanup_free_ char *why = NULL;
	int r;

	if (u->state != UPDATE_COMMITTING || !streq(u->phase, PHASE_PRE_HANDOFF))
		return -ESTALE;

	/* 1. Pre-handoff steps (policy, VM checkpoints). */
	r = context_run_hooks(c, u, HOOK_PRE_HANDOFF, false, &why);
	if (r == -ECANCELED)
		return r;
	if (r < 0)
		return context_commit_fail(c, u, why ?: "a pre-handoff step failed");
	/* The last moment a Cancel is heard: the handoff record comes next. */
	if (c->ops.cancel_requested && c->ops.cancel_requested(c, u, c->ops_userdata))
		return context_commit_fail(c, u, "cancelled before the handoff record");
	if (c->handoff_hold)
		c->handoff_hold(c, u, c->handoff_hold_userdata);

	/* 2. The handoff record, with the old kernel's measurements and the
	 * reboot-request clock sample, then the reboot. */
	CONTEXT_FOREACH_STEP (s, c)
		if (s->vt->handoff_prepare)
			s->vt->handoff_prepare(c, u, s->userdata);
	return context_handoff(c, u, "handoff");
}

void context_handoff_result(Context *c, Update *u, int r, const char *why) {
	_cleanup_free_ char *msg = NULL;

	if (u->state != UPDATE_COMMITTING || !streq(u->phase, PHASE_HANDOFF))
		return;
	if (r < 0) {
		/* On the crash kernel context_commit_fail() gives nothing back. */
		if (asprintf(&msg, "systemd refused the kexec reboot: %s", why ?: strerror(-r)) < 0)
			msg = NULL;
		(void)context_commit_fail(c, u, msg ?: "systemd refused the kexec reboot");
		return;
	}
	/* Past the point of no return. Best effort: the system is going down. */
	(void)context_transition_stamped(c, u, "handoff-requested", true, UPDATE_COMMITTING,
	                                 PHASE_HANDOFF_REQUESTED, 100);
}

int context_abort_stuck(Context *c, Update *u) {
	_cleanup_free_ char *why = NULL;

	if (u->state != UPDATE_COMMITTING || c->panic_kernel ||
	    (u->handoff_boot_id && !streq(u->handoff_boot_id, c->boot_id)))
		return -ESTALE;
	if (streq(u->phase, PHASE_ROLLBACK))
		return context_commit_fail(c, u, u->error ?: "rollback resumed by Cancel");
	if (asprintf(&why, "cancelled while stuck in phase '%s' before the kexec", u->phase) < 0)
		return -ENOMEM;
	return context_commit_fail(c, u, why);
}

int context_cancel(Context *c, const char *id, sd_bus_error *error) {
	Update *u;
	int r;

	r = context_lookup(c, id, &u, error);
	if (r < 0)
		return r;
	if (u->state != UPDATE_STAGED)
		return sd_bus_error_setf(error, UPGRADE_ERROR_BAD_STATE,
		                         "Update %s is %s: nothing left to cancel.", u->id,
		                         update_state_to_string(u->state));

	r = context_transition_stamped(c, u, "cancelled", false, UPDATE_CANCELLED, PHASE_CANCELLED,
	                               100);
	if (r == -ECANCELED)
		return r;
	if (r < 0)
		return sd_bus_error_setf(error, UPGRADE_ERROR_PERSIST_FAILED,
		                         "Cannot write the update record: %s.", strerror(-r));

	r = c->backend->unload(c->root, 0);
	if (r < 0)
		log_warning_errno(r, "Failed to unload the image of update %s, ignoring: %m",
		                  u->id);
	context_give_back_crash_image(c, u);
	(void)context_finish(c, u, "cancelled");
	return 0;
}
