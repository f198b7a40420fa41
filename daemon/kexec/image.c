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
#include "upgrade-bus.h"

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

static uint64_t timespec_usec(const struct timespec *ts) {
	return (uint64_t)ts->tv_sec * 1000000 + (uint64_t)ts->tv_nsec / 1000;
}

/* Step 1 of image_open(): the path rules, absolute, normalized, below an allowed directory;
 * what is "Kernel" or "Initrd" for the messages. */
static int check_path(const ImageRules *rules, const char *path, const char *what,
                      sd_bus_error *error) {
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
	return 0;
}

/* Step 4 of image_open() for a kernel: f->version and f->version_source from the open
 * kernel fd at path. */
static int kernel_version(int fd, const char *path, ImageFile *f, sd_bus_error *error) {
	struct bzimage_info info;
	BzImageError e = BZIMAGE_OK;
	int r;

	r = bzimage_parse_fd(fd, &info, &e);
	if (r >= 0 && image_version_is_valid(info.release)) {
		f->version = strdup(info.release);
		if (!f->version)
			return sd_bus_error_set_errno(error, ENOMEM);
		f->version_source = "bzimage-header";
	} else if (r >= 0 || e == BZIMAGE_ERR_BAD_VERSION_STRING) {
		r = image_version_from_file_name(path, &f->version);
		if (r < 0)
			return sd_bus_error_setf(
			        error, UPGRADE_ERROR_INVALID_IMAGE,
			        "Cannot tell the version of kernel '%s': no usable version "
			        "string in the header and the name is not "
			        "vmlinuz-<version>.",
			        path);
		f->version_source = "file-name";
	} else if (e != BZIMAGE_OK)
		return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_IMAGE,
		                         "Kernel '%s' is not a usable 64-bit x86 bzImage: %s.",
		                         path, bzimage_error_to_string(e));
	else
		return sd_bus_error_set_errno(error, -r);
	return 0;
}

static const char *image_kind_name(ImageKind kind) {
	return kind == IMAGE_KERNEL ? "Kernel" : "Initrd";
}

int image_open_unhashed(const ImageRules *rules, const char *path, ImageKind kind, ImageFile *ret,
                        sd_bus_error *error) {
	_cleanup_(image_file_done) ImageFile f = { .fd = -EBADF };
	const char *what = image_kind_name(kind);
	uint64_t max = kind == IMAGE_KERNEL ? IMAGE_KERNEL_SIZE_MAX : IMAGE_INITRD_SIZE_MAX;
	struct stat st;
	int r;

	/* 1. Path rules: absolute, normalized, below an allowed directory. */
	r = check_path(rules, path, what, error);
	if (r < 0)
		return r;

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
	/* Its size as the file system states it (a sparse file's too): nothing read yet. */
	if ((uint64_t)st.st_size > max)
		return sd_bus_error_setf(error, UPGRADE_ERROR_IMAGE_TOO_LARGE,
		                         "%s '%s' has %llu bytes; the limit is %llu MiB.", what,
		                         path, (unsigned long long)st.st_size,
		                         (unsigned long long)(max >> 20));

	/* 4. A kernel must be a bzImage the loader accepts (64-bit, relocatable, sane
	 * sizes); its version comes from the header's kernel_version string, else
	 * (a header without one) from the file name "vmlinuz-<version>". */
	if (kind == IMAGE_KERNEL) {
		r = kernel_version(f.fd, path, &f, error);
		if (r < 0)
			return r;
	}

	/* 5. Record what was validated (the digest comes with image_hash()). */
	f.size = (uint64_t)st.st_size;
	f.mtime_usec = timespec_usec(&st.st_mtim);
	f.ctime_usec = timespec_usec(&st.st_ctim);
	f.inode = (uint64_t)st.st_ino;
	f.path = strdup(path);
	if (!f.path)
		return sd_bus_error_set_errno(error, ENOMEM);

	*ret = f;
	f = (ImageFile){ .fd = -EBADF };
	return 0;
}

int image_hash(ImageFile *f, ImageKind kind, const atomic_bool *cancel, sd_bus_error *error) {
	uint64_t max = kind == IMAGE_KERNEL ? IMAGE_KERNEL_SIZE_MAX : IMAGE_INITRD_SIZE_MAX;
	int r;

	r = digest_file_bounded(f->fd, max, cancel, f->sha256, &f->size);
	if (r == -ECANCELED)
		return r;
	if (r == -EFBIG)
		return sd_bus_error_setf(error, UPGRADE_ERROR_IMAGE_TOO_LARGE,
		                         "%s '%s' grew past %llu MiB while it was read.",
		                         image_kind_name(kind), f->path,
		                         (unsigned long long)(max >> 20));
	if (r < 0)
		return sd_bus_error_set_errno(error, r);
	return 0;
}

int image_open(const ImageRules *rules, const char *path, ImageKind kind, ImageFile *ret,
               sd_bus_error *error) {
	_cleanup_(image_file_done) ImageFile f = { .fd = -EBADF };
	int r;

	r = image_open_unhashed(rules, path, kind, &f, error);
	if (r < 0)
		return r;
	r = image_hash(&f, kind, NULL, error);
	if (r < 0)
		return r;
	*ret = f;
	f = (ImageFile){ .fd = -EBADF };
	return 0;
}

bool image_unchanged(const char *root, const UpdateFile *f) {
	_cleanup_close_ int fd = -EBADF;
	struct stat st;

	if (!f->path)
		return true;
	fd = open_no_symlinks(root, f->path);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return false;
	return (uint64_t)st.st_size == f->size && timespec_usec(&st.st_mtim) == f->mtime_usec &&
	       (f->inode == 0 || (uint64_t)st.st_ino == f->inode) &&
	       (f->ctime_usec == 0 || timespec_usec(&st.st_ctim) == f->ctime_usec);
}
