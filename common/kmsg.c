/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kmsg.h"
#include "macros.h"

int kmsg_read_all(const char *path, char **ret_text, size_t *ret_size) {
	_cleanup_close_ int fd = -EBADF;
	_cleanup_free_ char *text = NULL;
	size_t size = 0, alloc = 0;
	char rec[8192];

	if (!path || !ret_text)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		/* one record per read(); EPIPE: records were overwritten under us */
		ssize_t n = read(fd, rec, sizeof(rec) - 1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EPIPE)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0)
			return -errno;
		if (n == 0)
			break; /* a regular file (tests) */
		if (size + (size_t)n + 2 > alloc) {
			size_t na = MAX(alloc * 2, size + (size_t)n + 4096);
			char *t = realloc(text, na);
			if (!t)
				return -ENOMEM;
			text = t;
			alloc = na;
		}
		memcpy(text + size, rec, (size_t)n);
		size += (size_t)n;
		if (text[size - 1] != '\n')
			text[size++] = '\n';
	}
	if (!text) {
		text = strdup("");
		if (!text)
			return -ENOMEM;
	} else
		text[size] = 0;
	*ret_text = TAKE_PTR(text);
	if (ret_size)
		*ret_size = size;
	return 0;
}
