/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Reload(): the policy read again, at rest only. `systemctl reload upgraded` calls it
 * (ExecReload= in upgraded.service, through busctl, which waits for the reply). Whole or not
 * at all: a configuration with errors, or work that reads the policy while it runs, is
 * refused with a named error and the policy in effect stays.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>

#include "bus.h"
#include "job.h"
#include "log-ids.h"
#include "log.h"
#include "macros.h"
#include "policy.h"
#include "upgrade-bus.h"

/* Why the policy cannot change now, in error (Busy), or 0. A commit, its rollback and the
 * restores on the new kernel read the policy step by step (the VM plan, the shutdown mode):
 * they must end under the policy they began with. Any other job (the recovery, Stage,
 * PlanCommit, RestoreVM) holds it across libvirt calls or file reads. */
static int reload_busy(Manager *mgr, sd_bus_error *error) {
	const Update *u = context_active(mgr->context);

	if (mgr->commit_job)
		return sd_bus_error_setf(error, UPGRADE_ERROR_BUSY,
		                         "A commit is running (update %s): it keeps the policy it "
		                         "began with. Reload once it ended.",
		                         u ? u->id : strna(mgr->commit_id));
	if (u && (u->state == UPDATE_COMMITTING || u->state == UPDATE_COMPLETING))
		return sd_bus_error_setf(error, UPGRADE_ERROR_BUSY,
		                         "Update %s is %s (phase %s): it keeps the policy it began "
		                         "with. Reload once it ended (a stuck one: `upgradectl "
		                         "cancel %s`).",
		                         u->id, update_state_to_string(u->state), u->phase, u->id);
	if (job_count() > 0)
		return sd_bus_error_setf(
		        error, UPGRADE_ERROR_BUSY,
		        "%u job(s) running (the recovery, Stage, PlanCommit or RestoreVM) "
		        "read the policy. Reload once they ended.",
		        job_count());
	return 0;
}

/* The load's errors, "FILE:LINE: message" joined with "; ". */
static char *errors_to_text(const PolicyErrors *e) {
	_cleanup_free_ char *lines = NULL;
	char *text, *t;
	size_t size = 0;
	FILE *f = open_memstream(&lines, &size);

	if (!f)
		return NULL;
	policy_errors_print(e, f);
	if (fclose(f) != 0)
		return NULL;
	while (size > 0 && lines[size - 1] == '\n')
		lines[--size] = '\0';
	text = t = malloc(2 * size + 1); /* every "\n" becomes "; " */
	if (!text)
		return NULL;
	for (const char *l = lines; *l; l++)
		if (*l == '\n') {
			*t++ = ';';
			*t++ = ' ';
		} else
			*t++ = *l;
	*t = '\0';
	return text;
}

static int reload_refuse(Manager *mgr, sd_bus_message *m, const sd_bus_error *error) {
	const Update *u = context_active(mgr->context);

	log_event(LOG_WARNING, LOG_MID_RELOAD_REFUSED, u ? u->id : NULL,
	          "Reload refused, the previous policy stays in effect: %s", error->message);
	(void)sd_notify(false, "READY=1");
	return sd_bus_reply_method_error(m, error);
}

static int reload_authorized(sd_bus_message *m, Manager *mgr, sd_bus_error *error) {
	_cleanup_(sd_bus_error_free) sd_bus_error refusal = SD_BUS_ERROR_NULL;
	_cleanup_(policy_freep) Policy *p = NULL;
	_cleanup_free_ char *text = NULL;
	const Update *u = context_active(mgr->context);
	PolicyErrors errs = {};
	int r;

	(void)sd_notify(false, "RELOADING=1");
	/* 1. At rest only. */
	if (reload_busy(mgr, &refusal) < 0)
		return reload_refuse(mgr, m, &refusal);

	/* 2. The files, whole or not at all. */
	r = policy_load(context_root(mgr->context), &p, &errs);
	if (r < 0) {
		size_t n = errs.n;

		text = n > 0 ? errors_to_text(&errs) : NULL;
		policy_errors_done(&errs);
		if (n > 0 && !text)
			return -ENOMEM;
		(void)sd_bus_error_setf(
		        &refusal, UPGRADE_ERROR_INVALID_CONFIG,
		        "The configuration has errors, the previous policy stays in "
		        "effect: %s",
		        text ?: strerror(-r));
		return reload_refuse(mgr, m, &refusal);
	}
	policy_errors_done(&errs);

	/* 3. Applied: the next stage, commit and Describe() see it. */
	r = context_set_policy(mgr->context, p);
	if (r < 0)
		return r;
	TAKE_PTR(p);
	log_event(LOG_NOTICE, LOG_MID_RELOADED, u ? u->id : NULL,
	          "Policy reloaded from the configuration files.");
	(void)sd_notify(false, "READY=1");
	return sd_bus_reply_method_return(m, NULL);
}

int method_reload(sd_bus_message *m, void *userdata, sd_bus_error *error) {
	/* 1. No arguments; 2. authorize; 3. reload. */
	return bus_authorize(userdata, m, UPGRADE_POLKIT_ACTION_RELOAD, reload_authorized, error);
}
