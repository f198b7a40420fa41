/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What the configuration's files share (policy-config.c lists them); not part of the API. */

#include <stdbool.h>
#include <stddef.h>

#include "policy.h"

typedef enum SettingKind {
	SETTING_BOOL,
	SETTING_MODE,
	SETTING_STRATEGY,
	SETTING_TAINT,
	SETTING_PATH_LIST,
	SETTING_WINDOW,
	SETTING_COUNT,      /* unsigned, or "infinity" */
	SETTING_SIZE_LIMIT, /* size, or "infinity" */
	SETTING_PATH,
	SETTING_BACKING_DIR, /* a directory, or empty: libvirt's qemu.conf says */
	SETTING_MARGIN,
	SETTING_SECONDS,
	SETTING_PAUSE_SECONDS,
	SETTING_PARALLEL,
	SETTING_KEEP_RAM_DIGEST,
	SETTING_KEEP_RAM_FALLBACK, /* checkpoint, or none */
	SETTING_SYNC_CLOCK,        /* a boolean, default yes */
	SETTING_SHUTDOWN,          /* orderly, or fast */
	SETTING_KDUMP_INITRD,      /* stage, or boot */
	SETTING_GLOB_LIST,
	SETTING_METADATA,
	SETTING_SIZE_OR_NONE,
	SETTING_UNIT_LIST, /* unit names or globs (policy_unit_pattern_valid) */
} SettingKind;

typedef struct Setting {
	const char *section; /* NULL: a [VMRule:NAME] key */
	const char *key;
	SettingKind kind;
	bool list; /* may repeat: appends; empty assignment clears */
} Setting;

/* Every key of every section, in the order policy_show() prints them (policy-settings.c). */
const Setting *policy_settings(size_t *ret_n);

/* Where a setting came from (policy_show()): section ("VMRule:NAME" for a rule), key, and
 * "FILE:LINE" (several joined with ", " for a list appended to; "default, ..." when it
 * appended to the defaults). */
typedef struct PolicyOrigin {
	char *section;
	char *key;
	char *where;
} PolicyOrigin;

struct PolicyOrigins {
	PolicyOrigin *items;
	size_t n;
	char **files; /* the files read, in order */
};

/* policy-config.c */
void policy_origins_free(struct PolicyOrigins *o);
/* The assignment at file:line set section/key (append: added to a list). */
int policy_origin_note(Policy *p, const char *section, const char *key, const char *file,
                       unsigned line, bool append);

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
