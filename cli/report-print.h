/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * `upgradectl report`: a downtime report (docs/report.schema.json, schema 2: a schema-1 file is
 * upgraded first, report_upgrade()) as text. The report comes
 * from the daemon (GetReport) and is only trusted to be JSON: any shape prints, fields that
 * are missing or of another type print as "n/a".
 */

#include <stdio.h>
#include <json-c/json.h>

void report_print(json_object *report, FILE *f);
