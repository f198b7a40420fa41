/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image.h"
#include "log.h"
#include "macros.h"
#include "path-util.h"
#include "string-util.h"
#include "upgrade-errors.h"

void image_file_done(ImageFile *f) {
	if (!f)
		return;
	free(f->path);
	free(f->version);
	if (f->fd >= 0)
		close(f->fd);
	*f = (ImageFile){ .fd = -EBADF };
}

bool image_version_is_valid(const char *v) {
	size_t n;

	if (!v)
		return false;
	n = strlen(v);
	if (n == 0 || n > IMAGE_VERSION_MAX)
		return false;
	for (const char *p = v; *p; p++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_+~",
		            *p))
			return false;
	return true;
}

static uint16_t get_le16(const uint8_t *p) {
	return (uint16_t)(p[0] | p[1] << 8);
}

int image_parse_bzimage(const uint8_t *buf, size_t size, uint64_t file_size, char **ret_version) {
	unsigned setup_sects;
	uint16_t protocol, kv;
	size_t off, n;
	char *v;

	if (size < BZIMAGE_SETUP_HEADER_END)
		return -EBADMSG;
	if (get_le16(buf + BZIMAGE_BOOT_FLAG_OFFSET) != BZIMAGE_BOOT_FLAG)
		return -EBADMSG;
	if (memcmp(buf + BZIMAGE_HEADER_MAGIC_OFFSET, BZIMAGE_HEADER_MAGIC, 4) != 0)
		return -EBADMSG;
	protocol = get_le16(buf + BZIMAGE_VERSION_OFFSET);
	if (protocol < BZIMAGE_MIN_PROTOCOL)
		return -EBADMSG;
	if (!(buf[BZIMAGE_XLOADFLAGS_OFFSET] & BZIMAGE_XLF_KERNEL_64))
		return -EBADMSG;

	/* The protected-mode kernel follows the real-mode setup sectors: a file that
	 * ends there is truncated. */
	setup_sects = buf[BZIMAGE_SETUP_SECTS_OFFSET] ?: BZIMAGE_DEFAULT_SETUP_SECTS;
	if (file_size <= (uint64_t)(setup_sects + 1) * BZIMAGE_SECTOR_SIZE)
		return -EBADMSG;

	kv = get_le16(buf + BZIMAGE_KERNEL_VERSION_OFFSET);
	if (kv == 0)
		return -ENODATA;
	off = (size_t)kv + BZIMAGE_KERNEL_VERSION_BASE;
	if (off >= size)
		return -ENODATA;
	n = strcspn((const char *)buf + off, " ");
	if (off + n >= size || n == 0 || n > IMAGE_VERSION_MAX)
		return -ENODATA;
	v = strndup((const char *)buf + off, n);
	if (!v)
		return -ENOMEM;
	if (!image_version_is_valid(v)) {
		free(v);
		return -ENODATA;
	}
	if (ret_version)
		*ret_version = v;
	else
		free(v);
	return 0;
}

int image_version_from_file_name(const char *path, char **ret_version) {
	const char *b = path_basename(path), *v;
	char *s;

	if (!b || strncmp(b, "vmlinuz-", 8) != 0)
		return -ENODATA;
	v = b + 8;
	if (!image_version_is_valid(v))
		return -ENODATA;
	s = strdup(v);
	if (!s)
		return -ENOMEM;
	*ret_version = s;
	return 0;
}

/* Opens path (absolute, normalized) below root, refusing a symbolic link in
 * any component: each directory is opened with O_NOFOLLOW relative to the one
 * before, so nothing can be swapped in between. -ELOOP for a symlink. */
static int open_no_symlinks(const char *root, const char *path) {
	_cleanup_close_ int dfd = -EBADF;
	_cleanup_free_ char *copy = strdup(path);
	char *comp, *next;
	int fd;

	if (!copy)
		return -ENOMEM;
	dfd = open(root ?: "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;

	for (comp = copy + 1;; comp = next) {
		struct stat st;

		next = strchr(comp, '/');
		if (!next)
			break;
		*next++ = '\0';
		fd = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			int r = -errno;

			/* A symlink to a directory shows up as ENOTDIR or ELOOP. */
			if (fstatat(dfd, comp, &st, AT_SYMLINK_NOFOLLOW) >= 0 &&
			    S_ISLNK(st.st_mode))
				return -ELOOP;
			return r;
		}
		close(dfd);
		dfd = fd;
	}
	fd = openat(dfd, comp, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
	return fd >= 0 ? fd : -errno;
}

int image_open(const ImageRules *rules, const char *path, ImageKind kind, ImageFile *ret,
               sd_bus_error *error) {
	_cleanup_(image_file_done) ImageFile f = { .fd = -EBADF };
	const char *what = kind == IMAGE_KERNEL ? "Kernel" : "Initrd";
	uint8_t head[4096];
	struct stat st;
	ssize_t n;
	int r;

	/* 1. Path rules: absolute, normalized, below an allowed directory. */
	if (!path || !*path)
		return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_PATH, "%s path is empty.",
		                         what);
	if (string_has_cc(path) || strlen(path) >= PATH_MAX)
		return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_PATH,
		                         "%s path contains control characters or is too long.",
		                         what);
	if (!path_is_absolute(path))
		return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_PATH,
		                         "%s path '%s' is not absolute.", what, path);
	if (!path_is_normalized(path))
		return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_PATH,
		                         "%s path '%s' is not normalized (no '.', '..', '//').",
		                         what, path);
	if (!path_is_below_any(path, rules->allowed))
		return sd_bus_error_setf(error, UPGRADE_ERROR_NOT_ALLOWED_PATH,
		                         "%s path '%s' is outside the allowed directories.", what,
		                         path);

	/* 2. Open without following any symlink, then judge what was opened. */
	f.fd = open_no_symlinks(rules->root, path);
	if (f.fd == -ELOOP)
		return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_PATH,
		                         "%s path '%s' contains a symbolic link.", what, path);
	if (f.fd == -ENOENT || f.fd == -ENOTDIR)
		return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_PATH,
		                         "%s '%s' does not exist.", what, path);
	if (f.fd < 0)
		return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_PATH,
		                         "Cannot open %s '%s': %s.", what, path, strerror(-f.fd));
	if (fstat(f.fd, &st) < 0)
		return sd_bus_error_set_errno(error, errno);
	if (!S_ISREG(st.st_mode))
		return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_PATH,
		                         "%s '%s' is not a regular file.", what, path);

	/* 3. Nobody but the owner may have been able to change it. */
	if (st.st_uid != rules->owner)
		return sd_bus_error_setf(error, UPGRADE_ERROR_UNSAFE_FILE,
		                         "%s '%s' is owned by uid %u, not %u.", what, path,
		                         (unsigned)st.st_uid, (unsigned)rules->owner);
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return sd_bus_error_setf(error, UPGRADE_ERROR_UNSAFE_FILE,
		                         "%s '%s' is writable by group or others (mode %04o).",
		                         what, path, (unsigned)(st.st_mode & 07777));
	if (st.st_size == 0)
		return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_IMAGE, "%s '%s' is empty.",
		                         what, path);

	/* 4. A kernel must be a 64-bit bzImage; its version comes from the header's
	 * kernel_version string, else from the file name "vmlinuz-<version>". */
	if (kind == IMAGE_KERNEL) {
		do
			n = pread(f.fd, head, sizeof(head), 0);
		while (n < 0 && errno == EINTR);
		if (n < 0)
			return sd_bus_error_set_errno(error, errno);
		r = image_parse_bzimage(head, (size_t)n, (uint64_t)st.st_size, &f.version);
		if (r == -EBADMSG)
			return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_IMAGE,
			                         "Kernel '%s' is not a 64-bit x86 bzImage "
			                         "(setup header missing, too old or truncated).",
			                         path);
		if (r >= 0)
			f.version_source = "bzimage-header";
		else if (r == -ENODATA) {
			r = image_version_from_file_name(path, &f.version);
			if (r < 0)
				return sd_bus_error_setf(
				        error, UPGRADE_ERROR_INVALID_IMAGE,
				        "Cannot tell the version of kernel '%s': no version string "
				        "in the header and the name is not vmlinuz-<version>.",
				        path);
			f.version_source = "file-name";
		} else
			return sd_bus_error_set_errno(error, r);
	}

	/* 5. Record what was validated. */
	r = digest_file(f.fd, f.sha256, &f.size);
	if (r < 0)
		return sd_bus_error_set_errno(error, r);
	f.mtime_usec = (uint64_t)st.st_mtim.tv_sec * 1000000 + (uint64_t)st.st_mtim.tv_nsec / 1000;
	f.path = strdup(path);
	if (!f.path)
		return sd_bus_error_set_errno(error, ENOMEM);

	*ret = f;
	f = (ImageFile){ .fd = -EBADF };
	return 0;
}
