/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Shared by the VM steps' files (vm-steps*.c, listed in vm-steps.c); not part of the API.
 */

#include <pthread.h>

#include <libvirt/libvirt.h>

#include <json-c/json.h>

#include "context.h"
#include "measure.h"
#include "update.h"
#include "vm.h"
#include "vm-steps.h"
#include "vm-transfers.h"

struct VmWiring {
	Context *context;
	char *uri;
	/* The shared connection: opened, checked and replaced under conn_lock (jobs use it
	 * concurrently, each with a reference of its own). */
	pthread_mutex_t conn_lock;
	virConnectPtr conn;
	VmTransfers *transfers; /* Update.VMTransfers (state lock) */
	Measure *measure;       /* the probe's marks of the VM steps, or NULL (vms_set_measure()) */
};

/* vm-steps.c */
const char *vms_libvirt_error(void);
int vms_connect_unlocked(VmWiring *w, virConnectPtr *ret, char **ret_reason);
int vms_connect_wait(VmWiring *w, usec_t timeout, virConnectPtr *ret, char **ret_reason);
void vms_conn_closep(virConnectPtr *c);
#define _cleanup_conn_ _cleanup_(vms_conn_closep)

/* vm-steps-check.c */
/* Appends "; <formatted>" (or just <formatted> to an empty text). */
_printf_(2, 3) int vms_append_text(char **text, const char *fmt, ...);
int vms_commit_check(Context *c, Update *u, void *userdata, json_object **ret_decisions,
                     char **ret_refusal);

/* vm-steps-measure.c */
void vms_measure_track(VmWiring *w, const VmPlanEntry *e, size_t n);
void vms_on_vm_event(const VmResult *r, VmEvent e, void *userdata);

/* vm-steps-hooks.c */
int vms_store_results(Context *c, Update *u, const VmResults *res);
const char *vms_dec_str(json_object *dec, const char *key);
json_object *vms_decided(const Update *u);
int vms_hook_checkpoint(Context *c, Update *u, void *userdata, char **ret_reason);
int vms_hook_rollback(Context *c, Update *u, void *userdata, char **ret_reason);
int vms_hook_restore(Context *c, Update *u, void *userdata, char **ret_reason);
