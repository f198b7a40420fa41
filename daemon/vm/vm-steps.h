/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The VMs in the daemon: connects the state machine (context.h) to the VM library
 * (vm/vm.h) and the policy (policy.h). At commit (and for a dry run) it takes the
 * inventory, lets the policy decide each VM's strategy and check the preconditions;
 * it registers the steps that checkpoint the VMs before the handoff, roll them back
 * when the commit fails, and restore them on the new kernel. Their results live in
 * the update record (Update.vms) and in the report. docs/vms.md.
 */

#include <systemd/sd-bus.h>

#include "context.h"

#define VMS_LIBVIRT_URI_DEFAULT "qemu:///system"

typedef struct VmWiring VmWiring;
typedef struct Measure Measure;

/* Plugs the VMs' step (CONTEXT_STEP_VMS: commit check, checkpoint, rollback, restore) into
 * c; connects to uri (NULL: the default) only when a step needs it. Routes libvirt's errors
 * to our log. */
int vms_attach(Context *c, const char *uri, VmWiring **ret);
/* The measurement the VM steps mark their moments in (pause, resume, the vCPU threads);
 * NULL: none. m must outlive w. */
void vms_set_measure(VmWiring *w, Measure *m);
VmWiring *vms_free(VmWiring *w);
/* Closes the shared libvirt connection, waiting at most timeout (vm_close_bounded()): for the
 * daemon's exit, which must keep the deadline it announced. 0 or -ETIMEDOUT. */
int vms_close(VmWiring *w, uint64_t timeout);
DEFINE_TRIVIAL_CLEANUP_FUNC(VmWiring *, vms_free);

/* `upgradectl restore-vm NAME`: restores one VM from its kept managed save image and
 * updates its record in the newest update that has one. Sets NoSuchVM, VMRunning,
 * NoSavedState, InvalidVMName or VMFailed. */
int vms_restore_one(VmWiring *w, const char *name, sd_bus_error *error);

/* The Update.VMs property, a(sss): name, strategy, result, from u->vms (or, before
 * the first step ran, the decided strategies with result "pending"). */
int vms_append_property(const Update *u, sd_bus_message *reply);

/* The Update.VMTransfers property, a(sstttt): per VM whose save (commit) or restore (new
 * kernel) started: name, "save" | "restore", bytes done, bytes total (0: unknown), average
 * rate in bytes/s since it started, and when it started (CLOCK_REALTIME µs). Bytes come from
 * libvirt's job statistics while the transfer runs and from the image's size once it ended.
 * Empty for an update that moved no VM in this daemon's run. */
int vms_append_transfers(const VmWiring *w, const Update *u, sd_bus_message *reply);
