/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Report schema 2 (docs/report.md). The daemon assembles a report in the layout of
 * schema 1 (daemon/core/report.c, daemon/measure/measure-report.c: the VM records are
 * the handoff record's, vm_results_to_json()) and report_upgrade() maps it onto schema 2
 * right before it is written. Readers (upgradectl, the metrics textfile) run the same
 * function on what they read, so a schema-1 file on disk reads as schema 2; only the
 * host's identity it never recorded (machine id, daemon version) stays null.
 *
 * The unit rule of schema 2: a duration is an integer `*_ns`; an instant is an ISO 8601
 * UTC string `*_at` (CLOCK_REALTIME, microseconds) or an integer `*_ns` on a clock the
 * field names (a boot's CLOCK_MONOTONIC, the report's axis); a size is `*_bytes`.
 */

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

#define REPORT_SCHEMA_LATEST 2

/* What a report says about the host and the daemon that wrote it. */
typedef struct ReportIdentity {
	const char *machine_id; /* 32 hex, NULL: unreadable */
	const char *version;    /* the daemon's version, NULL: unknown */
	uint64_t written_usec;  /* CLOCK_REALTIME of the write, 0: unknown */
} ReportIdentity;

/* CLOCK_REALTIME microseconds -> "2026-12-02T05:31:07.123456Z" (buf of 32). */
const char *report_iso_format(uint64_t realtime_usec, char buf[static 32]);

/* The reverse, for readers that compute with an instant: -EINVAL when s is not that form. */
int report_iso_parse(const char *s, uint64_t *ret_usec);

/* root/etc/machine-id, 32 lowercase hex (root NULL: "/"); -errno when unreadable or bad. */
int report_read_machine_id(const char *root, char **ret);

/* Maps a schema-1 report onto schema 2 in place; a schema-2 report is left as it is.
 * id may be NULL (a reader: identity unknown). -EPROTONOSUPPORT: another schema;
 * -EBADMSG: not a report object; -ENOMEM. */
int report_upgrade(json_object *report, const ReportIdentity *id);
