/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The context's notifications on the bus (ContextOps): PropertiesChanged, Finished,
 * ReportReady, the kexec request to systemd, sd_notify STATUS=. They come from the event loop
 * or from a job's worker thread; the bus is the loop's, so a worker's are handed over
 * (job_defer()) and sent from the loop, in order.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>

#include "bus.h"
#include "handoff-shutdown.h"
#include "fileio.h"
#include "job.h"
#include "log.h"
#include "macros.h"
#include "path-util.h"
#include "string-util.h"

/* The context's notifications come from the loop or from a job's worker; the bus is the
 * loop's: a worker's are handed over (job_defer()) and sent from there, in order. */
typedef enum EmitKind {
	EMIT_UPDATE_CHANGED,
	EMIT_MANAGER_CHANGED,
	EMIT_FINISHED,
	EMIT_REPORT_READY,
	EMIT_KEXEC,
} EmitKind;

typedef struct Emit {
	Manager *manager;
	EmitKind kind;
	char *id;
	char *arg;
} Emit;

static void emit_free(void *userdata) {
	Emit *e = userdata;

	free(e->id);
	free(e->arg);
	free(e);
}

static void emit_on_loop(void *userdata);

/* Returns true when the notification was handed to the loop (the caller does nothing). */
static bool emit_defer(Manager *mgr, EmitKind kind, Update *u, const char *arg) {
	Emit *e;

	if (job_on_loop())
		return false;
	e = calloc(1, sizeof(*e));
	if (!e)
		return true;
	*e = (Emit){ .manager = mgr, .kind = kind };
	if ((u && !(e->id = strdup(u->id))) || (arg && !(e->arg = strdup(arg))) ||
	    job_defer(emit_on_loop, e, emit_free) < 0)
		emit_free(e);
	return true;
}

static void emit_update_changed(Manager *mgr, Update *u) {
	_cleanup_free_ char *path = NULL;

	if (update_object_path(u, &path) < 0)
		return;
	(void)sd_bus_emit_properties_changed(mgr->bus, path, UPGRADE_UPDATE_IFACE, "State", "Phase",
	                                     "Progress", "Handoff", "Error", "VMs", "VMTransfers",
	                                     "Started", NULL);
	manager_notify_status(mgr);
}

typedef struct UpdateChanged {
	Manager *manager;
	Update *update;
} UpdateChanged;

static void update_changed_on_loop(void *userdata) {
	UpdateChanged *uc = userdata;

	emit_update_changed(uc->manager, uc->update);
}

/* From a worker the signal is sent while the worker waits: it carries the values of this
 * change (a VM "paused" before "saving"), not whatever the update holds later. */
static void on_update_changed(Context *c, Update *u, void *userdata) {
	job_defer_wait(update_changed_on_loop,
	               &(UpdateChanged){ .manager = userdata, .update = u });
}

/* InterfacesAdded or InterfacesRemoved for u's object (ObjectManager). */
static void emit_object(Manager *mgr, Update *u, bool added) {
	_cleanup_free_ char *path = NULL;

	if (update_object_path(u, &path) < 0)
		return;
	(void)(added ? sd_bus_emit_object_added : sd_bus_emit_object_removed)(mgr->bus, path);
}

static void update_added_on_loop(void *userdata) {
	UpdateChanged *uc = userdata;

	emit_object(uc->manager, uc->update, true);
}

/* Stage's job announces its update from the worker: InterfacesAdded goes out on the loop
 * while the worker waits (u is not announced as active to anyone before). */
static void on_update_added(Context *c, Update *u, void *userdata) {
	job_defer_wait(update_added_on_loop, &(UpdateChanged){ .manager = userdata, .update = u });
}

/* On the loop (context_retain() runs there only), while the update is still listed: the
 * object's interfaces are still found for InterfacesRemoved. */
static void on_update_removed(Context *c, Update *u, void *userdata) {
	emit_object(userdata, u, false);
}

static void on_manager_changed(Context *c, void *userdata) {
	Manager *mgr = userdata;

	if (emit_defer(mgr, EMIT_MANAGER_CHANGED, NULL, NULL))
		return;
	(void)sd_bus_emit_properties_changed(mgr->bus, UPGRADE_OBJECT_PATH, UPGRADE_MANAGER_IFACE,
	                                     "State", "StagedKernel", "LastReport", NULL);
}

/* Once an update finished: [Reports] Keep= applies within this process too, so a daemon
 * that rolls back again and again keeps Keep= updates in memory and on disk, not every one
 * (docs/reliability.md, "Soak"). */
static void retain_on_loop(void *userdata) {
	Manager *mgr = userdata;

	(void)context_retain(mgr->context);
}

static void on_finished(Context *c, Update *u, const char *result, void *userdata) {
	Manager *mgr = userdata;
	_cleanup_free_ char *path = NULL;

	if (emit_defer(mgr, EMIT_FINISHED, u, result) || update_object_path(u, &path) < 0)
		return;
	(void)sd_bus_emit_signal(mgr->bus, path, UPGRADE_UPDATE_IFACE, "Finished", "s", result);
	/* Later on the loop, never inside the caller's walk of the updates (recovery). */
	(void)job_defer(retain_on_loop, mgr, NULL);
}

static void on_report_ready(Context *c, Update *u, const char *path, void *userdata) {
	Manager *mgr = userdata;

	if (emit_defer(mgr, EMIT_REPORT_READY, u, path))
		return;
	(void)sd_bus_emit_signal(mgr->bus, UPGRADE_OBJECT_PATH, UPGRADE_MANAGER_IFACE,
	                         "ReportReady", "ss", u->id, path);
}

static int request_kexec(Context *c, Update *u, void *userdata);

/* A Cancel for the running commit of u (the state lock orders it with the worker). */
static bool cancel_requested(Context *c, Update *u, void *userdata) {
	Manager *mgr = userdata;

	/* Cancel() of the running commit, or of a stuck one (bus-cancel.c) */
	return (mgr->commit_job && streq_ptr(mgr->commit_id, u->id) &&
	        job_is_cancelled(mgr->commit_job)) ||
	       streq_ptr(mgr->abort_id, u->id);
}

static void emit_on_loop(void *userdata) {
	Emit *e = userdata;
	Manager *mgr = e->manager;
	Update *u = e->id ? context_find(mgr->context, e->id) : NULL;
	int r;

	if (e->id && !u)
		return;
	switch (e->kind) {
	case EMIT_UPDATE_CHANGED:
		on_update_changed(mgr->context, u, mgr);
		break;
	case EMIT_MANAGER_CHANGED:
		on_manager_changed(mgr->context, mgr);
		break;
	case EMIT_FINISHED:
		on_finished(mgr->context, u, e->arg, mgr);
		break;
	case EMIT_REPORT_READY:
		on_report_ready(mgr->context, u, e->arg, mgr);
		break;
	case EMIT_KEXEC:
		r = request_kexec(mgr->context, u, mgr);
		if (r < 0)
			context_handoff_result(mgr->context, u, r, strerror(-r));
		break;
	}
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

/* The point of no return: hand the machine to systemd's kexec.target. From a job's worker
 * the request is sent by the loop; its outcome arrives through context_handoff_result(). */
static int request_kexec(Context *c, Update *u, void *userdata) {
	Manager *mgr = userdata;
	sd_bus_slot *slot = NULL;
	bool fast = handoff_shutdown_is_fast(u);
	KexecRequest *k;
	int r;

	if (emit_defer(mgr, EMIT_KEXEC, u, NULL))
		return 0;

	if (mgr->trigger == KEXEC_TRIGGER_RECORD) {
		_cleanup_free_ char *path = NULL, *dir = NULL, *data = NULL;

		r = path_prefix_root(context_root(c), "/run/upgraded", &dir);
		if (r < 0)
			return r;
		r = mkdir_p(dir, 0755);
		if (r < 0)
			return r;
		if (asprintf(&path, "%s/kexec-requested.json", dir) < 0 ||
		    (fast ? asprintf(&data,
		                     "{\"id\":\"%s\",\"method\":\"KExec\",\"shutdown\":"
		                     "\"fast\"}\n",
		                     u->id)
		          : asprintf(&data,
		                     "{\"id\":\"%s\",\"unit\":\"kexec.target\",\"mode\":"
		                     "\"replace-irreversibly\",\"shutdown\":\"orderly\"}\n",
		                     u->id)) < 0)
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
	/* Fast: the manager's KExec(), what `systemctl kexec --force` calls: no orderly stop of
	 * the remaining units. Orderly: kexec.target, every unit stopped in order. */
	if (fast)
		r = sd_bus_call_method_async(
		        mgr->bus, &slot, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
		        "org.freedesktop.systemd1.Manager", "KExec", kexec_reply, k, NULL);
	else
		r = sd_bus_call_method_async(
		        mgr->bus, &slot, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
		        "org.freedesktop.systemd1.Manager", "StartUnit", kexec_reply, k, "ss",
		        "kexec.target", "replace-irreversibly");
	if (r < 0) {
		kexec_request_free(k);
		return r;
	}
	return bus_slot_own(slot, k, kexec_request_free);
}

void manager_notify_status(Manager *mgr) {
	const Update *u = context_active(mgr->context);

	if (!u)
		(void)sd_notify(false, "STATUS=Idle: no update in flight");
	else
		(void)sd_notifyf(false, "STATUS=Update %s %s, phase %s (%u%%)", u->id,
		                 update_state_to_string(u->state), u->phase, u->progress);
}

void manager_context_ops(Manager *mgr, ContextOps *ret) {
	*ret = (ContextOps){
		.request_kexec = request_kexec,
		.update_changed = on_update_changed,
		.update_added = on_update_added,
		.update_removed = on_update_removed,
		.manager_changed = on_manager_changed,
		.finished = on_finished,
		.report_ready = on_report_ready,
		.cancel_requested = cancel_requested,
	};
}
