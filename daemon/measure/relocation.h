/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The old kernel's last slice of a handoff: from its "Starting new kernel" line
 * (kernel_kexec(), before machine_shutdown(), the shutdown dump and the
 * relocation copy of machine_kexec()) to purgatory's entry stamp.
 *
 * The old kernel's log dies with it, except where pstore keeps it: a ramoops
 * area (memmap=SIZE$OFFSET and ramoops.* on both kernels' command lines, with
 * ramoops.max_reason=4 or printk.always_kmsg_dump=1) receives the kernel's
 * shutdown dump (KMSG_DUMP_SHUTDOWN), which the new kernel shows in
 * /sys/fs/pstore (systemd-pstore moves it to /var/lib/systemd/pstore). In it,
 * the daemon's own "upgraded: reboot-request update=ID" mark, written right
 * after the reboot-request clock sample (t = 0 of the report's axis), and the
 * kernel's "Starting new kernel" line share the old kernel's printk clock:
 * their difference puts "Starting new kernel" on the axis, and purgatory's
 * entry stamp (TSC) is on it already. docs/measurement.md, "The relocation slice".
 *
 * Pure functions.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "timebase.h"

#define RELOCATION_START_MESSAGE "Starting new kernel"
#define RELOCATION_MARK_PREFIX   "upgraded: reboot-request update="

/* The two lines of one handoff in a shutdown dump, on the old kernel's printk clock. */
typedef struct RelocationLog {
	uint64_t mark_us;  /* the daemon's reboot-request mark for the update */
	uint64_t start_us; /* the first "Starting new kernel" after it */
} RelocationLog;

/*
 * Finds them in a pstore dmesg record (text, size; need not be NUL-terminated):
 * lines "[<pri>][  SSSSS.UUUUUU] message", an optional caller id "[T123]" after
 * the time. The last mark naming update_id wins. -ENOENT without such a mark or
 * without a "Starting new kernel" line (with or without the "kexec_core: "
 * prefix) after it; -EINVAL without an update_id.
 */
int relocation_log_parse(const char *text, size_t size, const char *update_id, RelocationLog *ret);

typedef struct Relocation {
	int64_t start_ns;        /* "Starting new kernel" on the report's axis */
	int64_t entry_ns;        /* purgatory's entry stamp on it */
	int64_t ns;              /* entry_ns - start_ns */
	uint64_t uncertainty_ns; /* +- on ns */
	bool estimated;          /* the TSC is not invariant (as under QEMU's TCG) */
} Relocation;

/*
 * The slice from log, the reboot-request sample the mark followed (request: its
 * TSC and CLOCK_MONOTONIC), the moment the mark was written (mark_written_ns,
 * CLOCK_MONOTONIC: how late after the sample it can be), purgatory's entry stamp
 * and the TSC facts (both in in). On failure *ret_reason names why (static text):
 * -ENODATA (no entry stamp, no TSC reading, no frequency, no mark moment),
 * -ERANGE (the lines out of order, or the entry stamp before "Starting new kernel"
 * beyond the uncertainty). With a TSC that is not invariant the figure is given,
 * estimated, and *ret_reason says why it is only an estimate.
 */
int relocation_compute(const RelocationLog *log, const TimebaseSample *request,
                       uint64_t mark_written_ns, const TimebaseInput *in, Relocation *ret,
                       const char **ret_reason);

/* {"ns","uncertainty_ns","start_ns","entry_ns","estimated","source","reason"} */
int relocation_to_json(const Relocation *r, const char *source, const char *reason,
                       struct json_object **ret);
