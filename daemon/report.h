/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The update report, /var/lib/upgraded/reports/<id>.json. Its JSON Schema is
 * docs/report.schema.json; tests validate every report they produce against it.
 * This is the first, minimal version: per-VM figures and the probe timebase
 * arrive with the VM and measurement work.
 */

#include <json-c/json.h>

#include "update.h"

#define REPORT_SCHEMA_VERSION 1

/* Builds the report of a finished (done or failed) update. */
int report_build(const Update *u, bool backend_test_only, json_object **ret);
