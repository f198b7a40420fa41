/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes the readers of a downtime report (/var/lib/upgraded/reports/<id>.json, returned by
 * GetReport): `upgradectl report` maps a schema-1 report onto schema 2 (report_upgrade())
 * and prints it with report_print() (and report_html() with --html), the daemon announces it in the
 * journal with report_journal_fields(). Any JSON must print or be refused, never crash; every
 * journal field is KEY=value with an upper-case key.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "report-html.h"
#include "report-print.h"
#include "report-schema.h"
#include "report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_fields(char **fields) {
	STRV_FOREACH (f, fields) {
		const char *eq = strchr(*f, '=');

		if (!eq || eq == *f ||
		    strspn(*f, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789") != (size_t)(eq - *f))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	static FILE *null;
	json_object *o;
	char *text, **fields = NULL;

	if (size > 1u << 20)
		return 0;
	if (!null)
		null = fopen("/dev/null", "we");
	if (!null)
		abort();
	text = malloc(size + 1);
	if (!text)
		abort();
	memcpy(text, data, size);
	text[size] = '\0';
	o = json_tokener_parse(text); /* as upgradectl does with GetReport's reply */
	free(text);
	if (!o)
		return 0;
	report_print(o, null); /* whatever it is: the printers read any JSON */
	report_html(o, null);
	if (report_upgrade(o, NULL) >= 0) {
		report_print(o, null);
		report_html(o, null);
	}
	if (report_journal_fields(o, "/var/lib/upgraded/reports/0123456789abcdef.json", &fields) >=
	    0) {
		check_fields(fields);
		strv_free(fields);
	}
	json_object_put(o);
	return 0;
}
