/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * `upgradectl report --html`: one update as a self-contained HTML page (inline CSS and SVG,
 * no script, no external reference of any kind). The picture puts on the report's time axis
 * (t = 0: its phase_axis): the phases, with +- uncertainty whiskers on the boundaries that
 * cross the kexec; purgatory's slice (entry, verification, jump); the largest boot gaps of the
 * new kernel; and one bar per VM from its pause to its resume. Tables below it give the same
 * figures as text. docs/fleet.md describes the page.
 *
 * Like report_print(), any JSON is accepted: what is missing or of another type is left out
 * and said so, never invented.
 */

#include <stdio.h>
#include <json-c/json.h>

void report_html(json_object *report, FILE *f);

/* The page to path (written atomically), or to stdout when path is NULL. 0 or -errno. */
int report_html_write(json_object *report, const char *path);
