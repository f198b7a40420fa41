/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What the configuration's files share (policy-config.c lists them); not part of the API. */

#include <stdbool.h>
#include <stddef.h>

#include "policy.h"

/* One assignment already made in the current file: duplicates are errors. */
typedef struct Seen {
	char *section;
	char *key;
	unsigned line;
} Seen;

typedef struct ParseContext {
	Policy *policy;
	const char *file;
	PolicyErrors *errors;
	size_t n_errors_before;

	/* the reader */
	const char *data;
	size_t size, pos;
	unsigned line;
	bool report;            /* final pass: report reader-level problems */
	bool in_broken_section; /* the last section header was replaced by BLANK_SECTION */
	unsigned *bad_lines;    /* sorted: lines inih rejected */
	size_t n_bad_lines;

	Seen *seen;
	size_t n_seen;
	char *unknown_section; /* last unknown section reported, to report it once */
	bool oom;
} ParseContext;

/* libvirt's QEMU driver writes managed-save images (the checkpoints) here. */
#define DEFAULT_CHECKPOINT_DIR   "/var/lib/libvirt/qemu/save"
/* Debian's prometheus-node-exporter: its textfile collector's directory. */
#define DEFAULT_METRICS_DIR      "/var/lib/prometheus/node-exporter"
#define DEFAULT_MARGIN_PERCENT   10
#define DEFAULT_SHUTDOWN_TIMEOUT 120
#define DEFAULT_SAVE_PARALLEL    2
#define DEFAULT_PAUSE_TIMEOUT    10

/* policy-config.c */
void policy_rule_done(PolicyVmRule *r);

/* policy-values.c */
/* Documentation/admin-guide/tainted-kernels.rst: bit n is policy_taint_letters[n]. */
extern const char policy_taint_letters[];

/* policy-settings.c: libinih's handlers. */
/* libinih calls this for every KEY=VALUE; c->line is the line it came from. */
int policy_config_handler(void *userdata, const char *section, const char *key, const char *value);
/* A handler that accepts everything: used to find the lines libinih rejects. */
int policy_config_handler_null(void *userdata, const char *section, const char *key,
                               const char *value);
