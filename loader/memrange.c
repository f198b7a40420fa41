/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The memory maps the loader reads: the firmware's (/sys/firmware/memmap) and
 * the persistent-memory ranges of the running kernel (/proc/iomem), and the
 * overlay that keeps the latter out of the RAM the next kernel gets.
 */

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootparam.h"
#include "fileio.h"
#include "macros.h"
#include "memrange.h"
#include "path-util.h"
#include "string-util.h"
#include "sysfs-util.h"

uint32_t memrange_type_from_name(const char *s) {
	static const struct {
		const char *name;
		uint32_t type;
	} table[] = {
		{ "System RAM", E820_TYPE_RAM },
		{ "Reserved", E820_TYPE_RESERVED },
		{ "reserved", E820_TYPE_RESERVED },
		{ "ACPI Tables", E820_TYPE_ACPI },
		{ "ACPI Non-volatile Storage", E820_TYPE_NVS },
		{ "Unusable memory", E820_TYPE_UNUSABLE },
		{ IOMEM_PMEM, E820_TYPE_PMEM },
		{ IOMEM_PMEM_LEGACY, E820_TYPE_PRAM },
		{ "Soft Reserved", E820_TYPE_SOFT_RESERV },
	};

	for (size_t i = 0; i < ELEMENTSOF(table); i++)
		if (streq(s, table[i].name))
			return table[i].type;
	return E820_TYPE_RESERVED; /* unknown: never place anything there */
}

static int cmp_range(const void *a, const void *b) {
	const struct mem_range *x = a, *y = b;
	return (x->start > y->start) - (x->start < y->start);
}

/* One entry N/ of the map into r. */
static int read_memmap_entry(const char *dir, const char *name, struct mem_range *r) {
	_cleanup_free_ char *s = NULL, *e = NULL, *t = NULL;
	int k;

	if ((k = sysfs_read_field(dir, name, "start", &s)) < 0 ||
	    (k = sysfs_read_field(dir, name, "end", &e)) < 0 ||
	    (k = sysfs_read_field(dir, name, "type", &t)) < 0)
		return k;
	if (sysfs_parse_hex(s, &r->start) < 0 || sysfs_parse_hex(e, &r->end) < 0 ||
	    r->end < r->start)
		return -EBADMSG;
	r->type = memrange_type_from_name(t);
	return 0;
}

int memrange_read_memmap(const char *root, const char *dir_override, struct mem_range **ret,
                         size_t *ret_n) {
	_cleanup_free_ char *dir = NULL;
	_cleanup_free_ struct mem_range *ranges = NULL;
	size_t n = 0;
	DIR *d;
	struct dirent *de;
	int r = 0;

	if (dir_override)
		dir = strdup(dir_override);
	else {
		r = path_prefix_root(root, "/sys/firmware/memmap", &dir);
		if (r < 0)
			return r;
	}
	if (!dir)
		return -ENOMEM;
	d = opendir(dir);
	if (!d)
		return -errno;
	ranges = calloc(MEMRANGE_MAX_RANGES, sizeof(*ranges));
	if (!ranges) {
		closedir(d);
		return -ENOMEM;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (n >= MEMRANGE_MAX_RANGES) {
			r = -E2BIG;
			break;
		}
		r = read_memmap_entry(dir, de->d_name, &ranges[n]);
		if (r < 0)
			break;
		n++;
	}
	closedir(d);
	if (r < 0)
		return r;
	if (n == 0)
		return -EBADMSG;
	qsort(ranges, n, sizeof(*ranges), cmp_range);
	*ret = TAKE_PTR(ranges);
	*ret_n = n;
	return 0;
}

/* "a-b : name" with a and b hex, at the start of line (top level only). */
static bool parse_iomem_line(const char *line, size_t len, uint64_t *ret_a, uint64_t *ret_b,
                             const char **ret_name, size_t *ret_name_len) {
	const char *p = line, *end = line + len;
	uint64_t v[2] = {};

	for (int k = 0; k < 2; k++) {
		const char *digits = p;

		while (p < end && ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) {
			if (v[k] >> 60)
				return false; /* more than 64 bits */
			v[k] = v[k] << 4 | (uint64_t)(*p <= '9' ? *p - '0' : *p - 'a' + 10);
			p++;
		}
		if (p == digits)
			return false;
		if (k == 0) {
			if (p >= end || *p != '-')
				return false;
			p++;
		}
	}
	if (end - p < 3 || memcmp(p, " : ", 3) != 0)
		return false;
	*ret_a = v[0];
	*ret_b = v[1];
	*ret_name = p + 3;
	*ret_name_len = end - (p + 3);
	return true;
}

static bool name_is(const char *name, size_t len, const char *want) {
	return len == strlen(want) && memcmp(name, want, len) == 0;
}

int memrange_parse_iomem_pmem(const char *data, size_t size, struct mem_range *ret, size_t max,
                              size_t *ret_n) {
	size_t n = 0;
	bool hidden = false;

	for (size_t pos = 0; pos < size;) {
		const char *line = data + pos, *nl = memchr(line, '\n', size - pos), *name;
		size_t len = nl ? (size_t)(nl - line) : size - pos, name_len;
		uint64_t a, b;
		uint32_t type;

		pos += len + 1;
		if (!parse_iomem_line(line, len, &a, &b, &name, &name_len))
			continue;
		if (name_is(name, name_len, IOMEM_PMEM_LEGACY))
			type = E820_TYPE_PRAM;
		else if (name_is(name, name_len, IOMEM_PMEM))
			type = E820_TYPE_PMEM;
		else
			continue;
		if (a == 0 && b == 0) {
			hidden = true;
			continue;
		}
		if (b < a)
			return -EBADMSG;
		if (n >= max)
			return -E2BIG;
		ret[n++] = (struct mem_range){ .start = a, .end = b, .type = type };
	}
	if (n == 0 && hidden)
		return -EPERM;
	qsort(ret, n, sizeof(*ret), cmp_range);
	*ret_n = n;
	return 0;
}

/* Is name one of the persistent-memory names (memrange_parse_iomem_pmem())? */
static bool name_is_pmem(const char *name, size_t len) {
	return name_is(name, len, IOMEM_PMEM_LEGACY) || name_is(name, len, IOMEM_PMEM);
}

int memrange_parse_iomem_kept(const char *data, size_t size, const struct mem_range *map, size_t n,
                              struct mem_range *ret, size_t max, size_t *ret_n) {
	size_t k = 0;

	for (size_t pos = 0; pos < size;) {
		const char *line = data + pos, *nl = memchr(line, '\n', size - pos), *name;
		size_t len = nl ? (size_t)(nl - line) : size - pos, name_len;
		uint64_t a, b;

		pos += len + 1;
		if (!parse_iomem_line(line, len, &a, &b, &name, &name_len))
			continue;
		if (name_is(name, name_len, IOMEM_SYSTEM_RAM) || name_is_pmem(name, name_len) ||
		    (a == 0 && b == 0) || b < a)
			continue;
		for (size_t i = 0; i < n; i++) {
			if (map[i].type != E820_TYPE_RAM || !memrange_overlaps(&map[i], a, b))
				continue;
			if (k >= max)
				return -E2BIG;
			ret[k++] = (struct mem_range){ .start = a > map[i].start ? a : map[i].start,
				                       .end = b < map[i].end ? b : map[i].end,
				                       .type = E820_TYPE_RESERVED };
		}
	}
	qsort(ret, k, sizeof(*ret), cmp_range);
	*ret_n = k;
	return 0;
}

/* root/proc/iomem into *ret_data; none (NULL, 0) when the file is missing. */
static int read_iomem(const char *root, char **ret_data, size_t *ret_size) {
	_cleanup_free_ char *p = NULL;
	int r;

	r = path_prefix_root(root, "/proc/iomem", &p);
	if (r < 0)
		return r;
	r = read_file_full(p, IOMEM_MAX_SIZE, ret_data, ret_size);
	if (r == -ENOENT) {
		*ret_data = NULL;
		*ret_size = 0;
		return 0;
	}
	return r;
}

int memrange_read_iomem_pmem(const char *root, struct mem_range *ret, size_t max, size_t *ret_n) {
	_cleanup_free_ char *data = NULL;
	size_t size;
	int r;

	r = read_iomem(root, &data, &size);
	if (r < 0)
		return r;
	return memrange_parse_iomem_pmem(data, size, ret, max, ret_n);
}

int memrange_read_iomem_kept(const char *root, const struct mem_range *map, size_t n,
                             struct mem_range *ret, size_t max, size_t *ret_n) {
	_cleanup_free_ char *data = NULL;
	size_t size;
	int r;

	r = read_iomem(root, &data, &size);
	if (r < 0)
		return r;
	return memrange_parse_iomem_kept(data, size, map, n, ret, max, ret_n);
}

size_t memrange_merge(struct mem_range *r, size_t n, size_t m) {
	size_t k = n;

	for (size_t i = n; i < n + m; i++) {
		bool seen = false;

		for (size_t j = 0; j < n && !seen; j++)
			seen = r[j].start == r[i].start && r[j].end == r[i].end;
		if (!seen)
			r[k++] = r[i]; /* k <= i: never over one not read yet */
	}
	qsort(r, k, sizeof(*r), cmp_range);
	return k;
}

static int saved_pmem_path(const char *dir, char **ret) {
	return asprintf(ret, "%s%s", dir, MEMRANGE_PMEM_SUFFIX) < 0 ? -ENOMEM : 0;
}

int memrange_write_saved_pmem(const char *root, const char *dir) {
	struct mem_range r[MEMRANGE_MAX_PMEM];
	_cleanup_free_ char *path = NULL, *text = NULL;
	size_t n = 0, len = 0;
	int k;

	k = memrange_read_iomem_pmem(root, r, ELEMENTSOF(r), &n);
	if (k < 0)
		return k;
	if (saved_pmem_path(dir, &path) < 0)
		return -ENOMEM;
	if (n == 0)
		return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
	text = calloc(n, 96);
	if (!text)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(
		        text + len, 96, "%" PRIx64 "-%" PRIx64 " : %s\n", r[i].start, r[i].end,
		        r[i].type == E820_TYPE_PRAM ? IOMEM_PMEM_LEGACY : IOMEM_PMEM);
	return write_file_atomic(path, text, len, 0644);
}

int memrange_read_saved_pmem(const char *dir, struct mem_range *ret, size_t max, size_t *ret_n) {
	_cleanup_free_ char *path = NULL, *data = NULL;
	size_t size;
	int r;

	if (saved_pmem_path(dir, &path) < 0)
		return -ENOMEM;
	r = read_file_full(path, IOMEM_MAX_SIZE, &data, &size);
	if (r == -ENOENT) {
		*ret_n = 0;
		return 0;
	}
	if (r < 0)
		return r;
	return memrange_parse_iomem_pmem(data, size, ret, max, ret_n);
}

/* Appends [start, end] of type to out, if it is not empty. */
static int push(struct mem_range *out, size_t max, size_t *n, uint64_t start, uint64_t end,
                uint32_t type) {
	if (end < start)
		return 0;
	if (*n >= max)
		return -E2BIG;
	out[(*n)++] = (struct mem_range){ start, end, type };
	return 0;
}

int memrange_keep_out(const struct mem_range *map, size_t n, const struct mem_range *keep,
                      size_t nk, struct mem_range *out, size_t max, size_t *ret_n) {
	size_t k = 0;
	int r;

	for (size_t i = 0; i < n; i++) {
		uint64_t cur = map[i].start;
		bool done = false;

		if (map[i].type != E820_TYPE_RAM) {
			r = push(out, max, &k, map[i].start, map[i].end, map[i].type);
			if (r < 0)
				return r;
			continue;
		}
		/* keep[] is sorted: walk it across this RAM range. */
		for (size_t j = 0; j < nk && !done; j++) {
			uint64_t s = MAX(keep[j].start, cur), e = MIN(keep[j].end, map[i].end);

			if (e < s)
				continue;
			if (s > cur && (r = push(out, max, &k, cur, s - 1, E820_TYPE_RAM)) < 0)
				return r;
			if ((r = push(out, max, &k, s, e, keep[j].type)) < 0)
				return r;
			done = e == map[i].end;
			cur = e + 1;
		}
		if (!done && (r = push(out, max, &k, cur, map[i].end, E820_TYPE_RAM)) < 0)
			return r;
	}
	qsort(out, k, sizeof(*out), cmp_range);
	*ret_n = k;
	return 0;
}

int memrange_keep_out_map(struct mem_range **map, size_t *n, const struct mem_range *keep,
                          size_t nk) {
	_cleanup_free_ struct mem_range *out = NULL;
	size_t nout = 0;
	int r;

	if (nk == 0)
		return 0;
	out = calloc(MEMRANGE_MAX_RANGES, sizeof(*out));
	if (!out)
		return -ENOMEM;
	r = memrange_keep_out(*map, *n, keep, nk, out, MEMRANGE_MAX_RANGES, &nout);
	if (r < 0)
		return r;
	free(*map);
	*map = TAKE_PTR(out);
	*n = nout;
	return 0;
}
