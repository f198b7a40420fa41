/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The texts kept-memory facts come from: memmap= on a command line, the mount
 * table, libvirt's qemu.conf. Pure functions over untrusted text (fuzzed).
 */

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "path-util.h"
#include "pmem.h"
#include "string-util.h"

#define WORD_MAX 512

/* ---- memmap= ---- */

/* The kernel's memparse(): a number (0x hex, 0 octal, decimal) with an
 * optional K/M/G/T/P/E suffix. */
static bool parse_size(const char *s, const char **ret_end, uint64_t *ret) {
	static const char suffixes[] = "kmgtpe";
	unsigned long long v;
	char *end;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno != 0)
		return false;
	if (*end) {
		const char *p = strchr(suffixes, *end | 0x20);

		if (p && *end != '\0') {
			unsigned shift = 10 * (unsigned)(p - suffixes + 1);

			if (v > (UINT64_MAX >> shift))
				return false;
			v <<= shift;
			end++;
		}
	}
	*ret_end = end;
	*ret = v;
	return true;
}

/* One "SIZE!START" entry (from s to end) into r. */
static bool parse_memmap_entry(const char *s, const char *end, struct mem_range *r) {
	char buf[WORD_MAX];
	const char *p;
	uint64_t size, start;

	if ((size_t)(end - s) >= sizeof(buf))
		return false;
	memcpy(buf, s, end - s);
	buf[end - s] = 0;
	if (!parse_size(buf, &p, &size) || *p != '!' || size == 0)
		return false;
	if (!parse_size(p + 1, &p, &start) || *p != 0 || start > UINT64_MAX - (size - 1))
		return false;
	*r = (struct mem_range){ .start = start, .end = start + size - 1, .type = E820_TYPE_PRAM };
	return true;
}

/* Calls back for each memmap= word of cmdline: word, its length, and whether
 * every entry is SIZE!START (with those entries appended to ranges). */
static int memmap_words(const char *cmdline, struct mem_range *ranges, size_t max, size_t *n,
                        int (*cb)(const char *word, size_t len, bool all_pmem, void *userdata),
                        void *userdata) {
	for (const char *w = cmdline; w && *w;) {
		size_t len;

		w += strspn(w, " \t\n");
		len = strcspn(w, " \t\n");
		if (len > 7 && strncmp(w, "memmap=", 7) == 0) {
			bool all = true;

			for (const char *e = w + 7, *stop = w + len; e < stop;) {
				const char *c = memchr(e, ',', stop - e) ?: stop;
				struct mem_range r;

				if (parse_memmap_entry(e, c, &r)) {
					if (*n >= max)
						return -E2BIG;
					ranges[(*n)++] = r;
				} else
					all = false;
				e = c + 1;
			}
			if (cb) {
				int k = cb(w, len, all, userdata);
				if (k < 0)
					return k;
			}
		}
		w += len;
	}
	return 0;
}

int pmem_memmap_parse(const char *cmdline, struct mem_range *ret, size_t max, size_t *ret_n) {
	size_t n = 0;
	int r;

	r = memmap_words(cmdline, ret, max, &n, NULL, NULL);
	if (r < 0)
		return r;
	*ret_n = n;
	return 0;
}

typedef struct CarryState {
	const struct mem_range *staged;
	size_t n_staged;
	char *added;
} CarryState;

static bool range_listed(const struct mem_range *l, size_t n, const struct mem_range *r) {
	for (size_t i = 0; i < n; i++)
		if (l[i].start == r->start && l[i].end == r->end)
			return true;
	return false;
}

static int carry_word(const char *word, size_t len, bool all_pmem, void *userdata) {
	CarryState *s = userdata;
	struct mem_range mine[PMEM_MAX_MEMMAP];
	size_t n = 0;
	char *w, *joined;
	bool missing = false;
	int r;

	if (!all_pmem)
		return 0;
	w = strndup(word, len);
	if (!w)
		return -ENOMEM;
	r = pmem_memmap_parse(w, mine, ELEMENTSOF(mine), &n);
	for (size_t i = 0; r >= 0 && i < n; i++)
		missing |= !range_listed(s->staged, s->n_staged, &mine[i]);
	if (r < 0 || !missing) {
		free(w);
		return r < 0 ? r : 0;
	}
	if (asprintf(&joined, "%s%s%s", s->added ?: "", s->added ? " " : "", w) < 0)
		joined = NULL;
	free(w);
	if (!joined)
		return -ENOMEM;
	free(s->added);
	s->added = joined;
	return 0;
}

int pmem_cmdline_carry(const char *running, const char *staged, char **ret_cmdline,
                       char **ret_added) {
	struct mem_range staged_ranges[PMEM_MAX_MEMMAP], running_ranges[PMEM_MAX_MEMMAP];
	CarryState s = {};
	size_t n = 0, nr = 0;
	char *out = NULL;
	int r;

	r = pmem_memmap_parse(staged ?: "", staged_ranges, ELEMENTSOF(staged_ranges), &n);
	if (r < 0)
		return r;
	s.staged = staged_ranges;
	s.n_staged = n;
	r = memmap_words(running ?: "", running_ranges, ELEMENTSOF(running_ranges), &nr, carry_word,
	                 &s);
	if (r < 0) {
		free(s.added);
		return r;
	}
	if (s.added) {
		const char *st = staged ?: "";

		if (asprintf(&out, "%s%s%s", st, *st ? " " : "", s.added) < 0) {
			free(s.added);
			return -ENOMEM;
		}
	}
	*ret_cmdline = out;
	*ret_added = s.added;
	return 0;
}

/* ---- mountinfo ---- */

void pmem_mount_done(PmemMount *m) {
	if (!m)
		return;
	free(m->mount_point);
	free(m->fstype);
	free(m->source);
	free(m->options);
	*m = (PmemMount){};
}

/* The kernel escapes space, tab, newline and backslash as \ooo. */
static char *unescape(const char *s) {
	char *out = malloc(strlen(s) + 1), *o = out;

	if (!out)
		return NULL;
	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 4;
		} else
			*o++ = *s++;
	}
	*o = 0;
	return out;
}

/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS" */
static int parse_mountinfo_line(char *line, PmemMount *ret) {
	char *f[6] = {}, *save = NULL, *tok, *fstype, *source, *super;
	unsigned major, minor;
	size_t k = 0;
	PmemMount m = {};

	for (tok = strtok_r(line, " ", &save); tok; tok = k < 6 ? strtok_r(NULL, " ", &save) : NULL)
		f[k++] = tok;
	if (k < 6 || sscanf(f[2], "%u:%u", &major, &minor) != 2)
		return -EBADMSG;
	while ((tok = strtok_r(NULL, " ", &save)) && !streq(tok, "-"))
		; /* optional fields */
	fstype = strtok_r(NULL, " ", &save);
	source = strtok_r(NULL, " ", &save);
	super = strtok_r(NULL, " ", &save);
	if (!tok || !fstype || !source || !super)
		return -EBADMSG;
	m.major = major;
	m.minor = minor;
	m.mount_point = unescape(f[4]);
	m.fstype = strdup(fstype);
	m.source = unescape(source);
	if (asprintf(&m.options, "%s,%s", f[5], super) < 0)
		m.options = NULL;
	if (!m.mount_point || !m.fstype || !m.source || !m.options) {
		pmem_mount_done(&m);
		return -ENOMEM;
	}
	*ret = m;
	return 0;
}

int pmem_mountinfo_find(const char *data, size_t size, const char *path, PmemMount *ret) {
	_cleanup_free_ char *copy = strndup(data, size);
	PmemMount best = {};
	size_t best_len = 0;
	bool any = false, found = false;
	char *line, *save = NULL;

	if (!copy)
		return -ENOMEM;
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		PmemMount m = {};
		size_t len;
		int r = parse_mountinfo_line(line, &m);

		if (r == -ENOMEM) {
			pmem_mount_done(&best);
			return r;
		}
		if (r < 0)
			continue;
		any = true;
		len = strlen(m.mount_point);
		if (path_startswith(path, m.mount_point) && (!found || len >= best_len)) {
			pmem_mount_done(&best);
			best = m;
			best_len = len;
			found = true;
		} else
			pmem_mount_done(&m);
	}
	if (!found)
		return any ? -ENOENT : -EBADMSG;
	*ret = best;
	return 0;
}

/* ---- qemu.conf ---- */

int pmem_qemu_conf_backing_dir(const char *data, size_t size, char **ret) {
	_cleanup_free_ char *copy = strndup(data, size);
	char *line, *save = NULL, *found = NULL;

	if (!copy)
		return -ENOMEM;
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		const char *key = "memory_backing_dir";
		char *p = line + strspn(line, " \t"), *q, quote;

		if (strncmp(p, key, strlen(key)) != 0)
			continue;
		p += strlen(key);
		p += strspn(p, " \t");
		if (*p != '=')
			continue;
		p++;
		p += strspn(p, " \t");
		quote = *p;
		if (quote != '"' && quote != '\'')
			continue;
		q = strchr(p + 1, quote);
		if (!q)
			continue;
		free(found);
		found = strndup(p + 1, q - (p + 1)); /* the last assignment wins */
		if (!found)
			return -ENOMEM;
	}
	*ret = found;
	return 0;
}
