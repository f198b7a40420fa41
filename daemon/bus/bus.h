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
#include "job.h"
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
	VmWiring *vms;   /* RestoreVM(); NULL: not offered */
	Job *commit_job; /* the running commit (Cancel stops it), NULL: none */
	char *commit_id;
	char *abort_id; /* the stuck update Cancel is rolling back (bus-cancel.c), NULL: none */
	Job *stage_job; /* the running Stage (bus-stage.c), NULL: none */
	char *stage_id; /* the id its update will have */
} Manager;

/* What a method does once its caller is authorized (bus-polkit.c). */
typedef int (*AuthContinuation)(sd_bus_message *m, Manager *mgr, sd_bus_error *error);

/* Root goes straight to cont. Anyone else needs polkit's yes for action (a string constant,
 * one per method: UPGRADE_POLKIT_ACTION_*): the check is asynchronous, cont runs (and
 * replies) when polkit answered. Returns 1 when the reply comes later. A refusal names
 * the action (PermissionDenied). */
int bus_authorize(Manager *mgr, sd_bus_message *m, const char *action, AuthContinuation cont,
                  sd_bus_error *error);

/* Cancel() of update u, stuck in committing with no commit job running it: rolled back unless
 * the kexec is under way (bus-cancel.c). Returns 1 when the reply comes later. */
int manager_cancel_stuck(Manager *mgr, sd_bus_message *m, Update *u, sd_bus_error *error);

/* Stage(): checked on the loop, the files read and loaded by a job (bus-stage.c). */
int method_stage(sd_bus_message *m, void *userdata, sd_bus_error *error);
/* Cancel(id) of the update being staged ("": the one, when none is active): stops its job
 * and answers; the Stage call then fails with Cancelled. 0 when id names no such update. */
int manager_cancel_staging(Manager *mgr, sd_bus_message *m, const char *id);

/* Reload(): the policy read again, refused while anything reads it (bus-reload.c). */
int method_reload(sd_bus_message *m, void *userdata, sd_bus_error *error);

/* The context's callbacks turned into signals, the kexec request and sd_notify (bus-notify.c). */
void manager_context_ops(Manager *m, ContextOps *ret);
/* Hands userdata to a floating slot that frees it with destroy (bus.c). */
int bus_slot_own(sd_bus_slot *slot, void *userdata, sd_bus_destroy_t destroy);

/* sd_notify STATUS= with the active update's state and phase (no-op outside systemd). */
void manager_notify_status(Manager *m);

/* Registers objects and hooks the context's notifications to the bus. */
int manager_bus_attach(Manager *m);

/* Object path of an update: /org/upgraded/Upgrade1/update/<id> (ids are hex). */
int update_object_path(const Update *u, char **ret);
