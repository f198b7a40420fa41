/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The contract between upgraded-defer-generator (generator/) and the daemon
 * (daemon/core/deferred-units.c) for [Restore] DeferUntilRestored=: on the boot after
 * an update's handoff the generator gives every named unit a drop-in ordering it after
 * DEFER_WAIT_UNIT, a oneshot that waits for DEFER_RELEASE_FILE; the daemon creates that
 * file once the VMs are restored (or the restore gave up). All of it lives under /run:
 * nothing survives into the next boot (docs/architecture.md, "Deferred units").
 */

/* systemd's normal generator output directory, where the daemon finds the drop-ins. */
#define DEFER_GENERATOR_DIR "/run/systemd/generator"
#define DEFER_DROPIN_NAME   "50-upgraded-defer.conf"
#define DEFER_WAIT_UNIT     "upgraded-defer.service"
#define DEFER_RELEASE_FILE  "/run/upgraded/restored"
/* The waiter gives up after this long: a daemon that never says the restore is over
 * must not hold the units back for the whole boot. */
#define DEFER_WAIT_TIMEOUT  "15min"
