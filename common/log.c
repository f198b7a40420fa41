/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <systemd/sd-journal.h>

#include "log.h"

static int max_level = LOG_INFO;
static const char *log_prefix;
static int journal_mode = -1; /* -1: not decided yet, from JOURNAL_STREAM */
static _Thread_local char update_id[17];

int (*log_journal_sender)(const struct iovec *iov, int n) = sd_journal_sendv;

void log_set_max_level(int level) {
	max_level = level;
}

int log_get_max_level(void) {
	return max_level;
}

void log_set_prefix(const char *prefix) {
	log_prefix = prefix;
}

void log_set_journal(bool on) {
	journal_mode = on;
}

void log_set_update_id(const char *id) {
	snprintf(update_id, sizeof(update_id), "%s", id ?: "");
}

const char *log_get_update_id(void) {
	return update_id[0] ? update_id : NULL;
}

int log_level_from_string(const char *s) {
	static const char *const names[] = {
		[LOG_EMERG] = "emerg", [LOG_ALERT] = "alert",     [LOG_CRIT] = "crit",
		[LOG_ERR] = "err",     [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice",
		[LOG_INFO] = "info",   [LOG_DEBUG] = "debug",
	};

	if (!s)
		return -EINVAL;
	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (streq(s, names[i]))
			return (int)i;
	if (s[0] >= '0' && s[0] <= '7' && s[1] == '\0')
		return s[0] - '0';
	return -EINVAL;
}

/* Whether stderr is the journal's stream: JOURNAL_STREAM is "DEV:INODE" of it. */
static bool stderr_is_journal(void) {
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (journal_mode < 0)
		journal_mode = e && sscanf(e, "%llu:%llu", &dev, &ino) == 2 &&
		               fstat(STDERR_FILENO, &st) == 0 && st.st_dev == dev &&
		               st.st_ino == ino;
	return journal_mode > 0;
}

/* One structured entry; false when it could not be sent (the caller falls back to stderr). */
static bool send_entry(int level, const char *message_id, const char *id, const char *file,
                       int line, const char *func, const char *message) {
	char prio[16], code_line[32];
	char *fields[8] = {};
	struct iovec iov[8];
	int n = 0, r;

	snprintf(prio, sizeof(prio), "PRIORITY=%d", level);
	snprintf(code_line, sizeof(code_line), "CODE_LINE=%d", line);
	if (asprintf(&fields[n++], "MESSAGE=%s%s%s", log_prefix ?: "", log_prefix ? ": " : "",
	             message) < 0 ||
	    asprintf(&fields[n++], "SYSLOG_IDENTIFIER=%s", program_invocation_short_name) < 0 ||
	    asprintf(&fields[n++], "CODE_FILE=%s", file) < 0 ||
	    asprintf(&fields[n++], "CODE_FUNC=%s", func) < 0 ||
	    (message_id && asprintf(&fields[n++], "MESSAGE_ID=%s", message_id) < 0) ||
	    (id && asprintf(&fields[n++], "UPGRADED_ID=%s", id) < 0)) {
		n--; /* the failed one holds nothing */
		r = -ENOMEM;
	} else {
		int k = 0;

		for (; k < n; k++)
			iov[k] = (struct iovec){ fields[k], strlen(fields[k]) };
		iov[k++] = (struct iovec){ prio, strlen(prio) };
		iov[k++] = (struct iovec){ code_line, strlen(code_line) };
		r = log_journal_sender(iov, k);
	}
	for (int i = 0; i < n; i++)
		free(fields[i]);
	return r >= 0;
}

static void log_write(int level, int error, const char *message_id, const char *id,
                      const char *file, int line, const char *func, const char *format, va_list ap)
        _printf_(8, 0);
static void log_write(int level, int error, const char *message_id, const char *id,
                      const char *file, int line, const char *func, const char *format,
                      va_list ap) {
	char *message = NULL;

	if (stderr_is_journal()) {
		va_list aq;
		int k;

		/* "%m" in format refers to the error passed in, not to a stale errno. */
		errno = ERRNO_VALUE(error);
		va_copy(aq, ap);
		k = vasprintf(&message, format, aq);
		va_end(aq);
		if (k < 0)
			message = NULL;
		else if (send_entry(level, message_id, id, file, line, func, message)) {
			free(message);
			return;
		}
	}
	errno = ERRNO_VALUE(error);
	if (message) /* the journal refused it: the line still goes out */
		fprintf(stderr, "<%d>%s%s%s\n", level, log_prefix ?: "", log_prefix ? ": " : "",
		        message);
	else {
		if (getenv("JOURNAL_STREAM")) /* a "<N>" prefix sets the line's priority */
			fprintf(stderr, "<%d>", level);
		if (log_prefix)
			fprintf(stderr, "%s: ", log_prefix);
		vfprintf(stderr, format, ap);
		fputc('\n', stderr);
	}
	free(message);
}

static int log_result(int level, int error) {
	if (error == 0)
		return level <= LOG_ERR ? -EIO : 0;
	return error < 0 ? error : -error;
}

int log_internal(int level, int error, const char *file, int line, const char *func,
                 const char *format, ...) {
	int saved_errno = errno;
	va_list ap;

	if (level <= max_level) {
		va_start(ap, format);
		log_write(level, error, NULL, log_get_update_id(), file, line, func, format, ap);
		va_end(ap);
	}
	errno = saved_errno;
	return log_result(level, error);
}

int log_internal_event(int level, const char *message_id, const char *id, const char *file,
                       int line, const char *func, const char *format, ...) {
	int saved_errno = errno;
	va_list ap;

	if (level <= max_level) {
		va_start(ap, format);
		log_write(level, 0, message_id, id ?: log_get_update_id(), file, line, func, format,
		          ap);
		va_end(ap);
	}
	errno = saved_errno;
	return log_result(level, 0);
}
