/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The Prometheus metrics of a host: a node_exporter textfile
 * (<dir>/upgraded.prom, Debian's default dir /var/lib/prometheus/node-exporter,
 * [Metrics] TextfileDirectory= in the policy) that node_exporter's textfile
 * collector serves with the host's other metrics. docs/fleet.md names every
 * series.
 *
 * The text is made from two documents the daemon already publishes, never from
 * its internals: Describe() (the state, the staged update, the backend) and
 * the last report (docs/report.md). A figure the report leaves null is left
 * out (no sample), never written as 0.
 */

#include <json-c/json.h>

#define METRICS_DEFAULT_DIR "/var/lib/prometheus/node-exporter"
#define METRICS_FILE_NAME   "upgraded.prom"

/* The textfile of describe (Describe()'s JSON object; NULL: not known) and
 * report (the last report; NULL: no update finished yet), in the Prometheus
 * text exposition format. version: the daemon's. A schema-1 report is mapped onto
 * schema 2 in place (report_upgrade()). */
int metrics_format(json_object *describe, json_object *report, const char *version,
                   char **ret_text);

/* Replaces <dir>/upgraded.prom with text atomically (temporary file, fsync,
 * rename, fsync of dir; node_exporter reads only *.prom, never the temporary).
 * -ENOENT when dir does not exist: node_exporter is not installed, and the
 * daemon does not create its directory. */
int metrics_write(const char *dir, const char *text);

/* Both at once from the JSON texts of Describe() and of the last report
 * (report_json NULL or unparsable: no update finished yet). */
int metrics_refresh(const char *dir, const char *describe_json, const char *report_json,
                    const char *version);
