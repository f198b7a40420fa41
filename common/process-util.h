/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>

/*
 * Runs argv[0] (an absolute path) with argv, stdin from /dev/null and its stdout joined to our
 * stderr (under systemd: the journal), and waits for it at most timeout_usec; a child still
 * running then is killed (SIGKILL) and reaped. Returns 0 with *ret_status the exit status (or
 * 128 + the signal that ended it), -ETIMEDOUT when it was killed for the deadline, or a
 * negative errno when it could not be started (fork; an exec failure is status 127).
 */
int spawn_wait(char *const argv[], uint64_t timeout_usec, int *ret_status);
