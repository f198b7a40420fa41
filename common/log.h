/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Minimal logging for the daemon and the CLI. Messages go to stderr; under
 * systemd (JOURNAL_STREAM set) each line carries a "<N>" priority prefix so the
 * journal records the right level. "%m" expands to strerror(-error).
 *
 * Libraries (loader/, policy/) log at debug level at most.
 */

#include <syslog.h>

#include "macros.h"

void log_set_max_level(int level);
int log_get_max_level(void);
/* Parses "err", "warning", "info", "debug" or a number 0..7. */
int log_level_from_string(const char *s);
void log_set_prefix(const char *prefix);

/* Logs and returns error as a negative errno. With error == 0 it returns 0, or -EIO
 * for levels LOG_ERR and above so that "return log_error(...)"-style callers fail. */
int log_internal(int level, int error, const char *file, int line, const char *func,
                 const char *format, ...) _printf_(6, 7);

#define log_full_errno(level, error, ...) \
	log_internal((level), (error), __FILE__, __LINE__, __func__, __VA_ARGS__)
#define log_full(level, ...) ((void)log_full_errno((level), 0, __VA_ARGS__))

#define log_debug(...)   log_full(LOG_DEBUG, __VA_ARGS__)
#define log_info(...)    log_full(LOG_INFO, __VA_ARGS__)
#define log_notice(...)  log_full(LOG_NOTICE, __VA_ARGS__)
#define log_warning(...) log_full(LOG_WARNING, __VA_ARGS__)
#define log_error(...)   log_full(LOG_ERR, __VA_ARGS__)

#define log_debug_errno(error, ...)   log_full_errno(LOG_DEBUG, (error), __VA_ARGS__)
#define log_info_errno(error, ...)    log_full_errno(LOG_INFO, (error), __VA_ARGS__)
#define log_notice_errno(error, ...)  log_full_errno(LOG_NOTICE, (error), __VA_ARGS__)
#define log_warning_errno(error, ...) log_full_errno(LOG_WARNING, (error), __VA_ARGS__)
#define log_error_errno(error, ...)   log_full_errno(LOG_ERR, (error), __VA_ARGS__)

#define log_oom() log_error_errno(-ENOMEM, "Out of memory.")
