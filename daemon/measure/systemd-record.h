/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What systemd recorded about this boot's and the previous boot's units, read for the
 * report's critical path (unitchain.h builds the chains):
 *
 *  - systemd_unit_chain_read(): the unit times over D-Bus (org.freedesktop.systemd1),
 *    every call bounded, the whole walk bounded by SYSTEMD_RECORD_DEADLINE_USEC;
 *  - journal_unit_stops_read(): PID 1's "Stopping"/"Stopped" entries of a given boot
 *    from the journal (the old boot's, read on the new kernel).
 *
 * Both block: call them from a job's worker, never from the event loop. On failure
 * *ret_why says why, in words for the report's "missing" array.
 */

#include <stdint.h>

#include "unitchain.h"

#define SYSTEMD_RECORD_DEADLINE_USEC (10ULL * 1000 * 1000)
#define SYSTEMD_RECORD_CALL_USEC     (2ULL * 1000 * 1000)

/* The unit this process runs in (its cgroup), e.g. "upgraded.service"; -ENODATA when it
 * does not run as a system service. */
int systemd_own_unit(char **ret);

/* Connects to bus_address (NULL: the system bus) and walks from target. On success
 * *ret_userspace_us is systemd's own start (UserspaceTimestampMonotonic, 0 unknown). */
int systemd_unit_chain_read(const char *bus_address, const char *target, UnitChain *ret,
                            uint64_t *ret_userspace_us, char **ret_why);

/* The stops of boot_id (32 hex) that ended at or after cut_us on its CLOCK_MONOTONIC.
 * root: "/" or NULL reads the local journal; another root reads <root>/var/log/journal. */
int journal_unit_stops_read(const char *root, const char *boot_id, uint64_t cut_us, UnitStops *ret,
                            char **ret_why);
