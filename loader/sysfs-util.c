/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "macros.h"
#include "string-util.h"
#include "sysfs-util.h"

int sysfs_parse_hex(const char *s, uint64_t *ret) {
	char *end;
	unsigned long long v;

	if (!s || strncmp(s, "0x", 2) != 0 || !s[2] || !strchr("0123456789abcdefABCDEF", s[2]))
		return -EINVAL;
	errno = 0;
	v = strtoull(s + 2, &end, 16);
	if (errno != 0 || *end)
		return -EINVAL;
	*ret = v;
	return 0;
}

int sysfs_read_field(const char *dir, const char *name, const char *field, char **ret) {
	_cleanup_free_ char *p = NULL, *data = NULL;
	size_t size;
	int r;

	if (asprintf(&p, "%s/%s/%s", dir, name, field) < 0)
		return -ENOMEM;
	r = read_file_full(p, 4096, &data, &size);
	if (r < 0)
		return r;
	strstrip(data);
	*ret = TAKE_PTR(data);
	return 0;
}
