/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The new kernel's log and command line are input the daemon does not
 * control: the kmsg parser, the TSC/clocksource scan and the stamps parser
 * must take anything.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bootlog.h"
#include "timebase.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	struct json_object *j = NULL;
	TimebaseStamps st;
	TimebaseCpu cpu;
	Bootlog b;
	char *text;

	if (bootlog_parse((const char *)data, size, &b) == 0) {
		if (bootlog_to_json(&b, &j) == 0)
			json_object_put(j);
		bootlog_done(&b);
	}

	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	(void)timebase_cpu_parse(text, text, &cpu);
	(void)timebase_stamps_from_cmdline(text, &st);
	free(text);
	return 0;
}
