/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Following an update object (`commit --wait`, `stage --wait`, `watch`): prints each phase,
 * each VM's result, and while VMs are saved or restored their bytes, rate and an estimate of
 * the time left, until the update reached the handoff, finished, or the time limit passed.
 */

#include <stdint.h>
#include <systemd/sd-bus.h>

#include "macros.h"

typedef enum FollowOutcome {
	FOLLOW_HANDOFF,     /* kexec requested: the new kernel completes the update */
	FOLLOW_DONE,        /* done (or staged, for stage --wait) */
	FOLLOW_FAILED,      /* failed: its error was printed */
	FOLLOW_CANCELLED,   /* cancelled */
	FOLLOW_TIMEOUT,     /* the time limit passed first */
	FOLLOW_DAEMON_GONE, /* upgraded left the bus */
	FOLLOW_BUS_ERROR,   /* the bus failed (printed) */
} FollowOutcome;

typedef struct Follow Follow;

/* Subscribes before the call that starts the work, so that no signal is missed. */
int follow_new(sd_bus *bus, Follow **ret);
Follow *follow_free(Follow *f);
DEFINE_TRIVIAL_CLEANUP_FUNC(Follow *, follow_free);
/* Follows the update at path; timeout_usec 0: no limit. */
FollowOutcome follow_update(Follow *f, const char *path, uint64_t timeout_usec);
