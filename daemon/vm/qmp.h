/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * A tiny QMP client over a unix socket, every call bounded by a deadline (CLOCK_MONOTONIC
 * microseconds). Used where libvirt cannot be asked: the restoring QEMU's extra monitor, which
 * QEMU opens (server=on,wait=on) before libvirt's own handshake can finish.
 */

#include <stdbool.h>
#include <stdint.h>

typedef struct Qmp Qmp;

/* Connects to path, trying again (the socket may not exist yet) until deadline; reads the
 * greeting. -ETIMEDOUT when nothing answered in time. */
int qmp_connect(const char *path, uint64_t deadline, Qmp **ret);
void qmp_close(Qmp *q);

/* Sends the JSON command cmd and waits for its answer (events are skipped). 0 on "return",
 * -EREMOTEIO on "error" with its "desc" in *ret_error when non-NULL; *ret_reply (optional)
 * gets the whole answer line. */
int qmp_execute(Qmp *q, const char *cmd, uint64_t deadline, char **ret_reply, char **ret_error);

/* qmp_capabilities, then migrate-set-capabilities of one capability, written back to back
 * so that they are queued before anyone else's command reaches QEMU. */
int qmp_negotiate_and_set(Qmp *q, const char *capability, bool on, uint64_t deadline,
                          char **ret_error);

/* The "status" field of query-status ("inmigrate", "paused", "running"...). */
int qmp_run_state(Qmp *q, uint64_t deadline, char **ret_status);

uint64_t qmp_now(void);
