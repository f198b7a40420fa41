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

size_t utf8_char_len(const char *s, size_t n) {
	const unsigned char *p = (const unsigned char *)s;
	unsigned cp, min;
	size_t len;

	if (n == 0)
		return 0;
	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		len = 2, cp = p[0] & 0x1f, min = 0x80;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		len = 3, cp = p[0] & 0x0f, min = 0x800;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		len = 4, cp = p[0] & 0x07, min = 0x10000;
	else
		return 0;
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

char *string_escape_cut(const char *s, size_t len, size_t max, char *buf) {
	size_t i = 0, o = 0;

	if (s)
		len = strnlen(s, len);
	else
		len = 0;
	while (i < len) {
		size_t c = utf8_char_len(s + i, len - i);
		unsigned char b = (unsigned char)s[i];
		bool escape = c == 0 || b < 0x20 || b == 0x7f;
		size_t need = escape ? 4 : c;

		if (o + need > max)
			break;
		if (escape) {
			static const char hex[] = "0123456789abcdef";

			buf[o++] = '\\';
			buf[o++] = 'x';
			buf[o++] = hex[b >> 4];
			buf[o++] = hex[b & 0xf];
			i++;
		} else {
			memcpy(buf + o, s + i, c);
			o += c;
			i += c;
		}
	}
	if (i < len) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o] = '\0';
	return buf;
}

char *string_escape(const char *s) {
	size_t max = 4 * strlen(strempty(s)); /* every byte written as \xNN at worst */
	char *buf = malloc(ESCAPE_CUT_SIZE(max));

	return buf ? string_escape_cut(s, SIZE_MAX, max, buf) : NULL;
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
