/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The update report, /var/lib/upgraded/reports/<id>.json. Its JSON Schema is
 * docs/report.schema.json ("schema": 2), documented field by field in
 * docs/report.md; tests validate every report they produce against it.
 *
 * report_build() assembles every section in the layout of schema 1 (the VM
 * records as the handoff record keeps them); the measured ones (timebase, phases,
 * probe, boot, totals, vm_downtime) start as "missing" with a reason and are
 * filled by the measurement (daemon/measure/measure.c) through Context.measure.
 * report_finish() then maps it onto schema 2 (common/report-schema.h) and adds
 * the host's identity.
 */

#include <sys/uio.h>

#include <json-c/json.h>

#include "log-ids.h"

#include "update.h"

/* The layout report_build() assembles; report_finish() turns it into schema 2. */
#define REPORT_SCHEMA_ASSEMBLED 1

/* MESSAGE_ID of the journal entry announcing a report (journalctl MESSAGE_ID=...). */
#define REPORT_MESSAGE_ID LOG_MID_REPORT /* common/log-ids.h */

/* Builds the report of a finished (done or failed) update. */
int report_build(const Update *u, bool backend_test_only, json_object **ret);

/* Maps an assembled report onto schema 2: machine id from root/etc/machine-id (root NULL:
 * "/"; null when unreadable), the daemon's version, finished_at. */
int report_finish(json_object *report, const char *root);

/* The structured journal entry of a written report: MESSAGE_ID=REPORT_MESSAGE_ID,
 * MESSAGE=, PRIORITY=, UPGRADED_ID=, UPGRADED_RESULT=, UPGRADED_REPORT=,
 * UPGRADED_OLD_KERNEL=, UPGRADED_NEW_KERNEL=, UPGRADED_MODE=, UPGRADED_TIMEBASE=,
 * UPGRADED_UNCERTAINTY_USEC=, UPGRADED_BLACKOUT_USEC=, UPGRADED_MAX_VM_DOWNTIME_USEC=,
 * UPGRADED_MEDIAN_VM_DOWNTIME_USEC= (the last four only when measured). */
int report_journal_fields(json_object *report, const char *path, char ***ret_fields);

/* Test seam: where report_journal() sends the fields (sd_journal_sendv by default). */
extern int (*report_journal_sender)(const struct iovec *iov, int n);

/* Sends the entry; failures are logged at debug level and otherwise ignored. */
int report_journal(json_object *report, const char *path);
