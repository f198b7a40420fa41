/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Helpers shared by the policy's modules and its tests; not part of the API. */

#include <stdarg.h>

#include "macros.h"
#include "policy.h"

#define POLICY_CONFIG_DIR        "/etc/upgraded"
#define POLICY_CONFIG_FILE       "/etc/upgraded/upgraded.conf"
#define POLICY_CONFIG_DROPIN_DIR "/etc/upgraded/upgraded.conf.d"
#define POLICY_CONFIG_MAX_SIZE   (1024 * 1024)
/* Syntax errors reported per file before giving up on it. */
#define POLICY_MAX_SYNTAX_ERRORS 64

/* "4096", "512K", "4G", "1TiB": binary multiples. -ERANGE on overflow. */
int policy_parse_size(const char *s, uint64_t *ret);
/* "Sat,Sun 02:00-04:00", "Mon-Fri 22:00-02:00", "03:00-04:00" (every day). */
int policy_parse_window(const char *s, PolicyWindow *ret);
/* The window as policy_parse_window() reads it ("Mon,Tue 02:00-04:00"); "" when unset. */
const char *policy_window_format(const PolicyWindow *w, char buf[static 64]);
bool policy_window_contains(const PolicyWindow *w, int wday, unsigned minute);
/* Kernel taint letters ("O E", "OE") to a bit mask. */
int policy_parse_taint(const char *s, uint64_t *ret);
/* Bit mask to letters, e.g. "DW"; buf needs 32 bytes. */
const char *policy_taint_to_string(uint64_t taint, char buf[static 32]);
int policy_parse_bool(const char *s, bool *ret);

int policy_errors_add(PolicyErrors *e, const char *file, unsigned line, const char *fmt, ...)
        _printf_(4, 5);
int policy_errors_addv(PolicyErrors *e, const char *file, unsigned line, const char *fmt,
                       va_list ap) _printf_(4, 0);

int policy_reasons_add(PolicyReasons *r, const char *code, PolicyReasonSeverity severity,
                       const char *fmt, ...) _printf_(4, 5);
