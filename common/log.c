/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static int max_level = LOG_INFO;
static const char *log_prefix;

void log_set_max_level(int level) {
	max_level = level;
}

int log_get_max_level(void) {
	return max_level;
}

void log_set_prefix(const char *prefix) {
	log_prefix = prefix;
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

int log_internal(int level, int error, const char *file, int line, const char *func,
                 const char *format, ...) {
	int saved_errno = errno;
	va_list ap;

	(void)file;
	(void)line;
	(void)func;

	if (level <= max_level) {
		/* Under the journal, a "<N>" prefix sets the priority of the line. */
		if (getenv("JOURNAL_STREAM"))
			fprintf(stderr, "<%d>", level);
		if (log_prefix)
			fprintf(stderr, "%s: ", log_prefix);
		/* "%m" in format refers to the error passed in, not to a stale errno. */
		errno = ERRNO_VALUE(error);
		va_start(ap, format);
		vfprintf(stderr, format, ap);
		va_end(ap);
		fputc('\n', stderr);
	}

	errno = saved_errno;
	if (error == 0)
		return level <= LOG_ERR ? -EIO : 0;
	return error < 0 ? error : -error;
}
