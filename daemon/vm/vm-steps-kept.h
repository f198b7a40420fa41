/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The VM steps' view of kept memory (daemon/pmem): whether this host keeps VM RAM across
 * the kexec, for the policy's keep-ram decision, and the per-VM check that the checkpoint
 * step hands to keep-ram (a VM whose RAM file is elsewhere falls back to checkpoint).
 */

#include <stdbool.h>

#include "context.h"
#include "keep-ram.h"
#include "pmem.h"
#include "update.h"

/* The facts stage recorded and commit refreshed (Update.kept_memory): "ready" true. */
bool vms_host_keeps_memory(const Update *u);

typedef struct VmsKeptCheck {
	PmemFacts facts;
	PmemKeptCheck check;
} VmsKeptCheck;

/* Gathers the host's facts now and points cfg's on_kept_memory at them; k must outlive
 * the checkpoint. */
int vms_kept_check_setup(Context *c, const Update *u, VmsKeptCheck *k, KeepRamConfig *cfg);
void vms_kept_check_done(VmsKeptCheck *k);
