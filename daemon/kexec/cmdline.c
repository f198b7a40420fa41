/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cmdline.h"
#include "macros.h"
#include "string-util.h"
#include "upgrade-bus.h"

/* A space to the kernel's next_arg(): its isspace() (lib/ctype.c) takes the six ASCII
 * spaces and Latin-1's no-break space 0xa0. */
static bool is_kernel_space(char c) {
	return c == ' ' || (c >= '\t' && c <= '\r') || (unsigned char)c == 0xa0;
}

/* Finds the next word of a kernel command line the way the kernel's
 * next_arg() does: whitespace separates, double quotes group. Returns false at
 * the end; -EINVAL via *unbalanced when a quote is never closed. */
static bool next_word(const char **p, const char **ret_start, size_t *ret_len, bool *unbalanced) {
	const char *s = *p, *start;
	bool quoted = false;

	while (is_kernel_space(*s))
		s++;
	if (*s == '\0')
		return false;
	start = s;
	for (; *s; s++) {
		if (*s == '"')
			quoted = !quoted;
		else if (!quoted && is_kernel_space(*s))
			break;
	}
	if (quoted)
		*unbalanced = true;
	*ret_start = start;
	*ret_len = (size_t)(s - start);
	*p = s;
	return true;
}

/* The parameter name of a word, quotes removed the way the kernel does it for a
 * leading quote ("foo=bar" and "foo"=bar both name foo). */
static bool word_has_prefix(const char *w, size_t n, const char *prefix) {
	size_t pl = strlen(prefix);

	if (n > 0 && w[0] == '"')
		w++, n--;
	return n >= pl && strncmp(w, prefix, pl) == 0;
}

int cmdline_validate(const char *s, sd_bus_error *error) {
	const char *p = s, *w;
	bool unbalanced = false;
	size_t n;

	if (!s)
		return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_CMDLINE,
		                         "Command line missing.");
	if (strlen(s) > (size_t)CMDLINE_MAX)
		return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_CMDLINE,
		                         "Command line is %zu bytes long, the maximum is %d.",
		                         strlen(s), CMDLINE_MAX);
	if (string_has_cc(s))
		return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_CMDLINE,
		                         "Command line contains control characters.");
	/* The kernel splits at 0xa0 too, and other bytes of a UTF-8 character may be
	 * read as one: where words begin is only certain in ASCII. */
	for (const char *q = s; *q; q++)
		if ((unsigned char)*q >= 0x80)
			return sd_bus_error_setf(
			        error, UPGRADE_ERROR_INVALID_CMDLINE,
			        "Command line contains a non-ASCII byte (0x%02x at "
			        "offset %zu): only ASCII is accepted.",
			        (unsigned char)*q, (size_t)(q - s));
	/* The loader refuses the stamps key anywhere, and a reader on the next kernel
	 * would take one inside a quoted value ("a b upgraded.stamps=...") for a word. */
	if (strstr(s, PURGATORY_STAMPS_KEY) || strstr(s, "upgraded.panic="))
		return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_CMDLINE,
		                         "Command line contains '%s' or 'upgraded.panic=': they "
		                         "are set by upgraded itself, even inside a value.",
		                         PURGATORY_STAMPS_KEY);
	while (next_word(&p, &w, &n, &unbalanced)) {
		char q[ESCAPE_CUT_SIZE(64)];

		if (word_has_prefix(w, n, CMDLINE_RESERVED_PREFIX))
			return sd_bus_error_setf(
			        error, UPGRADE_ERROR_INVALID_CMDLINE,
			        "Command line parameter '%s' is reserved: upgraded.* parameters "
			        "are set by upgraded itself.",
			        string_escape_cut(w, n, 64, q));
	}
	if (unbalanced)
		return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_CMDLINE,
		                         "Command line has an unbalanced double quote.");
	return 0;
}

int cmdline_strip_for_reuse(const char *s, char **ret) {
	_cleanup_free_ char *out = NULL;
	const char *p = s, *w;
	bool unbalanced = false;
	size_t n, len = 0;

	if (!s || !ret)
		return -EINVAL;
	out = malloc(strlen(s) + 1);
	if (!out)
		return -ENOMEM;
	while (next_word(&p, &w, &n, &unbalanced)) {
		if (word_has_prefix(w, n, CMDLINE_RESERVED_PREFIX) ||
		    word_has_prefix(w, n, "BOOT_IMAGE="))
			continue;
		if (len > 0)
			out[len++] = ' ';
		memcpy(out + len, w, n);
		len += n;
	}
	out[len] = '\0';
	*ret = TAKE_PTR(out);
	return 0;
}

bool cmdline_has_word(const char *s, const char *word) {
	const char *p = s, *w;
	bool unbalanced = false;
	size_t n;

	if (!s || !word)
		return false;
	while (next_word(&p, &w, &n, &unbalanced))
		if (n == strlen(word) && strncmp(w, word, n) == 0)
			return true;
	return false;
}
