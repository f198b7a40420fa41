/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Boot analysis from the new kernel's log: time to init and the largest gaps
 * between consecutive kernel messages (the stalls worth chasing), each with the
 * message that ended it.
 *
 * Input: /dev/kmsg records ("pri,seq,usec,flags;message", continuation lines
 * starting with a space are ignored) or dmesg lines ("[    1.234567] message").
 * Timestamps are the kernel's local_clock() in microseconds since its start.
 *
 * A pure parser; common/kmsg.h reads /dev/kmsg without blocking.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#define BOOTLOG_TOP_GAPS    5
#define BOOTLOG_MESSAGE_MAX 200 /* messages are cut to this many bytes in the result */

typedef struct BootlogGap {
	uint64_t start_us;
	uint64_t end_us;
	uint64_t seq;   /* of the message that ended the gap (kmsg input; else its index) */
	char *message;  /* the message that ended the gap */
	char *previous; /* the message before the gap */
} BootlogGap;

typedef struct Bootlog {
	size_t n_messages;  /* kernel messages used */
	size_t n_skipped;   /* malformed lines and userspace (non-kernel facility) records */
	uint64_t first_seq; /* > 0: the start of the log was overwritten before it was read */
	uint64_t first_us;
	uint64_t last_us;
	bool has_init;
	uint64_t init_us;
	const char *init_marker; /* "run-init" or "free-initmem" (static string) */
	bool gaps_until_init;    /* gaps were taken up to the init marker only */
	size_t n_gaps;
	BootlogGap gaps[BOOTLOG_TOP_GAPS]; /* largest first */
} Bootlog;

/* Parses size bytes of text; never fails on odd lines (they are counted). */
int bootlog_parse(const char *text, size_t size, Bootlog *ret);
void bootlog_done(Bootlog *b);

/* {"messages","first_seq","truncated","init_us","init_marker","gaps":[{...}]} */
int bootlog_to_json(const Bootlog *b, struct json_object **ret);
