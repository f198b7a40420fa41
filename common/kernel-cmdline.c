/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <string.h>

#include "kernel-cmdline.h"

/* A space to the kernel's next_arg(): its isspace() (lib/ctype.c) takes the six ASCII
 * spaces and Latin-1's no-break space 0xa0. */
static bool is_kernel_space(char c) {
	return c == ' ' || (c >= '\t' && c <= '\r') || (unsigned char)c == 0xa0;
}

bool kernel_cmdline_next_word(const char **p, const char **ret_start, size_t *ret_len,
                              bool *unbalanced) {
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

bool kernel_cmdline_has_init_separator(const char *s) {
	const size_t sep = strlen(KERNEL_CMDLINE_INIT_SEPARATOR);
	const char *p = s, *w;
	bool unbalanced = false;
	size_t n;

	if (!s)
		return false;
	while (kernel_cmdline_next_word(&p, &w, &n, &unbalanced)) {
		/* next_arg() drops a leading quote, and the closing one at the word's end. */
		if (n > 0 && w[0] == '"')
			w++, n--;
		if (n > 0 && w[n - 1] == '"')
			n--;
		if (n == sep && strncmp(w, KERNEL_CMDLINE_INIT_SEPARATOR, sep) == 0)
			return true;
	}
	return false;
}
