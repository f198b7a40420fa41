/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The configuration's reader: hands libinih one physical line at a time, finds and
 * reports every line it rejects, and applies a file (policy_parse_buffer()).
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "log.h"
#include "policy-config-internal.h"
#include "policy-internal.h"
#include "string-util.h"

/* A line inih cannot deliver is replaced with one of these. */
#define BLANK_LINE    "\n"
#define BLANK_SECTION "[#invalid]\n"

static void context_done(ParseContext *c) {
	for (size_t i = 0; i < c->n_seen; i++) {
		free(c->seen[i].section);
		free(c->seen[i].key);
	}
	free(c->seen);
	free(c->bad_lines);
	free(c->unknown_section);
}

/* ---------- the reader ---------- */

static bool context_line_is_bad(const ParseContext *c, unsigned line) {
	for (size_t i = 0; i < c->n_bad_lines; i++)
		if (c->bad_lines[i] == line)
			return true;
	return false;
}

/* libinih silently drops what follows "]" on a section line ("[Handoff] Mode=fast"):
 * only blanks and a comment may follow. */
static bool section_has_trailing_text(const char *s, size_t n) {
	const char *end = memchr(s, ']', n);

	if (!end)
		return false; /* libinih rejects the line itself */
	for (const char *t = end + 1; t < s + n; t++) {
		if (*t == ';' || *t == '#')
			return false;
		if (!isspace((unsigned char)*t))
			return true;
	}
	return false;
}

static void reader_report(ParseContext *c, const char *fmt, ...) _printf_(2, 3);
static void reader_report(ParseContext *c, const char *fmt, ...) {
	va_list ap;

	if (!c->report)
		return;
	va_start(ap, fmt);
	if (policy_errors_addv(c->errors, c->file, c->line, fmt, ap) < 0)
		c->oom = true;
	va_end(ap);
}

/*
 * Hands libinih exactly one physical line per call, so its line count and ours
 * agree. Leading blanks are dropped (no multi-line continuation values); lines
 * libinih cannot take whole (too long, NUL bytes) and lines it rejected in an
 * earlier pass are replaced by an empty line or an invalid section marker, after
 * being reported.
 */
static char *reader(char *str, int num, void *stream) {
	ParseContext *c = stream;
	const char *s, *nl;
	size_t n;
	bool section;

	if (c->pos >= c->size || num < (int)sizeof(BLANK_SECTION))
		return NULL;
	s = c->data + c->pos;
	nl = memchr(s, '\n', c->size - c->pos);
	n = nl ? (size_t)(nl - s) + 1 : c->size - c->pos;
	c->pos += n;
	c->line++;

	while (n > 0 && *s != '\n' && isspace((unsigned char)*s)) {
		s++;
		n--;
	}
	/* libinih takes every line starting with '[' as a section header */
	section = n > 0 && *s == '[';
	if (section)
		c->in_broken_section = false;

	if (context_line_is_bad(c, c->line)) {
		if (section)
			reader_report(c, "Invalid section header (expected [Name])");
		else
			reader_report(c, "Expected KEY=VALUE, [Section], or a comment");
	} else if (memchr(s, '\0', n))
		reader_report(c, "Line contains a NUL byte");
	else if (num < 2 || n > (size_t)num - 1)
		reader_report(c, "Line is too long (at most %d characters)", num - 2);
	else if (section && section_has_trailing_text(s, n))
		reader_report(c, "Unexpected text after the section header");
	else {
		memcpy(str, s, n);
		str[n] = '\0';
		return str;
	}
	/* libinih's buffer holds INI_MAX_LINE bytes, more than either replacement */
	strcpy(str, section ? BLANK_SECTION : BLANK_LINE);
	if (section)
		c->in_broken_section = true; /* and it still ends the previous section */
	return str;
}

static void context_rewind(ParseContext *c) {
	c->pos = 0;
	c->line = 0;
	c->in_broken_section = false;
}

static int context_mark_bad(ParseContext *c, unsigned line) {
	unsigned *n = realloc(c->bad_lines, sizeof(*n) * (c->n_bad_lines + 1));

	if (!n)
		return -ENOMEM;
	c->bad_lines = n;
	n[c->n_bad_lines++] = line;
	return 0;
}

/* ---------- public entry points ---------- */

int policy_parse_buffer(Policy *p, const char *file, const char *data, size_t size,
                        PolicyErrors *errors) {
	ParseContext c = {
		.policy = p,
		.file = file,
		.errors = errors,
		.n_errors_before = errors ? errors->n : 0,
		.data = data,
		.size = size,
	};
	PolicyErrors local = {};
	bool too_many = false;
	int r;

	if (!p || !file || (!data && size > 0))
		return -EINVAL;
	if (!c.errors)
		c.errors = &local; /* still count them */

	/* 1. Find every line libinih rejects (it reports only the first one per run). */
	for (;;) {
		context_rewind(&c);
		r = ini_parse_stream(reader, &c, policy_config_handler_null, &c);
		if (r == 0)
			break;
		if (r < 0) {
			r = -ENOMEM;
			goto out;
		}
		if (context_line_is_bad(&c, (unsigned)r) ||
		    c.n_bad_lines >= POLICY_MAX_SYNTAX_ERRORS) {
			too_many = true;
			break;
		}
		if (context_mark_bad(&c, (unsigned)r) < 0) {
			r = -ENOMEM;
			goto out;
		}
	}

	/* 2. Apply the file, with the rejected lines reported and blanked. */
	context_rewind(&c);
	c.report = true;
	r = ini_parse_stream(reader, &c, policy_config_handler, &c);
	if (r < 0 || c.oom) {
		r = -ENOMEM;
		goto out;
	}
	if (too_many && policy_errors_add(c.errors, file, 0,
	                                  "Too many syntax errors: only the first %d are reported",
	                                  POLICY_MAX_SYNTAX_ERRORS) < 0) {
		r = -ENOMEM;
		goto out;
	}
	r = c.errors->n > c.n_errors_before ? -EBADMSG : 0;
out:
	context_done(&c);
	policy_errors_done(&local);
	log_debug("policy: parsed '%s': %d", file, r);
	return r;
}
