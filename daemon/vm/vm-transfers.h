/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * How far each VM's save (commit) or restore (new kernel) got: the Update.VMTransfers
 * property (docs/dbus-api.md). One table for the update that moves VMs now; notes about
 * another update start a new table. Bytes come from libvirt's job statistics while a
 * transfer runs (vm_transfers_bytes()) and from the image's size once it ended
 * (vm_transfers_result()). Not thread-safe: the daemon's state lock guards it.
 */

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

#include "vm.h"

typedef struct VmTransfers VmTransfers;

int vm_transfers_new(VmTransfers **ret);
VmTransfers *vm_transfers_free(VmTransfers *t);

/* A VM's outcome of update id: its transfer starts at SAVING/RESTORING, ends with the image. */
void vm_transfers_result(VmTransfers *t, const char *id, const VmResult *r, bool restore);
/* A sample of one running transfer (total 0: unknown). */
void vm_transfers_bytes(VmTransfers *t, const char *id, const char *name, bool restore,
                        uint64_t done, uint64_t total);
/* a(sstttt): name, "save" | "restore", done, total, average rate (bytes/s), start (realtime
 * µs). Empty for another update than the table's, or t NULL. */
int vm_transfers_append(const VmTransfers *t, const char *id, sd_bus_message *reply);
