/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cmdline.h"
#include "kernel-cmdline.h"
#include "macros.h"
#include "string-util.h"
#include "upgrade-bus.h"

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
	while (kernel_cmdline_next_word(&p, &w, &n, &unbalanced)) {
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
	/* upgraded's own parameters follow the caller's words: after a "--" the kernel would
	 * hand them to init, and the next kernel would boot without them. */
	if (kernel_cmdline_has_init_separator(s))
		return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_CMDLINE,
		                         "Command line contains '" KERNEL_CMDLINE_INIT_SEPARATOR
		                         "': the words after it go to init, and the parameters "
		                         "upgraded adds at the end would go with them. Pass init's "
		                         "arguments another way (e.g. init=, systemd.unit=).");
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
	while (kernel_cmdline_next_word(&p, &w, &n, &unbalanced)) {
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
	while (kernel_cmdline_next_word(&p, &w, &n, &unbalanced))
		if (n == strlen(word) && strncmp(w, word, n) == 0)
			return true;
	return false;
}
