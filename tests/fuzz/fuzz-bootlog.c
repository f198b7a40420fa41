/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The new kernel's log and command line, and the old kernel's shutdown dump
 * in pstore, are input the daemon does not control: the kmsg parser, the
 * TSC/clocksource scan, the stamps parser and the dump's parser (with the
 * relocation slice computed from whatever it found) must take anything.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bootlog.h"
#include "relocation.h"
#include "timebase.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	struct json_object *j = NULL;
	TimebaseStamps st;
	TimebaseCpu cpu;
	Bootlog b;
	RelocationLog rl;
	char *text;

	if (bootlog_parse((const char *)data, size, &b) == 0) {
		if (bootlog_to_json(&b, &j) == 0)
			json_object_put(j);
		bootlog_done(&b);
	}

	/* Not NUL-terminated, as read from the record. */
	if (relocation_log_parse((const char *)data, size, "0123456789abcdef", &rl) == 0) {
		TimebaseInput in = { .old_reboot = { .tsc = 1, .monotonic_ns = 1 },
			             .cpu = { .tsc_khz = 1000000 },
			             .stamps = { .entry = UINT64_MAX } };
		const char *why;
		Relocation r;

		if (relocation_compute(&rl, &in.old_reboot, 2, &in, &r, &why) == 0 &&
		    relocation_to_json(&r, "fuzz", why, &j) == 0)
			json_object_put(j);
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
