/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Minimal logging for the daemon and the CLI. Messages go to stderr. When stderr is the
 * journal's stream (JOURNAL_STREAM names it, as systemd sets it for a service), each line
 * is sent as a structured entry instead (docs/journal.md): PRIORITY, MESSAGE,
 * SYSLOG_IDENTIFIER, CODE_FILE/LINE/FUNC, UPGRADED_ID= when the calling thread works on an
 * update (log_set_update_id()), and MESSAGE_ID= for an event (log_event(), ids in
 * log-ids.h). "%m" expands to strerror(-error).
 *
 * Libraries (loader/, policy/) log at debug level at most.
 */

#include <stdbool.h>
#include <sys/uio.h>
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
int log_internal_event(int level, const char *message_id, const char *update_id, const char *file,
                       int line, const char *func, const char *format, ...) _printf_(7, 8);

/* The update this thread works on (16 hex, copied; NULL: none): every line it logs carries
 * UPGRADED_ID=. Thread-local: a job's worker sets it for its update. */
void log_set_update_id(const char *id);
const char *log_get_update_id(void);

/* Structured entries: true sends them through log_journal_sender (tests force it; by
 * default only when stderr is the journal's stream). */
void log_set_journal(bool on);
extern int (*log_journal_sender)(const struct iovec *iov, int n);

/* An event an operator searches for: MESSAGE_ID=message_id and UPGRADED_ID=update_id (NULL:
 * the thread's, log_set_update_id()). On stderr it is an ordinary line. */
#define log_event(level, message_id, update_id, ...)                                      \
	((void)log_internal_event((level), (message_id), (update_id), __FILE__, __LINE__, \
	                          __func__, __VA_ARGS__))

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
