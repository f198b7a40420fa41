/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Parses the kernel log of the new kernel into the boot analysis of the report.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootlog.h"
#include "macros.h"

typedef struct Line {
	uint64_t us;
	uint64_t seq;
	const char *msg;
	size_t len;
} Line;

/* "pri,seq,usec,flags[,...];message" -> true for kernel-facility records. */
static bool parse_kmsg_line(const char *l, size_t len, Line *ret, bool *ret_kernel) {
	unsigned long long pri, seq, us;
	const char *semi = memchr(l, ';', len);
	char head[128];
	int n = 0;

	if (!semi || (size_t)(semi - l) >= sizeof(head))
		return false;
	memcpy(head, l, (size_t)(semi - l));
	head[semi - l] = 0;
	if (sscanf(head, "%llu,%llu,%llu,%n", &pri, &seq, &us, &n) != 3 || n == 0)
		return false;
	*ret = (Line){ .us = us, .seq = seq, .msg = semi + 1, .len = len - (size_t)(semi + 1 - l) };
	*ret_kernel = (pri >> 3) == 0; /* facility 0: the kernel itself */
	return true;
}

/* "[    1.234567] message" */
static bool parse_dmesg_line(const char *l, size_t len, Line *ret) {
	unsigned long long sec, usec;
	char head[64];
	const char *close;
	int n = 0;

	if (len < 4 || l[0] != '[')
		return false;
	close = memchr(l, ']', MIN(len, sizeof(head) - 1));
	if (!close)
		return false;
	memcpy(head, l, (size_t)(close - l + 1));
	head[close - l + 1] = 0;
	if (sscanf(head, "[ %llu.%6llu]%n", &sec, &usec, &n) != 2 || n == 0)
		return false;
	if (sec > UINT64_MAX / 1000000)
		return false;
	*ret = (Line){ .us = sec * 1000000 + usec,
		       .msg = close + 1,
		       .len = len - (size_t)(close + 1 - l) };
	if (ret->len > 0 && ret->msg[0] == ' ') {
		ret->msg++;
		ret->len--;
	}
	return true;
}

static bool has(const Line *l, const char *needle) {
	size_t n = strlen(needle);

	for (size_t i = 0; i + n <= l->len; i++)
		if (memcmp(l->msg + i, needle, n) == 0)
			return true;
	return false;
}

static char *msg_dup(const Line *l) {
	return strndup(l->msg, MIN(l->len, (size_t)BOOTLOG_MESSAGE_MAX));
}

/* Inserts a gap into the top list (largest first), if it is large enough. */
static int gap_offer(Bootlog *b, const Line *prev, const Line *cur) {
	uint64_t d = cur->us - prev->us;
	size_t pos = b->n_gaps;
	BootlogGap g;

	while (pos > 0 && b->gaps[pos - 1].end_us - b->gaps[pos - 1].start_us < d)
		pos--;
	if (pos >= BOOTLOG_TOP_GAPS)
		return 0;
	g = (BootlogGap){ .start_us = prev->us, .end_us = cur->us, .seq = cur->seq };
	g.message = msg_dup(cur);
	g.previous = msg_dup(prev);
	if (!g.message || !g.previous) {
		free(g.message);
		free(g.previous);
		return -ENOMEM;
	}
	if (b->n_gaps == BOOTLOG_TOP_GAPS) {
		free(b->gaps[BOOTLOG_TOP_GAPS - 1].message);
		free(b->gaps[BOOTLOG_TOP_GAPS - 1].previous);
		b->n_gaps--;
	}
	memmove(b->gaps + pos + 1, b->gaps + pos, (b->n_gaps - pos) * sizeof(BootlogGap));
	b->gaps[pos] = g;
	b->n_gaps++;
	return 0;
}

void bootlog_done(Bootlog *b) {
	if (!b)
		return;
	for (size_t i = 0; i < b->n_gaps; i++) {
		free(b->gaps[i].message);
		free(b->gaps[i].previous);
	}
	b->n_gaps = 0;
}

int bootlog_parse(const char *text, size_t size, Bootlog *ret) {
	_cleanup_free_ Line *lines = NULL;
	size_t n = 0, alloc = 0, index = 0, cut, run_init = SIZE_MAX, free_initmem = SIZE_MAX;
	const char *p = text, *end = text + size;
	bool kmsg_seen = false;
	Bootlog b = {};
	int r;

	if ((!text && size > 0) || !ret)
		return -EINVAL;

	/* 1. The kernel's records, and where it handed over to init. */
	while (p && p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		size_t len = eol ? (size_t)(eol - p) : (size_t)(end - p);
		bool kernel = true;
		Line l;

		if (len == 0 || p[0] == ' ') /* blank, or a kmsg dictionary continuation */
			goto next;
		if (parse_kmsg_line(p, len, &l, &kernel))
			kmsg_seen = true;
		else if (parse_dmesg_line(p, len, &l))
			l.seq = index;
		else {
			b.n_skipped++;
			goto next;
		}
		index++;
		if (!kernel) {
			b.n_skipped++;
			goto next;
		}
		if (n == alloc) {
			size_t na = MAX(alloc * 2, (size_t)256);
			Line *t = reallocarray(lines, na, sizeof(Line));
			if (!t)
				return -ENOMEM;
			lines = t;
			alloc = na;
		}
		/* "Run /sbin/init as init process" (or /init from an initramfs) is printed
		 * right before the exec of init: the last kernel-only moment. Older
		 * kernels print it at debug level only; then the last "Freeing unused
		 * kernel image" line (free_initmem, just before) stands in. */
		if (run_init == SIZE_MAX && has(&l, "Run ") && has(&l, " as init process"))
			run_init = n;
		if (run_init == SIZE_MAX && has(&l, "Freeing unused kernel image"))
			free_initmem = n;
		lines[n++] = l;
next:
		p = eol ? eol + 1 : NULL;
	}

	if (n > 0) {
		b.first_seq = kmsg_seen ? lines[0].seq : 0;
		b.first_us = lines[0].us;
	}
	b.n_messages = n;
	for (size_t i = 0; i < n; i++)
		b.last_us = MAX(b.last_us, lines[i].us);
	if (run_init != SIZE_MAX) {
		b.has_init = true;
		b.init_us = lines[run_init].us;
		b.init_marker = "run-init";
	} else if (free_initmem != SIZE_MAX) {
		b.has_init = true;
		b.init_us = lines[free_initmem].us;
		b.init_marker = "free-initmem";
	}

	/* 2. Gaps are the kernel's own stalls: up to the hand-over to init. */
	cut = run_init != SIZE_MAX       ? run_init
	      : free_initmem != SIZE_MAX ? free_initmem
	                                 : n - (n > 0);
	b.gaps_until_init = b.has_init;
	for (size_t i = 1; n > 0 && i <= cut; i++) {
		if (lines[i].us <= lines[i - 1].us)
			continue;
		r = gap_offer(&b, &lines[i - 1], &lines[i]);
		if (r < 0) {
			bootlog_done(&b);
			return r;
		}
	}
	*ret = b;
	return 0;
}

static int add(struct json_object *o, const char *k, struct json_object *v) {
	if (!v || json_object_object_add(o, k, v) < 0) {
		json_object_put(v);
		return -ENOMEM;
	}
	return 0;
}

int bootlog_to_json(const Bootlog *b, struct json_object **ret) {
	struct json_object *o, *gaps;
	int k = 0;

	if (!b || !ret)
		return -EINVAL;
	o = json_object_new_object();
	if (!o)
		return -ENOMEM;
	k |= add(o, "clock", json_object_new_string("kernel-local-clock"));
	k |= add(o, "messages", json_object_new_uint64(b->n_messages));
	k |= add(o, "first_seq", json_object_new_uint64(b->first_seq));
	k |= add(o, "truncated", json_object_new_boolean(b->first_seq > 0));
	if (b->has_init) {
		k |= add(o, "init_us", json_object_new_uint64(b->init_us));
		k |= add(o, "init_marker", json_object_new_string(b->init_marker));
	}
	k |= add(o, "gaps_scope",
	         json_object_new_string(b->gaps_until_init ? "until-init" : "all"));
	gaps = json_object_new_array();
	k |= add(o, "gaps", gaps);
	for (size_t i = 0; gaps && i < b->n_gaps; i++) {
		const BootlogGap *g = &b->gaps[i];
		struct json_object *j = json_object_new_object();

		if (!j) {
			k = -ENOMEM;
			break;
		}
		k |= add(j, "gap_us", json_object_new_uint64(g->end_us - g->start_us));
		k |= add(j, "start_us", json_object_new_uint64(g->start_us));
		k |= add(j, "end_us", json_object_new_uint64(g->end_us));
		k |= add(j, "seq", json_object_new_uint64(g->seq));
		k |= add(j, "message", json_object_new_string(g->message));
		k |= add(j, "previous", json_object_new_string(g->previous));
		if (json_object_array_add(gaps, j) < 0) {
			json_object_put(j);
			k = -ENOMEM;
		}
	}
	if (k != 0) {
		json_object_put(o);
		return -ENOMEM;
	}
	*ret = o;
	return 0;
}
