/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The VMs in the daemon (vm-steps.h): the wiring to libvirt (one shared connection, opened
 * again after libvirtd went away), attaching the steps to the state machine, the manual
 * restore of one VM and the Update properties. The files, by concern:
 *   vm-steps.c          the wiring, vms_attach(), vms_restore_one(), the properties
 *   vm-steps-check.c    the commit check: inventory, the policy's decisions, preconditions
 *   vm-steps-hooks.c    the steps: checkpoint, rollback, restore, and their records
 *   vm-steps-measure.c  the VM library's moments handed to the measurement
 *   vm-steps-kept.c     kept memory (daemon/pmem) for keep-ram
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "job.h"
#include "log.h"
#include "string-util.h"
#include "time-util.h"
#include "upgrade-bus.h"
#include "vm.h"
#include "vm-steps.h"
#include "vm-steps-internal.h"
#include "vm-transfers.h"

#define VM_NAME_MAX        256
#define VMS_WAIT_POLL_USEC (200ULL * 1000ULL)

/* ---- constructors / destructors ---- */

VmWiring *vms_free(VmWiring *w) {
	if (!w)
		return NULL;
	if (w->conn)
		virConnectClose(w->conn);
	pthread_mutex_destroy(&w->conn_lock);
	vm_transfers_free(w->transfers);
	free(w->uri);
	free(w);
	return NULL;
}

int vms_close(VmWiring *w, uint64_t timeout) {
	virConnectPtr conn;

	if (!w)
		return 0;
	pthread_mutex_lock(&w->conn_lock);
	conn = TAKE_PTR(w->conn);
	pthread_mutex_unlock(&w->conn_lock);
	return vm_close_bounded(conn, timeout);
}

/* ---- helpers ---- */

/* libvirt reports every error here instead of printing it to stderr. */
static void on_libvirt_error(void *userdata, virErrorPtr e) {
	if (e && e->message)
		log_debug("libvirt: %s", e->message);
}

const char *vms_libvirt_error(void) {
	virErrorPtr e = virGetLastError();

	return e && e->message ? e->message : "unknown libvirt error";
}

/* Whether conn still reaches libvirtd. Without an event loop for libvirt, a connection whose
 * libvirtd went away (killed, restarted) looks alive until it is used: one round trip tells. */
static bool connection_usable(virConnectPtr conn) {
	unsigned long version;

	return virConnectIsAlive(conn) == 1 && virConnectGetLibVersion(conn, &version) == 0;
}

/* The connection, opened on first use and again after libvirtd went away; *ret is a reference
 * of the caller's (virConnectClose() it). Every libvirt call here is bounded (vm_connect()):
 * call it between job_blocking_begin() and job_blocking_end(). */
static int wiring_connect(VmWiring *w, virConnectPtr *ret, char **ret_reason) {
	_cleanup_free_ char *why = NULL;
	int r = 0;

	pthread_mutex_lock(&w->conn_lock);
	if (w->conn && !connection_usable(w->conn)) {
		log_info("The connection to libvirt at '%s' was lost, opening it again.", w->uri);
		virConnectClose(w->conn);
		w->conn = NULL;
	}
	if (!w->conn)
		r = vm_connect(w->uri, &w->conn, &why);
	if (r >= 0) {
		virConnectRef(w->conn);
		*ret = w->conn;
	}
	pthread_mutex_unlock(&w->conn_lock);
	if (r < 0 && ret_reason &&
	    asprintf(ret_reason, "cannot connect to libvirt at '%s': %s", w->uri,
	             why ?: vms_libvirt_error()) < 0)
		*ret_reason = NULL;
	return r == -ETIMEDOUT ? r : r < 0 ? -ECONNREFUSED : 0;
}

/* wiring_connect() off the state lock: the loop answers meanwhile. -ETIMEDOUT also when
 * the job was abandoned meanwhile (then nothing may be touched). */
int vms_connect_unlocked(VmWiring *w, virConnectPtr *ret, char **ret_reason) {
	int r, k;

	job_blocking_begin();
	r = wiring_connect(w, ret, ret_reason);
	k = job_blocking_end();
	if (k < 0 && r >= 0) {
		virConnectClose(*ret);
		*ret = NULL;
	}
	return k < 0 ? k : r;
}

/* vms_connect_unlocked() again every VMS_WAIT_POLL_USEC until libvirt answers or timeout
 * passed: the restore starts as soon as libvirt answers. A libvirtd still starting refuses
 * the connection (no socket yet) or takes it and answers late (socket activation, or its
 * QEMU driver still starting after READY=1); both are waited for. */
int vms_connect_wait(VmWiring *w, usec_t timeout, virConnectPtr *ret, char **ret_reason) {
	usec_t start = now_monotonic_usec(), now;
	int r;

	for (unsigned attempt = 0;; attempt++) {
		_cleanup_free_ char *why = NULL;

		r = vms_connect_unlocked(w, ret, &why);
		now = now_monotonic_usec();
		if (r >= 0) {
			if (attempt > 0)
				log_info("libvirt at '%s' answered after %.1f s.", w->uri,
				         (double)(now - start) / 1e6);
			return 0;
		}
		if (now - start >= timeout) {
			if (ret_reason && asprintf(ret_reason, "%s (waited %.0f s)",
			                           why ?: "cannot connect to libvirt",
			                           (double)(now - start) / 1e6) < 0)
				*ret_reason = NULL;
			return r;
		}
		if (attempt == 0)
			log_info("Waiting for libvirt at '%s' to answer, at most %.0f s: %s",
			         w->uri, (double)timeout / 1e6, strna(why));
		job_blocking_begin();
		usleep(VMS_WAIT_POLL_USEC);
		r = job_blocking_end();
		if (r < 0)
			return r;
	}
}

void vms_conn_closep(virConnectPtr *c) {
	if (*c)
		virConnectClose(*c);
}

/* ---- public entry points ---- */

/* The VMs' step of the commit path; the keys of its marks are those of earlier versions. */
static const ContextStepVTable vms_step = {
	.name = "vms",
	.hooks = { [HOOK_PRE_HANDOFF] = { "vm-checkpoint", vms_hook_checkpoint },
	           [HOOK_ROLLBACK] = { "vm-rollback", vms_hook_rollback },
	           [HOOK_POST_BOOT] = { "vm-restore", vms_hook_restore } },
	.commit_check = vms_commit_check,
};

void vms_set_measure(VmWiring *w, Measure *m) {
	if (w)
		w->measure = m;
}

int vms_attach(Context *c, const char *uri, VmWiring **ret) {
	_cleanup_(vms_freep) VmWiring *w = NULL;
	int r;

	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->context = c;
	pthread_mutex_init(&w->conn_lock, NULL);
	w->uri = strdup(uri ?: VMS_LIBVIRT_URI_DEFAULT);
	if (!w->uri || vm_transfers_new(&w->transfers) < 0)
		return -ENOMEM;
	virSetErrorFunc(NULL, on_libvirt_error);

	r = context_add_step(c, CONTEXT_STEP_VMS, &vms_step, w);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(w);
	return 0;
}

int vms_restore_one(VmWiring *w, const char *name, sd_bus_error *error) {
	_cleanup_conn_ virConnectPtr conn = NULL;
	_cleanup_(vm_results_freep) VmResults *res = NULL;
	_cleanup_free_ char *why = NULL, *uid = NULL;
	Context *c = w->context;
	Update *const *updates;
	size_t n;
	Update *u = NULL, *active;
	VmResult *rec = NULL;
	int r, k;

	/* 1. Validate. While an update commits or completes its VMs' images belong to it:
	 * restored now, a VM would be killed by the kexec with no saved state left, or would
	 * race the new kernel's own restore. */
	if (!name || !*name || strlen(name) > VM_NAME_MAX || string_has_cc(name))
		return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_VM_NAME,
		                         "'%s' is not a VM name.", QUOTE_CUT(name, 64));
	active = context_active(c);
	if (active && (active->state == UPDATE_COMMITTING || active->state == UPDATE_COMPLETING))
		return sd_bus_error_setf(
		        error, UPGRADE_ERROR_BAD_STATE,
		        "Update %s is %s (phase %s): its VMs' saved state is in use "
		        "and is kept; retry when it has finished.",
		        active->id, update_state_to_string(active->state), active->phase);
	r = vms_connect_unlocked(w, &conn, &why);
	if (r < 0)
		return sd_bus_error_setf(error,
		                         r == -ETIMEDOUT ? UPGRADE_ERROR_LIBVIRT_TIMEOUT
		                                         : UPGRADE_ERROR_VM_FAILED,
		                         "%s.", why ?: "cannot connect to libvirt");

	/* 2. Its record in the newest update that has one. */
	updates = context_updates(c, &n);
	for (size_t i = n; i > 0 && !rec; i--) {
		Update *cand = updates[i - 1];
		VmResults *cr = NULL;

		if (!cand->vms || vm_results_from_json(cand->vms, &cr) < 0)
			continue;
		rec = (VmResult *)vm_results_find(cr, name);
		if (rec) {
			uid = strdup(cand->id);
			if (!uid) {
				vm_results_free(cr);
				return -ENOMEM;
			}
			res = cr;
		} else
			vm_results_free(cr);
	}

	/* 3. Restore, off the state lock. */
	job_blocking_begin();
	r = vm_restore_one(conn, name, rec);
	k = job_blocking_end();
	if (k < 0)
		return k;
	switch (r) {
	case 0:
		break;
	case -ENOENT:
		return sd_bus_error_setf(error, UPGRADE_ERROR_NO_SUCH_VM, "No VM '%s' at %s.", name,
		                         w->uri);
	case -EBUSY:
		return sd_bus_error_setf(error, UPGRADE_ERROR_VM_RUNNING,
		                         "VM '%s' is running: there is nothing to restore.", name);
	case -ENODATA:
		return sd_bus_error_setf(error, UPGRADE_ERROR_NO_SAVED_STATE,
		                         "VM '%s' has no saved state to restore.", name);
	default:
		return sd_bus_error_setf(error, UPGRADE_ERROR_VM_FAILED,
		                         "Restoring VM '%s' failed: %s.", name,
		                         rec && rec->error ? rec->error : strerror(-r));
	}
	log_info("VM '%s' restored from its saved state.", name);

	/* 4. The record says so, if its update is still there: the state lock was released
	 * meanwhile, and an update that finished then may have pruned it (context_retain()). */
	u = uid ? context_find(c, uid) : NULL;
	if (u) {
		r = vms_store_results(c, u, res);
		if (r < 0)
			log_warning_errno(
			        r, "Failed to record the restore of VM '%s', ignoring: %m", name);
	}
	return 0;
}

int vms_append_property(const Update *u, sd_bus_message *reply) {
	json_object *a = u->vms ?: vms_decided(u);
	size_t n = a ? json_object_array_length(a) : 0;
	int r;

	r = sd_bus_message_open_container(reply, 'a', "(sss)");
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		json_object *e = json_object_array_get_idx(a, i);
		const char *res = u->vms ? vms_dec_str(e, "result") : "pending";

		r = sd_bus_message_append(reply, "(sss)", strempty(vms_dec_str(e, "name")),
		                          strempty(vms_dec_str(e, "strategy")), strempty(res));
		if (r < 0)
			return r;
	}
	return sd_bus_message_close_container(reply);
}

int vms_append_transfers(const VmWiring *w, const Update *u, sd_bus_message *reply) {
	return vm_transfers_append(w ? w->transfers : NULL, u->id, reply);
}
