/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>

#include "bus.h"
#include "bus-options.h"
#include "fileio.h"
#include "job.h"
#include "log.h"
#include "macros.h"
#include "path-util.h"
#include "string-util.h"
#include "upgrade-bus.h"
#include "vm.h"

/* The one Manager (properties of update objects get the Update as userdata). */
static Manager *the_manager;

/* Hands userdata to a floating slot that frees it with destroy, whether the reply
 * came or the bus went away first (the daemon stopping with a call pending). */
int bus_slot_own(sd_bus_slot *slot, void *userdata, sd_bus_destroy_t destroy) {
	int r = sd_bus_slot_set_destroy_callback(slot, destroy);

	if (r < 0) {
		sd_bus_slot_unref(slot);
		destroy(userdata);
		return r;
	}
	r = sd_bus_slot_set_floating(slot, 1);
	sd_bus_slot_unref(slot); /* from now on the bus owns it */
	return r;
}

/* ---- internal functions ---- */

int update_object_path(const Update *u, char **ret) {
	if (asprintf(ret, "%s/%s", UPGRADE_UPDATE_PREFIX, u->id) < 0)
		return -ENOMEM;
	return 0;
}

/* ---- properties ---- */

static int property_get_state(sd_bus *bus, const char *path, const char *iface,
                              const char *property, sd_bus_message *reply, void *userdata,
                              sd_bus_error *error) {
	Manager *mgr = userdata;

	return sd_bus_message_append(reply, "s", context_state(mgr->context));
}

static int property_get_staged_kernel(sd_bus *bus, const char *path, const char *iface,
                                      const char *property, sd_bus_message *reply, void *userdata,
                                      sd_bus_error *error) {
	Update *u = context_active(((Manager *)userdata)->context);

	return sd_bus_message_append(reply, "s", u ? u->kernel.path : "");
}

static int property_get_running_kernel(sd_bus *bus, const char *path, const char *iface,
                                       const char *property, sd_bus_message *reply, void *userdata,
                                       sd_bus_error *error) {
	return sd_bus_message_append(reply, "s",
	                             context_running_kernel(((Manager *)userdata)->context));
}

static int property_get_last_report(sd_bus *bus, const char *path, const char *iface,
                                    const char *property, sd_bus_message *reply, void *userdata,
                                    sd_bus_error *error) {
	return sd_bus_message_append(reply, "s",
	                             strempty(context_last_report(((Manager *)userdata)->context)));
}

static int property_get_backend(sd_bus *bus, const char *path, const char *iface,
                                const char *property, sd_bus_message *reply, void *userdata,
                                sd_bus_error *error) {
	return sd_bus_message_append(reply, "s",
	                             context_backend(((Manager *)userdata)->context)->name);
}

static int property_get_update_state(sd_bus *bus, const char *path, const char *iface,
                                     const char *property, sd_bus_message *reply, void *userdata,
                                     sd_bus_error *error) {
	return sd_bus_message_append(reply, "s",
	                             update_state_to_string(((Update *)userdata)->state));
}

/* "verified", "fast", or "" before the commit decided it. */
static int property_get_update_handoff(sd_bus *bus, const char *path, const char *iface,
                                       const char *property, sd_bus_message *reply, void *userdata,
                                       sd_bus_error *error) {
	return sd_bus_message_append(
	        reply, "s", strempty(handoff_mode_to_string(((Update *)userdata)->handoff)));
}

static int property_get_update_string(sd_bus *bus, const char *path, const char *iface,
                                      const char *property, sd_bus_message *reply, void *userdata,
                                      sd_bus_error *error) {
	Update *u = userdata;
	const char *v = NULL;

	if (streq(property, "Kernel"))
		v = u->kernel.path;
	else if (streq(property, "KernelSha256"))
		v = u->kernel.sha256;
	else if (streq(property, "Initrd"))
		v = u->initrd.path;
	return sd_bus_message_append(reply, "s", strempty(v));
}

/* ---- methods ---- */

/* ---- jobs: Commit, PlanCommit, RestoreVM run off the event loop (job.h); Stage too
 * (bus-stage.c) ---- */

/* One method call answered by a job: the worker fills r/error/json, the loop replies. */
typedef struct CallJob {
	Manager *manager;
	sd_bus_message *message;
	char *arg;
	sd_bus_error error;
	char *json;
	char *path;
	bool replied;
} CallJob;

static void call_job_free(CallJob *cj) {
	if (!cj)
		return;
	sd_bus_message_unref(cj->message);
	sd_bus_error_free(&cj->error);
	free(cj->arg);
	free(cj->json);
	free(cj->path);
	free(cj);
}

static CallJob *call_job_new(Manager *mgr, sd_bus_message *m, const char *arg) {
	CallJob *cj = calloc(1, sizeof(*cj));

	if (!cj)
		return NULL;
	cj->manager = mgr;
	cj->message = sd_bus_message_ref(m);
	cj->error = SD_BUS_ERROR_NULL;
	cj->arg = strdup(arg);
	if (!cj->arg) {
		call_job_free(cj);
		return NULL;
	}
	return cj;
}

/* The reply of a job's call (on the loop): its error, a timeout, or the value. */
static void call_job_reply(CallJob *cj, int r) {
	if (cj->replied)
		return;
	cj->replied = true;
	if (r == -ETIMEDOUT && !sd_bus_error_is_set(&cj->error))
		(void)sd_bus_reply_method_errorf(
		        cj->message, UPGRADE_ERROR_LIBVIRT_TIMEOUT,
		        "libvirtd did not answer within %.0f s; nothing was changed.",
		        (double)vm_call_timeout() / 1e6);
	else if (sd_bus_error_is_set(&cj->error))
		(void)sd_bus_reply_method_error(cj->message, &cj->error);
	else if (r < 0)
		(void)sd_bus_reply_method_errno(cj->message, r, NULL);
	else if (cj->path)
		(void)sd_bus_reply_method_return(cj->message, "o", cj->path);
	else if (cj->json)
		(void)sd_bus_reply_method_return(cj->message, "s", cj->json);
	else
		(void)sd_bus_reply_method_return(cj->message, NULL);
}

static void call_job_done(Job *j, int r, void *userdata) {
	CallJob *cj = userdata;

	if (r < 0 && r != -ETIMEDOUT)
		log_debug("Job %s ended: %s", job_name(j), strerror(-r));
	call_job_reply(cj, r);
	call_job_free(cj);
}

/* Deadline of a job that only asks libvirt (PlanCommit): connecting plus one call, each
 * bounded by the call timeout, and some slack. */
static uint64_t query_deadline(void) {
	return 2 * vm_call_timeout() + 5ULL * 1000000ULL;
}

static void commit_replied(void *userdata) {
	call_job_reply(userdata, 0);
}

/* The worker of Commit: the decision (libvirt inventory, policy), the reply with the update's
 * object, then the pre-handoff steps and the handoff, all with the state lock except inside
 * libvirt. */
static int commit_job_run(Job *j, void *userdata) {
	CallJob *cj = userdata;
	Manager *mgr = cj->manager;
	Update *u;
	int r;

	/* 1. staged -> committing, persisted. */
	r = context_commit_begin(mgr->context, cj->arg, &u, &cj->error);
	if (r < 0)
		return r;
	log_set_update_id(u->id); /* this worker's lines carry UPGRADED_ID= */
	r = update_object_path(u, &cj->path);
	if (r < 0)
		return r;
	/* 2. The caller gets its answer now and follows the update object. */
	(void)job_defer(commit_replied, cj, NULL);
	free(mgr->commit_id);
	mgr->commit_id = strdup(u->id);
	/* 3. The steps. */
	r = context_commit_run(mgr->context, u);
	if (r < 0)
		log_error_errno(r, "Commit of update %s stopped: %m", u->id);
	return 0;
}

static void commit_job_done(Job *j, int r, void *userdata) {
	CallJob *cj = userdata;

	cj->manager->commit_job = NULL;
	call_job_done(j, r, cj);
}

static int commit_authorized(sd_bus_message *m, Manager *mgr, sd_bus_error *error) {
	const char *id;
	CallJob *cj;
	int r;

	r = sd_bus_message_read(m, "s", &id);
	if (r < 0)
		return r;
	if (mgr->commit_job)
		return sd_bus_error_setf(error, UPGRADE_ERROR_BAD_STATE,
		                         "A commit is already running (update %s).",
		                         strna(mgr->commit_id));
	cj = call_job_new(mgr, m, id);
	if (!cj)
		return -ENOMEM;
	r = job_start("commit", 0, commit_job_run, commit_job_done, cj, &mgr->commit_job);
	if (r < 0) {
		call_job_free(cj);
		return r;
	}
	return 1; /* the job replies */
}

static int method_commit(sd_bus_message *m, void *userdata, sd_bus_error *error) {
	const char *id;
	int r;

	r = sd_bus_message_read(m, "s", &id);
	if (r < 0)
		return r;
	r = bus_read_commit_options(m, error);
	if (r < 0)
		return r;
	return bus_authorize(userdata, m, UPGRADE_POLKIT_ACTION_COMMIT, commit_authorized, error);
}

static int cancel_authorized(sd_bus_message *m, Manager *mgr, sd_bus_error *error) {
	const char *id;
	bool running;
	Update *u;
	int r;

	r = sd_bus_message_read(m, "s", &id);
	if (r < 0)
		return r;
	r = manager_cancel_staging(mgr, m, id);
	if (r != 0)
		return r;
	r = context_lookup(mgr->context, id, &u, error);
	if (r < 0)
		return r;
	running = mgr->commit_job && streq_ptr(mgr->commit_id, u->id);
	/* A commit before the point of no return: its job stops the saves, gives every VM
	 * back and removes the images; State tells when that is done. */
	if (u->state == UPDATE_COMMITTING && running && streq(u->phase, PHASE_PRE_HANDOFF)) {
		log_info("Update %s: cancel requested during the pre-handoff steps.", u->id);
		job_cancel(mgr->commit_job);
		return sd_bus_reply_method_return(m, NULL);
	}
	if (u->state == UPDATE_COMMITTING && running)
		return sd_bus_error_setf(error, UPGRADE_ERROR_BAD_STATE,
		                         "Update %s is writing its handoff record and requesting "
		                         "the kexec (phase %s): it cannot be stopped half-way. If "
		                         "no kexec follows, `upgradectl cancel %s` rolls it back "
		                         "once its commit job ended.",
		                         u->id, u->phase, u->id);
	/* Stuck: no job runs it any more (upgraded(8), STUCK UPDATES). */
	if (u->state == UPDATE_COMMITTING)
		return manager_cancel_stuck(mgr, m, u, error);
	if (u->state == UPDATE_COMPLETING)
		return sd_bus_error_setf(error, UPGRADE_ERROR_BAD_STATE,
		                         "Update %s is completing on the new kernel (phase %s): "
		                         "nothing can be cancelled. Wait for it (`upgradectl "
		                         "watch`); a VM left saved is restored with `upgradectl "
		                         "restore-vm NAME`.",
		                         u->id, u->phase);
	r = context_cancel(mgr->context, id, error);
	if (r < 0)
		return r;
	return sd_bus_reply_method_return(m, NULL);
}

static int method_cancel(sd_bus_message *m, void *userdata, sd_bus_error *error) {
	const char *id;
	int r;

	r = sd_bus_message_read(m, "s", &id);
	if (r < 0)
		return r;
	return bus_authorize(userdata, m, UPGRADE_POLKIT_ACTION_CANCEL, cancel_authorized, error);
}

static int method_list_updates(sd_bus_message *m, void *userdata, sd_bus_error *error) {
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	Context *c = ((Manager *)userdata)->context;
	Update *const *updates;
	size_t n;
	int r;

	r = sd_bus_message_new_method_return(m, &reply);
	if (r < 0)
		return r;
	r = sd_bus_message_open_container(reply, 'a', "(sso)");
	if (r < 0)
		return r;
	updates = context_updates(c, &n);
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *path = NULL;
		Update *u = updates[i];

		r = update_object_path(u, &path);
		if (r < 0)
			return r;
		r = sd_bus_message_append(reply, "(sso)", u->id, update_state_to_string(u->state),
		                          path);
		if (r < 0)
			return r;
	}
	r = sd_bus_message_close_container(reply);
	if (r < 0)
		return r;
	return sd_bus_send(NULL, reply, NULL);
}

static int method_get_report(sd_bus_message *m, void *userdata, sd_bus_error *error) {
	_cleanup_free_ char *json = NULL;
	const char *id;
	int r;

	r = sd_bus_message_read(m, "s", &id);
	if (r < 0)
		return r;
	r = context_get_report(((Manager *)userdata)->context, id, &json, error);
	if (r < 0)
		return r;
	return sd_bus_reply_method_return(m, "s", json);
}

static int plan_job_run(Job *j, void *userdata) {
	CallJob *cj = userdata;

	return context_plan_commit(cj->manager->context, cj->arg, &cj->json, &cj->error);
}

static int method_plan_commit(sd_bus_message *m, void *userdata, sd_bus_error *error) {
	const char *id;
	CallJob *cj;
	int r;

	/* Open to every caller, and it asks libvirt: a job with a deadline, never the loop. */
	r = sd_bus_message_read(m, "s", &id);
	if (r < 0)
		return r;
	cj = call_job_new(userdata, m, id);
	if (!cj)
		return -ENOMEM;
	r = job_start("plan-commit", query_deadline(), plan_job_run, call_job_done, cj, NULL);
	if (r < 0) {
		call_job_free(cj);
		return r;
	}
	return 1;
}

static int restore_vm_job_run(Job *j, void *userdata) {
	CallJob *cj = userdata;

	return vms_restore_one(cj->manager->vms, cj->arg, &cj->error);
}

static int restore_vm_authorized(sd_bus_message *m, Manager *mgr, sd_bus_error *error) {
	const char *name;
	CallJob *cj;
	int r;

	r = sd_bus_message_read(m, "s", &name);
	if (r < 0)
		return r;
	if (!mgr->vms)
		return sd_bus_error_setf(error, UPGRADE_ERROR_VM_FAILED,
		                         "VMs are not managed here.");
	cj = call_job_new(mgr, m, name);
	if (!cj)
		return -ENOMEM;
	r = job_start("restore-vm", 0, restore_vm_job_run, call_job_done, cj, NULL);
	if (r < 0) {
		call_job_free(cj);
		return r;
	}
	return 1;
}

static int method_restore_vm(sd_bus_message *m, void *userdata, sd_bus_error *error) {
	const char *name;
	int r;

	/* 1. Read and validate; 2. authorize; 3. restore (a job: the loop answers meanwhile). */
	r = sd_bus_message_read(m, "s", &name);
	if (r < 0)
		return r;
	if (!*name || strlen(name) > 256 || string_has_cc(name))
		return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_VM_NAME,
		                         "'%s' is not a VM name.", QUOTE_CUT(name, 64));
	return bus_authorize(userdata, m, UPGRADE_POLKIT_ACTION_RESTORE_VM, restore_vm_authorized,
	                     error);
}

static int property_get_vms(sd_bus *bus, const char *path, const char *iface, const char *property,
                            sd_bus_message *reply, void *userdata, sd_bus_error *error) {
	return vms_append_property(userdata, reply);
}

static int property_get_vm_transfers(sd_bus *bus, const char *path, const char *iface,
                                     const char *property, sd_bus_message *reply, void *userdata,
                                     sd_bus_error *error) {
	return vms_append_transfers(the_manager ? the_manager->vms : NULL, userdata, reply);
}

/* When the update's current operation began (CLOCK_REALTIME µs): the commit, or on the new
 * kernel its boot; 0 before. Watchers count the elapsed time from it. */
static int property_get_started(sd_bus *bus, const char *path, const char *iface,
                                const char *property, sd_bus_message *reply, void *userdata,
                                sd_bus_error *error) {
	const Update *u = userdata;
	const UpdateStamp *st = update_find_stamp(u, "booted");

	if (!st || u->state != UPDATE_COMPLETING)
		st = update_find_stamp(u, "commit-requested") ?: st;
	return sd_bus_message_append(reply, "t", st ? st->realtime_usec : (uint64_t)0);
}

static int method_describe(sd_bus_message *m, void *userdata, sd_bus_error *error) {
	_cleanup_free_ char *json = NULL;
	int r;

	r = context_describe(((Manager *)userdata)->context, &json);
	if (r < 0)
		return r;
	return sd_bus_reply_method_return(m, "s", json);
}

static const sd_bus_vtable manager_vtable[] = {
	SD_BUS_VTABLE_START(0),
	SD_BUS_PROPERTY("State", "s", property_get_state, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
	SD_BUS_PROPERTY("StagedKernel", "s", property_get_staged_kernel, 0,
	                SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
	SD_BUS_PROPERTY("RunningKernel", "s", property_get_running_kernel, 0,
	                SD_BUS_VTABLE_PROPERTY_CONST),
	SD_BUS_PROPERTY("LastReport", "s", property_get_last_report, 0,
	                SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
	SD_BUS_PROPERTY("Backend", "s", property_get_backend, 0, SD_BUS_VTABLE_PROPERTY_CONST),

	SD_BUS_METHOD_WITH_ARGS(
	        "Stage", SD_BUS_ARGS("s", kernel, "s", initrd, "s", cmdline, "a{sv}", options),
	        SD_BUS_RESULT("s", id, "o", update), method_stage, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_ARGS("Commit", SD_BUS_ARGS("s", id, "a{sv}", options),
	                        SD_BUS_RESULT("o", update), method_commit,
	                        SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_ARGS("Cancel", SD_BUS_ARGS("s", id), SD_BUS_NO_RESULT, method_cancel,
	                        SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_ARGS("ListUpdates", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(sso)", updates),
	                        method_list_updates, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_ARGS("GetReport", SD_BUS_ARGS("s", id), SD_BUS_RESULT("s", json),
	                        method_get_report, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_ARGS("Describe", SD_BUS_NO_ARGS, SD_BUS_RESULT("s", json),
	                        method_describe, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_ARGS("PlanCommit", SD_BUS_ARGS("s", id), SD_BUS_RESULT("s", json),
	                        method_plan_commit, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_ARGS("RestoreVM", SD_BUS_ARGS("s", name), SD_BUS_NO_RESULT,
	                        method_restore_vm, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_ARGS("Reload", SD_BUS_NO_ARGS, SD_BUS_NO_RESULT, method_reload,
	                        SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_SIGNAL_WITH_ARGS("ReportReady", SD_BUS_ARGS("s", id, "s", path), 0),
	SD_BUS_VTABLE_END,
};

static const sd_bus_vtable update_vtable[] = {
	SD_BUS_VTABLE_START(0),
	SD_BUS_PROPERTY("Id", "s", NULL, offsetof(Update, id), SD_BUS_VTABLE_PROPERTY_CONST),
	SD_BUS_PROPERTY("State", "s", property_get_update_state, 0,
	                SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
	SD_BUS_PROPERTY("Phase", "s", NULL, offsetof(Update, phase),
	                SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
	SD_BUS_PROPERTY("Progress", "u", NULL, offsetof(Update, progress),
	                SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
	SD_BUS_PROPERTY("Kernel", "s", property_get_update_string, 0, SD_BUS_VTABLE_PROPERTY_CONST),
	SD_BUS_PROPERTY("KernelVersion", "s", NULL, offsetof(Update, kernel_version),
	                SD_BUS_VTABLE_PROPERTY_CONST),
	SD_BUS_PROPERTY("KernelSha256", "s", property_get_update_string, 0,
	                SD_BUS_VTABLE_PROPERTY_CONST),
	SD_BUS_PROPERTY("Initrd", "s", property_get_update_string, 0, SD_BUS_VTABLE_PROPERTY_CONST),
	SD_BUS_PROPERTY("Cmdline", "s", NULL, offsetof(Update, cmdline),
	                SD_BUS_VTABLE_PROPERTY_CONST),
	SD_BUS_PROPERTY("Backend", "s", NULL, offsetof(Update, backend),
	                SD_BUS_VTABLE_PROPERTY_CONST),
	SD_BUS_PROPERTY("Handoff", "s", property_get_update_handoff, 0,
	                SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
	SD_BUS_PROPERTY("Error", "s", NULL, offsetof(Update, error),
	                SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
	SD_BUS_PROPERTY("VMs", "a(sss)", property_get_vms, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
	SD_BUS_PROPERTY("VMTransfers", "a(sstttt)", property_get_vm_transfers, 0,
	                SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
	SD_BUS_PROPERTY("Started", "t", property_get_started, 0,
	                SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
	SD_BUS_SIGNAL_WITH_ARGS("Finished", SD_BUS_ARGS("s", result), 0),
	SD_BUS_VTABLE_END,
};

/* ---- update objects ---- */

static int update_object_find(sd_bus *bus, const char *path, const char *iface, void *userdata,
                              void **ret_found, sd_bus_error *error) {
	Manager *mgr = userdata;
	const char *id = path_startswith(path, UPGRADE_UPDATE_PREFIX);
	Update *u;

	if (!id || !update_id_is_valid(id))
		return 0;
	u = context_find(mgr->context, id);
	if (!u)
		return 0;
	*ret_found = u;
	return 1;
}

static int update_node_enumerator(sd_bus *bus, const char *path, void *userdata, char ***nodes,
                                  sd_bus_error *error) {
	size_t n;
	Update *const *updates = context_updates(((Manager *)userdata)->context, &n);
	char **l = calloc(n + 1, sizeof(char *));

	if (!l)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (update_object_path(updates[i], &l[i]) < 0) {
			strv_free(l);
			return -ENOMEM;
		}
	*nodes = l;
	return 0;
}

int manager_bus_attach(Manager *mgr) {
	int r;

	r = sd_bus_add_object_vtable(mgr->bus, NULL, UPGRADE_OBJECT_PATH, UPGRADE_MANAGER_IFACE,
	                             manager_vtable, mgr);
	if (r < 0)
		return log_error_errno(r, "Failed to add the manager object: %m");
	r = sd_bus_add_fallback_vtable(mgr->bus, NULL, UPGRADE_UPDATE_PREFIX, UPGRADE_UPDATE_IFACE,
	                               update_vtable, update_object_find, mgr);
	if (r < 0)
		return log_error_errno(r, "Failed to add the update objects: %m");
	r = sd_bus_add_node_enumerator(mgr->bus, NULL, UPGRADE_UPDATE_PREFIX,
	                               update_node_enumerator, mgr);
	if (r < 0)
		return log_error_errno(r, "Failed to add the update enumerator: %m");
	r = sd_bus_add_object_manager(mgr->bus, NULL, UPGRADE_OBJECT_PATH);
	if (r < 0)
		return log_error_errno(r, "Failed to add the object manager: %m");

	{
		ContextOps ops;

		manager_context_ops(mgr, &ops);
		context_set_ops(mgr->context, &ops, mgr);
	}
	the_manager = mgr;
	return 0;
}
