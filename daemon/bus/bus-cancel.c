/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Cancel() of an update stuck in committing in this boot: no commit job runs it any more
 * (the kexec systemd accepted never came, the daemon restarted while it waited, a step could
 * not persist). If the kexec is not under way, the update is rolled back like a failed commit
 * (its VMs given back, the image unloaded) and ends cancelled; if it is, Cancel says which
 * systemd job to stop first. docs/reliability.md, "Stuck updates".
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "bus.h"
#include "fileio.h"
#include "job.h"
#include "log.h"
#include "macros.h"
#include "path-util.h"
#include "string-util.h"
#include "upgrade-bus.h"

/* A job of systemd's for one of these units: the machine is going down (or over). */
static const char *const going_down_units[] = { "kexec.target", "reboot.target", "poweroff.target",
	                                        "halt.target", "shutdown.target" };

typedef struct StuckCancel {
	Manager *manager;
	sd_bus_message *message;
	char *id;
	sd_bus_error error;
} StuckCancel;

static void stuck_cancel_free(void *userdata) {
	StuckCancel *s = userdata;

	if (!s)
		return;
	sd_bus_message_unref(s->message);
	sd_bus_error_free(&s->error);
	free(s->id);
	free(s);
}

static StuckCancel *stuck_cancel_new(Manager *mgr, sd_bus_message *m, const char *id) {
	StuckCancel *s = calloc(1, sizeof(*s));

	if (!s || !(s->id = strdup(id))) {
		free(s);
		return NULL;
	}
	s->manager = mgr;
	s->message = sd_bus_message_ref(m);
	s->error = SD_BUS_ERROR_NULL;
	return s;
}

/* ---- the rollback, a job (libvirt calls) ---- */

static int stuck_cancel_run(Job *j, void *userdata) {
	StuckCancel *s = userdata;
	Update *u = context_find(s->manager->context, s->id);
	int r;

	if (!u)
		return -ENOENT;
	log_set_update_id(u->id);
	log_notice("Update %s: cancel of the stuck update (phase %s), rolling it back.", u->id,
	           u->phase);
	r = context_abort_stuck(s->manager->context, u);
	if (r == -ESTALE)
		return sd_bus_error_setf(&s->error, UPGRADE_ERROR_BAD_STATE,
		                         "Update %s is %s now: nothing to roll back.", u->id,
		                         update_state_to_string(u->state));
	return r;
}

static void stuck_cancel_done(Job *j, int r, void *userdata) {
	StuckCancel *s = userdata;
	Manager *mgr = s->manager;
	Update *u = context_find(mgr->context, s->id);

	free(mgr->abort_id);
	mgr->abort_id = NULL;
	if (sd_bus_error_is_set(&s->error))
		(void)sd_bus_reply_method_error(s->message, &s->error);
	else if (r < 0)
		(void)sd_bus_reply_method_errorf(s->message, UPGRADE_ERROR_BAD_STATE,
		                                 "Rolling back update %s failed: %s.", s->id,
		                                 strerror(-r));
	else if (u && u->state != UPDATE_CANCELLED)
		(void)sd_bus_reply_method_errorf(s->message, UPGRADE_ERROR_BAD_STATE,
		                                 "Update %s was rolled back but ended %s: %s",
		                                 s->id, update_state_to_string(u->state),
		                                 strna(u->error));
	else
		(void)sd_bus_reply_method_return(s->message, NULL);
	stuck_cancel_free(s);
}

static int stuck_cancel_start(StuckCancel *s) {
	Manager *mgr = s->manager;
	int r;

	mgr->abort_id = strdup(s->id);
	if (!mgr->abort_id)
		return -ENOMEM;
	r = job_start("cancel-stuck", 0, stuck_cancel_run, stuck_cancel_done, s, NULL);
	if (r < 0) {
		free(mgr->abort_id);
		mgr->abort_id = NULL;
	}
	return r;
}

/* ---- is the kexec under way? ---- */

/* The refusal when it is: what to stop first, and the way out after. */
static int refuse_pending(sd_bus_error *error, const char *id, const char *what, const char *stop) {
	return sd_bus_error_setf(error, UPGRADE_ERROR_BAD_STATE,
	                         "Update %s is past the point of no return: %s. Wait for the "
	                         "kexec; to stay on this kernel instead, %s first, then "
	                         "`upgradectl cancel %s` rolls the update back.",
	                         id, what, stop, id);
}

/* systemd's ListJobs() answer: a job for a unit that takes the machine down refuses. */
static int jobs_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
	StuckCancel *s = userdata, *copy;
	const sd_bus_error *e = sd_bus_message_get_error(reply);
	const char *unit, *type, *state, *job_path, *unit_path;
	uint32_t job;
	int r;

	if (e && !sd_bus_error_has_names(e, SD_BUS_ERROR_SERVICE_UNKNOWN,
	                                 SD_BUS_ERROR_NAME_HAS_NO_OWNER)) {
		(void)sd_bus_reply_method_errorf(
		        s->message, UPGRADE_ERROR_BAD_STATE,
		        "Cannot ask systemd whether the kexec of update %s "
		        "is under way (%s); nothing was changed.",
		        s->id, e->message ?: e->name);
		return 0;
	}
	/* No systemd on this bus: nothing can be under way. */
	r = e ? 0 : sd_bus_message_enter_container(reply, 'a', "(usssoo)");
	while (r > 0 && (r = sd_bus_message_read(reply, "(usssoo)", &job, &unit, &type, &state,
	                                         &job_path, &unit_path)) > 0)
		for (size_t i = 0; i < ELEMENTSOF(going_down_units); i++) {
			_cleanup_free_ char *what = NULL, *stop = NULL;

			if (!streq(unit, going_down_units[i]))
				continue;
			if (asprintf(&what, "systemd has job %u (%s %s, %s) queued", job, type,
			             unit, state) < 0 ||
			    asprintf(&stop, "stop that job (`systemctl cancel %u`)", job) < 0) {
				(void)sd_bus_reply_method_errno(s->message, ENOMEM, NULL);
				return 0;
			}
			(void)refuse_pending(&s->error, s->id, what, stop);
			(void)sd_bus_reply_method_error(s->message, &s->error);
			return 0;
		}
	if (r < 0) {
		(void)sd_bus_reply_method_errno(s->message, -r, NULL);
		return 0;
	}
	/* The job gets its own copy: s belongs to the call's slot. */
	copy = stuck_cancel_new(s->manager, s->message, s->id);
	r = copy ? stuck_cancel_start(copy) : -ENOMEM;
	if (r < 0) {
		stuck_cancel_free(copy);
		(void)sd_bus_reply_method_errno(s->message, -r, NULL);
	}
	return 0;
}

/* The record trigger (tests): the request recorded for this update is what is "under way". */
static bool record_pending(Manager *mgr, const char *id) {
	_cleanup_free_ char *path = NULL, *data = NULL, *mark = NULL;

	return path_prefix_root(context_root(mgr->context), "/run/upgraded/kexec-requested.json",
	                        &path) >= 0 &&
	       read_file_full(path, 4096, &data, NULL) >= 0 &&
	       asprintf(&mark, "\"id\":\"%s\"", id) >= 0 && strstr(data, mark);
}

int manager_cancel_stuck(Manager *mgr, sd_bus_message *m, Update *u, sd_bus_error *error) {
	sd_bus_slot *slot = NULL;
	StuckCancel *s;
	int r;

	if (mgr->abort_id)
		return sd_bus_error_setf(error, UPGRADE_ERROR_BAD_STATE,
		                         "Update %s is being rolled back already.", mgr->abort_id);
	if (u->handoff_boot_id && !streq(u->handoff_boot_id, context_boot_id(mgr->context)))
		return sd_bus_error_setf(
		        error, UPGRADE_ERROR_BAD_STATE,
		        "Update %s handed over in another boot: restart "
		        "upgraded.service, its recovery completes or rolls it back.",
		        u->id);
	if (mgr->trigger == KEXEC_TRIGGER_RECORD && record_pending(mgr, u->id))
		return refuse_pending(error, u->id, "its kexec request is recorded (test trigger)",
		                      "remove /run/upgraded/kexec-requested.json");

	s = stuck_cancel_new(mgr, m, u->id);
	if (!s)
		return -ENOMEM;
	if (mgr->trigger == KEXEC_TRIGGER_RECORD) {
		r = stuck_cancel_start(s);
		if (r < 0)
			stuck_cancel_free(s);
		return r < 0 ? r : 1;
	}
	/* s belongs to the call's slot (freed with it, also when the bus goes first). */
	r = sd_bus_call_method_async(
	        mgr->bus, &slot, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
	        "org.freedesktop.systemd1.Manager", "ListJobs", jobs_reply, s, NULL);
	if (r < 0) {
		stuck_cancel_free(s);
		return r;
	}
	r = bus_slot_own(slot, s, stuck_cancel_free);
	if (r < 0)
		return r;
	return 1; /* jobs_reply() answers */
}
