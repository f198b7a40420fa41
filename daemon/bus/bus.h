/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * org.upgraded.Upgrade1 on the bus: the Manager object, one Update object per
 * update, polkit authorization, and the kexec request to systemd.
 */

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "context.h"
#include "upgrade-bus.h"
#include "vm-steps.h"

typedef enum KexecTrigger {
	KEXEC_TRIGGER_SYSTEMD, /* StartUnit("kexec.target", "replace-irreversibly") */
	KEXEC_TRIGGER_RECORD,  /* TEST ONLY: write <root>/run/upgraded/kexec-requested.json */
} KexecTrigger;

typedef struct Manager {
	Context *context;
	sd_bus *bus;
	sd_event *event;
	KexecTrigger trigger;
	VmWiring *vms; /* RestoreVM(); NULL: not offered */
} Manager;

/* Registers objects and hooks the context's notifications to the bus. */
int manager_bus_attach(Manager *m);

/* Object path of an update: /org/upgraded/Upgrade1/update/<id> (ids are hex). */
int update_object_path(const Update *u, char **ret);
