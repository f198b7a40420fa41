/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "string-util.h"

bool string_has_cc(const char *s) {
	for (const unsigned char *p = (const unsigned char *)s; p && *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return true;
	return false;
}

size_t strv_length(char *const *l) {
	size_t n = 0;

	while (l && l[n])
		n++;
	return n;
}

int strv_extend(char ***l, const char *s) {
	size_t n = strv_length(*l);
	char *c, **nl;

	c = strdup(s);
	if (!c)
		return -ENOMEM;
	nl = realloc(*l, sizeof(char *) * (n + 2));
	if (!nl) {
		free(c);
		return -ENOMEM;
	}
	nl[n] = c;
	nl[n + 1] = NULL;
	*l = nl;
	return 0;
}

char *strstrip(char *s) {
	char *b = s, *e;

	while (isspace((unsigned char)*b))
		b++;
	if (b != s)
		memmove(s, b, strlen(b) + 1);
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

int safe_atou64_prefix(const char *s, unsigned long long *ret, const char **ret_end) {
	unsigned long long v;
	char *end;

	if (!s || !isdigit((unsigned char)s[0]))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	*ret = v;
	*ret_end = end;
	return 0;
}

int safe_atou64(const char *s, unsigned long long *ret) {
	const char *end = NULL;
	unsigned long long v;
	int r = safe_atou64_prefix(s, &v, &end);

	if (r >= 0 && *end != '\0')
		r = -EINVAL;
	if (r >= 0)
		*ret = v;
	return r;
}
