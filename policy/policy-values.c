/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The configuration's value parsers: booleans, sizes, maintenance windows, kernel taint
 * letters.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "policy-internal.h"
#include "string-util.h"

/* ---------- value parsers ---------- */

bool policy_unit_pattern_valid(const char *s) {
	static const char *const suffixes[] = { ".timer", ".service", ".path", ".socket" };
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > 255 || s[0] == '.' || s[0] == '-')
		return false;
	for (const char *c = s; *c; c++)
		if (!isalnum((unsigned char)*c) && !strchr(":_.-@\\*?[]", *c))
			return false;
	for (size_t i = 0; i < ELEMENTSOF(suffixes); i++) {
		size_t k = strlen(suffixes[i]);

		if (n > k && streq(s + n - k, suffixes[i]))
			return true;
	}
	return false;
}

int policy_parse_bool(const char *s, bool *ret) {
	static const char *const yes[] = { "1", "yes", "y", "true", "t", "on" };
	static const char *const no[] = { "0", "no", "n", "false", "f", "off" };

	for (size_t i = 0; i < ELEMENTSOF(yes); i++)
		if (strcasecmp(s, yes[i]) == 0) {
			*ret = true;
			return 0;
		}
	for (size_t i = 0; i < ELEMENTSOF(no); i++)
		if (strcasecmp(s, no[i]) == 0) {
			*ret = false;
			return 0;
		}
	return -EINVAL;
}

int policy_parse_size(const char *s, uint64_t *ret) {
	static const struct {
		const char *suffix;
		unsigned shift;
	} units[] = {
		{ "", 0 },     { "B", 0 },  { "K", 10 },   { "KiB", 10 }, { "M", 20 },
		{ "MiB", 20 }, { "G", 30 }, { "GiB", 30 }, { "T", 40 },   { "TiB", 40 },
	};
	unsigned long long v;
	const char *end;
	int r;

	r = safe_atou64_prefix(s, &v, &end);
	if (r < 0)
		return r;
	for (size_t i = 0; i < ELEMENTSOF(units); i++)
		if (streq(end, units[i].suffix)) {
			if (units[i].shift > 0 && v > (UINT64_MAX >> units[i].shift))
				return -ERANGE;
			*ret = (uint64_t)v << units[i].shift;
			return 0;
		}
	return -EINVAL;
}

static int parse_day(const char *s, size_t n) {
	static const char *const days[] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };

	for (size_t i = 0; i < ELEMENTSOF(days); i++)
		if (n == 3 && strncasecmp(s, days[i], 3) == 0)
			return (int)i;
	return -EINVAL;
}

/* "HH:MM" with 00 <= HH <= 24 (24:00 only as an end). */
static int parse_clock(const char *s, size_t n, unsigned *ret) {
	unsigned h, m;

	if (n != 5 || !isdigit((unsigned char)s[0]) || !isdigit((unsigned char)s[1]) ||
	    s[2] != ':' || !isdigit((unsigned char)s[3]) || !isdigit((unsigned char)s[4]))
		return -EINVAL;
	h = (unsigned)(s[0] - '0') * 10 + (unsigned)(s[1] - '0');
	m = (unsigned)(s[3] - '0') * 10 + (unsigned)(s[4] - '0');
	if (m > 59 || h > 24 || (h == 24 && m != 0))
		return -EINVAL;
	*ret = h * 60 + m;
	return 0;
}

static int parse_days(const char *s, size_t n, uint8_t *ret) {
	uint8_t days = 0;

	while (n > 0) {
		const char *comma = memchr(s, ',', n);
		size_t len = comma ? (size_t)(comma - s) : n;
		int a, b;

		if (len == 7 && s[3] == '-') {
			a = parse_day(s, 3);
			b = parse_day(s + 4, 3);
		} else
			a = b = parse_day(s, len);
		if (a < 0 || b < 0)
			return -EINVAL;
		for (int d = a;; d = (d + 1) % 7) {
			days |= (uint8_t)(1u << d);
			if (d == b)
				break;
		}
		if (!comma)
			break;
		n -= len + 1;
		s = comma + 1;
		if (n == 0)
			return -EINVAL; /* trailing comma */
	}
	*ret = days;
	return 0;
}

int policy_parse_window(const char *s, PolicyWindow *ret) {
	const char *sp, *times, *dash;
	PolicyWindow w = { .set = true, .days = 0x7f };
	unsigned start, end;

	if (!s)
		return -EINVAL;
	sp = strchr(s, ' ');
	if (sp) {
		if (sp == s || parse_days(s, (size_t)(sp - s), &w.days) < 0)
			return -EINVAL;
		times = sp + 1;
		while (*times == ' ')
			times++;
	} else
		times = s;
	dash = strchr(times, '-');
	if (!dash || parse_clock(times, (size_t)(dash - times), &start) < 0 ||
	    parse_clock(dash + 1, strlen(dash + 1), &end) < 0)
		return -EINVAL;
	if (start >= 24 * 60)
		return -EINVAL; /* 24:00 only ends a window */
	if (start == end)
		return -EINVAL; /* empty window: use no window instead */
	w.start = start;
	w.end = end;
	*ret = w;
	return 0;
}

bool policy_window_contains(const PolicyWindow *w, int wday, unsigned minute) {
	int yesterday = (wday + 6) % 7;

	if (!w->set)
		return true;
	if (wday < 0 || wday > 6 || minute >= 24 * 60)
		return false;
	if (w->start < w->end) /* within one day ("22:00-24:00" too) */
		return (w->days & (1u << wday)) && minute >= w->start && minute < w->end;
	/* wraps past midnight: belongs to the day it started */
	return ((w->days & (1u << wday)) && minute >= w->start) ||
	       ((w->days & (1u << yesterday)) && minute < w->end);
}

/* Documentation/admin-guide/tainted-kernels.rst: bit n is policy_taint_letters[n]. */
const char policy_taint_letters[] = "PFSRMBUDAWCIOELKXTN";

int policy_parse_taint(const char *s, uint64_t *ret) {
	uint64_t mask = 0;

	for (const char *c = s; *c; c++) {
		const char *l;

		if (*c == ' ' || *c == '\t')
			continue;
		l = strchr(policy_taint_letters, *c);
		if (!l)
			return -EINVAL;
		mask |= UINT64_C(1) << (l - policy_taint_letters);
	}
	*ret = mask;
	return 0;
}

const char *policy_taint_to_string(uint64_t taint, char buf[static 32]) {
	size_t n = 0;

	for (size_t i = 0; i < sizeof(policy_taint_letters) - 1; i++)
		if (taint & (UINT64_C(1) << i))
			buf[n++] = policy_taint_letters[i];
	if (taint >> (sizeof(policy_taint_letters) - 1))
		buf[n++] = '?'; /* bits this version does not name */
	buf[n] = '\0';
	return buf;
}

const char *policy_window_format(const PolicyWindow *w, char buf[static 64]) {
	static const char *const days[] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };
	size_t n = 0;

	buf[0] = '\0';
	if (!w->set)
		return buf;
	for (int d = 1; d <= 7; d++) /* Monday first, as people write it */
		if (w->days & (1u << (d % 7)))
			n += (size_t)snprintf(buf + n, 64 - n, "%s%s", n ? "," : "", days[d % 7]);
	snprintf(buf + n, 64 - n, " %02u:%02u-%02u:%02u", w->start / 60, w->start % 60, w->end / 60,
	         w->end % 60);
	return buf;
}
