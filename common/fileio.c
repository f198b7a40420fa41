/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "macros.h"
#include "path-util.h"
#include "string-util.h"

int write_all(int fd, const void *buf, size_t size) {
	const char *p = buf;

	while (size > 0) {
		ssize_t n = write(fd, p, size);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		size -= (size_t)n;
	}
	return 0;
}

ssize_t read_at(int fd, void *buf, size_t size, int64_t offset) {
	for (;;) {
		ssize_t n = offset < 0 ? read(fd, buf, size) : pread(fd, buf, size, (off_t)offset);

		if (n >= 0)
			return n;
		if (errno != EINTR)
			return -errno;
	}
}

static int fsync_parent_dir(const char *path) {
	_cleanup_free_ char *dir = strdup(path);
	_cleanup_close_ int fd = -EBADF;
	char *slash;

	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (!slash)
		strcpy(dir, ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';

	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		return -errno;
	return 0;
}

int write_file_atomic(const char *path, const void *data, size_t size, mode_t mode) {
	_cleanup_free_ char *tmp = NULL;
	_cleanup_close_ int fd = -EBADF;
	int r;

	if (!path || (!data && size > 0))
		return -EINVAL;

	if (asprintf(&tmp, "%s.tmpXXXXXX", path) < 0) {
		tmp = NULL;
		return -ENOMEM;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;

	r = write_all(fd, data, size);
	if (r >= 0 && fchmod(fd, mode) < 0)
		r = -errno;
	if (r >= 0 && fsync(fd) < 0)
		r = -errno;
	if (r >= 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		(void)unlink(tmp);
		return r;
	}
	return fsync_parent_dir(path);
}

int read_file_full(const char *path, size_t max_size, char **ret_data, size_t *ret_size) {
	_cleanup_close_ int fd = -EBADF;
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, alloc = 0;

	if (!path || !ret_data)
		return -EINVAL;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;

	for (;;) {
		ssize_t n;

		if (alloc - len < 4096) {
			size_t na = alloc ? alloc * 2 : 8192;
			char *nb;

			if (na > max_size + 4096 + 1)
				na = max_size + 4096 + 1;
			if (na <= alloc)
				return -EFBIG;
			nb = realloc(buf, na);
			if (!nb)
				return -ENOMEM;
			buf = nb;
			alloc = na;
		}
		n = read_at(fd, buf + len, alloc - len - 1, -1);
		if (n < 0)
			return (int)n;
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > max_size)
			return -EFBIG;
	}

	buf[len] = '\0';
	*ret_data = TAKE_PTR(buf);
	if (ret_size)
		*ret_size = len;
	return 0;
}

int read_u64_file(const char *path, unsigned long long *ret) {
	_cleanup_free_ char *data = NULL;
	int r;

	r = read_file_full(path, 64, &data, NULL);
	if (r < 0)
		return r;
	return safe_atou64(strstrip(data), ret);
}

int mkdir_p(const char *path, mode_t mode) {
	_cleanup_free_ char *p = NULL;

	if (!path || !*path)
		return -EINVAL;
	p = strdup(path);
	if (!p)
		return -ENOMEM;

	/* Create each prefix in turn; EEXIST on a directory is fine. */
	for (char *s = p + 1;; s++) {
		bool end = *s == '\0';

		if (*s != '/' && !end)
			continue;
		*s = '\0';
		if (mkdir(p, mode) < 0 && errno != EEXIST)
			return -errno;
		if (end)
			break;
		*s = '/';
	}

	struct stat st;
	if (stat(path, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

int read_root_file(const char *root, const char *path, size_t max_size, char **ret_data,
                   size_t *ret_size) {
	_cleanup_free_ char *p = NULL;
	int r;

	r = path_prefix_root(root, path, &p);
	if (r < 0)
		return r;
	return read_file_full(p, max_size, ret_data, ret_size);
}
