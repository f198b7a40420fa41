/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Stage() as a job: the method checks everything that costs no reading (the request, the
 * files' paths, owners, modes and sizes, the kernel's header) on the event loop and answers
 * at once when it refuses; the digests and the load run on a worker, so that the loop keeps
 * answering Describe() and the others while a large initrd is read. The call's reply comes
 * from the job once the update is staged, or with the error that stopped it. Cancel() and
 * SIGTERM stop the job (docs/dbus-api.md, "Stage").
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "bus.h"
#include "bus-options.h"
#include "job.h"
#include "log.h"
#include "macros.h"
#include "string-util.h"
#include "upgrade-bus.h"

/* One Stage() call answered by its job. */
typedef struct StageCall {
	Manager *manager;
	sd_bus_message *message;
	StagePlan *plan;
	sd_bus_error error;
	char *path; /* the staged update's object */
} StageCall;

static void stage_call_free(StageCall *sc) {
	if (!sc)
		return;
	sd_bus_message_unref(sc->message);
	stage_plan_free(sc->plan);
	sd_bus_error_free(&sc->error);
	free(sc->path);
	free(sc);
}

/* On the worker, state lock held but while the files are read. */
static int stage_job_run(Job *j, void *userdata) {
	StageCall *sc = userdata;
	Update *u;
	int r;

	log_set_update_id(stage_plan_id(sc->plan));
	job_blocking_begin(); /* the digests touch no state: the loop answers meanwhile */
	r = stage_plan_hash(sc->plan, job_cancel_flag(j), &sc->error);
	(void)job_blocking_end();
	if (r == -ECANCELED && !sd_bus_error_is_set(&sc->error))
		r = sd_bus_error_setf(&sc->error, UPGRADE_ERROR_CANCELLED,
		                      "Staging of update %s was cancelled while its files were "
		                      "read; nothing was staged.",
		                      stage_plan_id(sc->plan));
	if (r < 0)
		return r;
	r = context_stage_finish(sc->manager->context, sc->plan, job_cancel_flag(j), &u,
	                         &sc->error);
	if (r < 0)
		return r;
	return update_object_path(u, &sc->path);
}

/* On the loop: the reply, and the manager free for the next Stage. */
static void stage_job_done(Job *j, int r, void *userdata) {
	StageCall *sc = userdata;
	Manager *mgr = sc->manager;

	mgr->stage_job = NULL;
	free(mgr->stage_id);
	mgr->stage_id = NULL;
	if (sd_bus_error_is_set(&sc->error)) {
		log_info("Staging of update %s ended: %s", stage_plan_id(sc->plan),
		         sc->error.message);
		(void)sd_bus_reply_method_error(sc->message, &sc->error);
	} else if (r < 0)
		(void)sd_bus_reply_method_errno(sc->message, r, NULL);
	else
		(void)sd_bus_reply_method_return(sc->message, "so", stage_plan_id(sc->plan),
		                                 sc->path);
	stage_call_free(sc);
}

static int stage_authorized(sd_bus_message *m, Manager *mgr, sd_bus_error *error) {
	_cleanup_(stage_plan_freep) StagePlan *plan = NULL;
	const char *kernel, *initrd, *cmdline;
	StageRequest req = {};
	StageOptions opts;
	StageCall *sc;
	int r;

	r = sd_bus_message_read(m, "sss", &kernel, &initrd, &cmdline);
	if (r < 0)
		return r;
	r = bus_read_stage_options(m, &opts, error);
	if (r < 0)
		return r;
	if (mgr->stage_job)
		return sd_bus_error_setf(error, UPGRADE_ERROR_ALREADY_STAGED,
		                         "Update %s is being staged (its files are being read); "
		                         "wait for it, or `upgradectl cancel %s`.",
		                         mgr->stage_id, mgr->stage_id);
	req = (StageRequest){ .kernel = kernel,
		              .initrd = initrd,
		              .cmdline = cmdline,
		              .reuse_cmdline = opts.reuse_cmdline };
	/* Everything that reads no more than a header, here: refusals come at once. */
	r = context_stage_prepare(mgr->context, &req, &plan, error);
	if (r < 0)
		return r;
	sc = calloc(1, sizeof(*sc));
	if (!sc)
		return -ENOMEM;
	*sc = (StageCall){ .manager = mgr,
		           .message = sd_bus_message_ref(m),
		           .error = SD_BUS_ERROR_NULL };
	mgr->stage_id = strdup(stage_plan_id(plan));
	if (!mgr->stage_id) {
		stage_call_free(sc);
		return -ENOMEM;
	}
	sc->plan = TAKE_PTR(plan);
	log_info("Staging update %s: reading kernel %s%s%s.", mgr->stage_id, kernel,
	         *initrd ? " and initrd " : "", initrd);
	r = job_start("stage", 0, stage_job_run, stage_job_done, sc, &mgr->stage_job);
	if (r < 0) {
		free(mgr->stage_id);
		mgr->stage_id = NULL;
		stage_call_free(sc);
		return r;
	}
	return 1; /* the job replies */
}

int method_stage(sd_bus_message *m, void *userdata, sd_bus_error *error) {
	Manager *mgr = userdata;
	const char *kernel, *initrd, *cmdline;
	int r;

	/* 1. Read everything; option syntax is checked before asking anyone. */
	r = sd_bus_message_read(m, "sss", &kernel, &initrd, &cmdline);
	if (r < 0)
		return r;
	r = bus_read_stage_options(m, NULL, error);
	if (r < 0)
		return r;
	/* 2. Authorize; 3. stage (files are only looked at for authorized callers). */
	return bus_authorize(mgr, m, UPGRADE_POLKIT_ACTION_STAGE, stage_authorized, error);
}

int manager_cancel_staging(Manager *mgr, sd_bus_message *m, const char *id) {
	int r;

	/* Once staged (the worker announced it, its job not yet ended) it is a staged update. */
	if (!mgr->stage_job || context_active(mgr->context) ||
	    (id && *id && !streq_ptr(id, mgr->stage_id)))
		return 0;
	log_info("Update %s: cancel requested while it is being staged.", mgr->stage_id);
	job_cancel(mgr->stage_job);
	r = sd_bus_reply_method_return(m, NULL);
	return r < 0 ? r : 1;
}
