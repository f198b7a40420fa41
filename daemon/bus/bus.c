/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <systemd/sd-bus.h>

#include "bus.h"
#include "bus-options.h"
#include "fileio.h"
#include "log.h"
#include "macros.h"
#include "path-util.h"
#include "string-util.h"
#include "upgrade-bus.h"

#define POLKIT_NAME         "org.freedesktop.PolicyKit1"
#define POLKIT_PATH         "/org/freedesktop/PolicyKit1/Authority"
#define POLKIT_IFACE        "org.freedesktop.PolicyKit1.Authority"
#define POLKIT_INTERACTIVE  1u
/* Interactive authentication waits for a human. */
#define POLKIT_TIMEOUT_USEC (5ULL * 60 * 1000000)

typedef int (*AuthContinuation)(sd_bus_message *m, Manager *mgr, sd_bus_error *error);

typedef struct PendingAuth {
	Manager *manager;
	sd_bus_message *message;
	AuthContinuation cont;
	bool interactive;
} PendingAuth;

static void pending_auth_free(void *userdata) {
	PendingAuth *p = userdata;

	if (!p)
		return;
	sd_bus_message_unref(p->message);
	free(p);
}

/* Hands userdata to a floating slot that frees it with destroy, whether the reply
 * came or the bus went away first (the daemon stopping with a call pending). */
static int slot_own(sd_bus_slot *slot, void *userdata, sd_bus_destroy_t destroy) {
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

/* Replies to m from a continuation's outcome (used after async polkit). */
static void reply_outcome(sd_bus_message *m, int r, sd_bus_error *error) {
	if (r >= 0)
		return;
	if (sd_bus_error_is_set(error))
		(void)sd_bus_reply_method_error(m, error);
	else
		(void)sd_bus_reply_method_errno(m, r, NULL);
}

static int polkit_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
	_cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
	PendingAuth *p = userdata;
	const sd_bus_error *e;
	int authorized = 0, challenge = 0, r;

	e = sd_bus_message_get_error(reply);
	if (e) {
		if (sd_bus_error_has_names(e, SD_BUS_ERROR_SERVICE_UNKNOWN,
		                           SD_BUS_ERROR_NAME_HAS_NO_OWNER))
			r = sd_bus_error_setf(&error, UPGRADE_ERROR_PERMISSION_DENIED,
			                      "Only root may do this: polkit is not running to "
			                      "authorize action %s.",
			                      UPGRADE_POLKIT_ACTION);
		else
			r = sd_bus_error_setf(&error, UPGRADE_ERROR_PERMISSION_DENIED,
			                      "Authorization check for action %s failed: %s",
			                      UPGRADE_POLKIT_ACTION, e->message ?: e->name);
		reply_outcome(p->message, r, &error);
		return 0;
	}

	r = sd_bus_message_enter_container(reply, 'r', "bba{ss}");
	if (r >= 0)
		r = sd_bus_message_read(reply, "bb", &authorized, &challenge);
	if (r < 0) {
		r = sd_bus_error_setf(&error, UPGRADE_ERROR_PERMISSION_DENIED,
		                      "Unexpected reply from polkit for action %s.",
		                      UPGRADE_POLKIT_ACTION);
		reply_outcome(p->message, r, &error);
		return 0;
	}
	if (!authorized) {
		r = sd_bus_error_setf(&error, UPGRADE_ERROR_PERMISSION_DENIED,
		                      challenge && !p->interactive
		                              ? "Action %s needs interactive authentication "
		                                "(try without --no-ask-password)."
		                              : "Not authorized for action %s.",
		                      UPGRADE_POLKIT_ACTION);
		reply_outcome(p->message, r, &error);
		return 0;
	}

	r = sd_bus_message_rewind(p->message, true);
	if (r >= 0)
		r = p->cont(p->message, p->manager, &error);
	reply_outcome(p->message, r, &error);
	return 0; /* p is freed with the slot */
}

/*
 * Root goes straight to cont. Anyone else needs polkit's yes for
 * org.upgraded.Upgrade1.manage: the check is asynchronous, cont runs (and
 * replies) when polkit answered. Returns 1 when the reply comes later.
 */
static int authorize(Manager *mgr, sd_bus_message *m, AuthContinuation cont, sd_bus_error *error) {
	_cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *q = NULL;
	sd_bus_slot *slot = NULL;
	PendingAuth *p;
	const char *sender;
	bool interactive;
	uid_t uid;
	int r;

	/* dbus-daemon reports the uid it saw with SO_PEERCRED when the caller
	 * connected (its effective uid); sd-bus files that under UID. */
	r = sd_bus_query_sender_creds(
	        m, SD_BUS_CREDS_UID | SD_BUS_CREDS_EUID | SD_BUS_CREDS_AUGMENT, &creds);
	if (r < 0)
		return r;
	r = sd_bus_creds_get_euid(creds, &uid);
	if (r < 0)
		r = sd_bus_creds_get_uid(creds, &uid);
	if (r < 0)
		return sd_bus_error_setf(error, UPGRADE_ERROR_PERMISSION_DENIED,
		                         "Cannot identify the caller: %s.", strerror(-r));
	if (uid == 0) {
		r = sd_bus_message_rewind(m, true);
		if (r < 0)
			return r;
		return cont(m, mgr, error);
	}

	sender = sd_bus_message_get_sender(m);
	if (!sender)
		return sd_bus_error_setf(error, UPGRADE_ERROR_PERMISSION_DENIED,
		                         "Cannot identify the caller.");
	interactive = sd_bus_message_get_allow_interactive_authorization(m) > 0;
	r = sd_bus_message_new_method_call(mgr->bus, &q, POLKIT_NAME, POLKIT_PATH, POLKIT_IFACE,
	                                   "CheckAuthorization");
	if (r >= 0)
		r = sd_bus_message_append(q, "(sa{sv})s", "system-bus-name", 1, "name", "s", sender,
		                          UPGRADE_POLKIT_ACTION);
	if (r >= 0)
		r = sd_bus_message_append(q, "a{ss}us", 0, interactive ? POLKIT_INTERACTIVE : 0u,
		                          "");
	if (r < 0)
		return r;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	*p = (PendingAuth){ .manager = mgr,
		            .message = sd_bus_message_ref(m),
		            .cont = cont,
		            .interactive = interactive };
	r = sd_bus_call_async(mgr->bus, &slot, q, polkit_reply, p, POLKIT_TIMEOUT_USEC);
	if (r < 0) {
		pending_auth_free(p);
		return r;
	}
	r = slot_own(slot, p, pending_auth_free);
	if (r < 0)
		return r;
	return 1;
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

static int stage_authorized(sd_bus_message *m, Manager *mgr, sd_bus_error *error) {
	_cleanup_free_ char *path = NULL;
	const char *kernel, *initrd, *cmdline;
	StageRequest req = {};
	StageOptions opts;
	Update *u;
	int r;

	r = sd_bus_message_read(m, "sss", &kernel, &initrd, &cmdline);
	if (r < 0)
		return r;
	r = bus_read_stage_options(m, &opts, error);
	if (r < 0)
		return r;
	req.reuse_cmdline = opts.reuse_cmdline;
	req.kernel = kernel;
	req.initrd = initrd;
	req.cmdline = cmdline;

	r = context_stage(mgr->context, &req, &u, error);
	if (r < 0)
		return r;
	r = update_object_path(u, &path);
	if (r < 0)
		return r;
	return sd_bus_reply_method_return(m, "so", u->id, path);
}

static int method_stage(sd_bus_message *m, void *userdata, sd_bus_error *error) {
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
	return authorize(mgr, m, stage_authorized, error);
}

typedef struct CommitJob {
	Manager *manager;
	char *id;
} CommitJob;

static int commit_job_run(sd_event_source *s, void *userdata) {
	CommitJob *j = userdata;
	Update *u = context_find(j->manager->context, j->id);
	int r;

	if (u) {
		r = context_commit_run(j->manager->context, u);
		if (r < 0)
			log_error_errno(r, "Commit of update %s stopped: %m", j->id);
	}
	free(j->id);
	free(j);
	return 0;
}

static int commit_authorized(sd_bus_message *m, Manager *mgr, sd_bus_error *error) {
	_cleanup_free_ char *path = NULL;
	const char *id;
	CommitJob *j;
	Update *u;
	int r;

	r = sd_bus_message_read(m, "s", &id);
	if (r < 0)
		return r;

	/* 1. staged -> committing, persisted. */
	r = context_commit_begin(mgr->context, id, &u, error);
	if (r < 0)
		return r;
	r = update_object_path(u, &path);
	if (r < 0)
		return r;

	/* 2. The steps run from the event loop: the caller gets its answer now and
	 * follows Phase/Progress and Finished on the update object. */
	j = calloc(1, sizeof(*j));
	if (!j || !(j->id = strdup(u->id))) {
		free(j);
		return -ENOMEM;
	}
	j->manager = mgr;
	r = sd_event_add_defer(mgr->event, NULL, commit_job_run, j);
	if (r < 0) {
		free(j->id);
		free(j);
		return r;
	}
	return sd_bus_reply_method_return(m, "o", path);
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
	return authorize(userdata, m, commit_authorized, error);
}

static int cancel_authorized(sd_bus_message *m, Manager *mgr, sd_bus_error *error) {
	const char *id;
	int r;

	r = sd_bus_message_read(m, "s", &id);
	if (r < 0)
		return r;
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
	return authorize(userdata, m, cancel_authorized, error);
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

static int method_plan_commit(sd_bus_message *m, void *userdata, sd_bus_error *error) {
	_cleanup_free_ char *json = NULL;
	const char *id;
	int r;

	r = sd_bus_message_read(m, "s", &id);
	if (r < 0)
		return r;
	r = context_plan_commit(((Manager *)userdata)->context, id, &json, error);
	if (r < 0)
		return r;
	return sd_bus_reply_method_return(m, "s", json);
}

static int restore_vm_authorized(sd_bus_message *m, Manager *mgr, sd_bus_error *error) {
	const char *name;
	int r;

	r = sd_bus_message_read(m, "s", &name);
	if (r < 0)
		return r;
	if (!mgr->vms)
		return sd_bus_error_setf(error, UPGRADE_ERROR_VM_FAILED,
		                         "VMs are not managed here.");
	r = vms_restore_one(mgr->vms, name, error);
	if (r < 0)
		return r;
	return sd_bus_reply_method_return(m, NULL);
}

static int method_restore_vm(sd_bus_message *m, void *userdata, sd_bus_error *error) {
	const char *name;
	int r;

	/* 1. Read and validate; 2. authorize; 3. restore (blocks while libvirt restores). */
	r = sd_bus_message_read(m, "s", &name);
	if (r < 0)
		return r;
	if (!*name || strlen(name) > 256 || string_has_cc(name))
		return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_VM_NAME,
		                         "'%.64s' is not a VM name.", name);
	return authorize(userdata, m, restore_vm_authorized, error);
}

static int property_get_vms(sd_bus *bus, const char *path, const char *iface, const char *property,
                            sd_bus_message *reply, void *userdata, sd_bus_error *error) {
	return vms_append_property(userdata, reply);
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

/* ---- context notifications ---- */

static void on_update_changed(Context *c, Update *u, void *userdata) {
	Manager *mgr = userdata;
	_cleanup_free_ char *path = NULL;

	if (update_object_path(u, &path) < 0)
		return;
	(void)sd_bus_emit_properties_changed(mgr->bus, path, UPGRADE_UPDATE_IFACE, "State", "Phase",
	                                     "Progress", "Handoff", "Error", "VMs", NULL);
}

static void on_update_added(Context *c, Update *u, void *userdata) {
	Manager *mgr = userdata;
	_cleanup_free_ char *path = NULL;

	if (update_object_path(u, &path) < 0)
		return;
	(void)sd_bus_emit_object_added(mgr->bus, path);
}

static void on_manager_changed(Context *c, void *userdata) {
	Manager *mgr = userdata;

	(void)sd_bus_emit_properties_changed(mgr->bus, UPGRADE_OBJECT_PATH, UPGRADE_MANAGER_IFACE,
	                                     "State", "StagedKernel", "LastReport", NULL);
}

static void on_finished(Context *c, Update *u, const char *result, void *userdata) {
	Manager *mgr = userdata;
	_cleanup_free_ char *path = NULL;

	if (update_object_path(u, &path) < 0)
		return;
	(void)sd_bus_emit_signal(mgr->bus, path, UPGRADE_UPDATE_IFACE, "Finished", "s", result);
}

static void on_report_ready(Context *c, Update *u, const char *path, void *userdata) {
	Manager *mgr = userdata;

	(void)sd_bus_emit_signal(mgr->bus, UPGRADE_OBJECT_PATH, UPGRADE_MANAGER_IFACE,
	                         "ReportReady", "ss", u->id, path);
}

typedef struct KexecRequest {
	Manager *manager;
	char *id;
} KexecRequest;

static void kexec_request_free(void *userdata) {
	KexecRequest *k = userdata;

	if (!k)
		return;
	free(k->id);
	free(k);
}

static int kexec_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
	KexecRequest *k = userdata;
	Update *u = context_find(k->manager->context, k->id);
	const sd_bus_error *e = sd_bus_message_get_error(reply);

	if (u)
		context_handoff_result(k->manager->context, u,
		                       e ? -(sd_bus_error_get_errno(e) ?: EIO) : 0,
		                       e ? (e->message ?: e->name) : NULL);
	return 0; /* k is freed with the slot */
}

/* The point of no return: hand the machine to systemd's kexec.target. */
static int request_kexec(Context *c, Update *u, void *userdata) {
	Manager *mgr = userdata;
	sd_bus_slot *slot = NULL;
	KexecRequest *k;
	int r;

	if (mgr->trigger == KEXEC_TRIGGER_RECORD) {
		_cleanup_free_ char *path = NULL, *dir = NULL, *data = NULL;

		r = path_prefix_root(context_root(c), "/run/upgraded", &dir);
		if (r < 0)
			return r;
		r = mkdir_p(dir, 0755);
		if (r < 0)
			return r;
		if (asprintf(&path, "%s/kexec-requested.json", dir) < 0 ||
		    asprintf(&data,
		             "{\"id\":\"%s\",\"unit\":\"kexec.target\",\"mode\":"
		             "\"replace-irreversibly\"}\n",
		             u->id) < 0)
			return -ENOMEM;
		r = write_file_atomic(path, data, strlen(data), 0644);
		if (r < 0)
			return r;
		context_handoff_result(c, u, 0, NULL);
		return 0;
	}

	k = calloc(1, sizeof(*k));
	if (!k || !(k->id = strdup(u->id))) {
		free(k);
		return -ENOMEM;
	}
	k->manager = mgr;
	r = sd_bus_call_method_async(mgr->bus, &slot, "org.freedesktop.systemd1",
	                             "/org/freedesktop/systemd1",
	                             "org.freedesktop.systemd1.Manager", "StartUnit", kexec_reply,
	                             k, "ss", "kexec.target", "replace-irreversibly");
	if (r < 0) {
		kexec_request_free(k);
		return r;
	}
	return slot_own(slot, k, kexec_request_free);
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

	context_set_ops(mgr->context,
	                &(ContextOps){
	                        .request_kexec = request_kexec,
	                        .update_changed = on_update_changed,
	                        .update_added = on_update_added,
	                        .manager_changed = on_manager_changed,
	                        .finished = on_finished,
	                        .report_ready = on_report_ready,
	                },
	                mgr);
	return 0;
}
