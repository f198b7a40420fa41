/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * keep-ram's file operations on checked descriptors (keep-ram-fs.h, docs/vms.md "Threat
 * model"). Nothing here resolves a path below a directory that someone else can write other
 * than with O_NOFOLLOW relative to a descriptor, and every file is checked with fstat on the
 * descriptor that is then used.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "keep-ram-fs.h"
#include "keep-ram-xml.h"
#include "macros.h"
#include "string-util.h"

#define OPEN_DIR_FLAGS  (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
#define OPEN_FILE_FLAGS (O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
#define LINK_TMP_NAME   KEEP_RAM_RAM_FILE ".upgraded-link"

static int reason(char **ret_reason, int error, const char *fmt, ...) _printf_(3, 4);
static int reason(char **ret_reason, int error, const char *fmt, ...) {
	va_list ap;

	if (!ret_reason)
		return error;
	va_start(ap, fmt);
	if (vasprintf(ret_reason, fmt, ap) < 0)
		*ret_reason = NULL;
	va_end(ap);
	return error;
}

/* Root's own directory: root-owned, nothing for group or others. */
static bool dir_is_roots_own(const struct stat *st) {
	return S_ISDIR(st->st_mode) && st->st_uid == 0 && (st->st_mode & 077) == 0;
}

int keep_ram_keep_dir_open(const char *backing_dir, bool create, char **ret_reason) {
	_cleanup_close_ int base = -EBADF, fd = -EBADF;
	struct stat st;

	if (ret_reason)
		*ret_reason = NULL;
	base = open(backing_dir, OPEN_DIR_FLAGS);
	if (base < 0)
		return reason(ret_reason, -errno, "cannot open memory_backing_dir '%s': %s",
		              backing_dir, strerror(errno));
	if (create && mkdirat(base, KEEP_RAM_KEEP_SUBDIR, 0700) < 0 && errno != EEXIST)
		return reason(ret_reason, -errno, "cannot make '%s/" KEEP_RAM_KEEP_SUBDIR "': %s",
		              backing_dir, strerror(errno));
	fd = openat(base, KEEP_RAM_KEEP_SUBDIR, OPEN_DIR_FLAGS);
	if (fd < 0) {
		int k = -errno;
		if (k == -ELOOP || k == -ENOTDIR)
			return reason(ret_reason, -EPERM,
			              "'%s/" KEEP_RAM_KEEP_SUBDIR "' is not a directory of its own "
			              "(a link, or a file): refusing it",
			              backing_dir);
		return reason(ret_reason, k, "cannot open '%s/" KEEP_RAM_KEEP_SUBDIR "': %s",
		              backing_dir, strerror(-k));
	}
	if (fstat(fd, &st) < 0)
		return reason(ret_reason, -errno, "cannot stat '%s/" KEEP_RAM_KEEP_SUBDIR "': %s",
		              backing_dir, strerror(errno));
	if (!dir_is_roots_own(&st))
		return reason(ret_reason, -EPERM,
		              "'%s/" KEEP_RAM_KEEP_SUBDIR "' belongs to uid %u with mode %04o, not "
		              "to root alone: someone else made it, refusing it",
		              backing_dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	return TAKE_FD(fd);
}

/* The first max characters of name: whole UTF-8 characters when utf8, else bytes. */
static char *short_name(const char *name, bool utf8) {
	size_t n = 0, len = strlen(name);

	for (size_t chars = 0; n < len && chars < KEEP_RAM_SHORT_NAME_MAX; chars++) {
		size_t c = utf8 ? utf8_char_len(name + n, len - n) : 1;
		n += c ?: 1;
	}
	return strndup(name, n);
}

static int domain_dir_in(const char *base, int id, const char *short_name, char **ret_path) {
	_cleanup_free_ char *entry = NULL;
	_cleanup_close_ int b = -EBADF;
	int fd;

	if (asprintf(&entry, "%d-%s", id, short_name) < 0)
		return -ENOMEM;
	b = open(base, OPEN_DIR_FLAGS);
	if (b < 0)
		return -errno;
	fd = openat(b, entry, OPEN_DIR_FLAGS);
	if (fd < 0)
		return errno == ELOOP ? -ENOTDIR : -errno;
	if (ret_path && asprintf(ret_path, "%s/%s", base, entry) < 0) {
		close(fd);
		return -ENOMEM;
	}
	return fd;
}

int keep_ram_domain_dir_open(const char *backing_dir, int id, const char *name, char **ret_path) {
	_cleanup_free_ char *named = NULL, *bytes = NULL, *chars = NULL;
	int fd = -ENOENT;

	if (id < 0 || !name || !*name || strchr(name, '/'))
		return -EINVAL;
	bytes = short_name(name, false);
	chars = short_name(name, true);
	if (!bytes || !chars || asprintf(&named, "%s/libvirt/qemu", backing_dir) < 0)
		return -ENOMEM;
	/* A memory_backing_dir named in qemu.conf: libvirt appends libvirt/qemu; its built-in
	 * default (/var/lib/libvirt/qemu/ram) is used as it is. */
	const char *bases[] = { named, backing_dir };
	for (size_t i = 0; i < ELEMENTSOF(bases) && fd == -ENOENT; i++) {
		fd = domain_dir_in(bases[i], id, chars, ret_path);
		if (fd == -ENOENT && !streq(chars, bytes))
			fd = domain_dir_in(bases[i], id, bytes, ret_path);
	}
	return fd;
}

int keep_ram_ram_file_open(int dom_dir_fd, struct stat *ret_st) {
	_cleanup_close_ int fd = openat(dom_dir_fd, KEEP_RAM_RAM_FILE, OPEN_FILE_FLAGS);

	if (fd < 0)
		return errno == ELOOP ? -EOPNOTSUPP : -errno;
	if (fstat(fd, ret_st) < 0)
		return -errno;
	if (!S_ISREG(ret_st->st_mode))
		return -EOPNOTSUPP;
	return TAKE_FD(fd);
}

int keep_ram_set_immutable(int fd, bool on) {
	int flags;

	if (ioctl(fd, FS_IOC_GETFLAGS, &flags) < 0)
		return errno == ENOTTY || errno == EOPNOTSUPP || errno == EINVAL ? -EOPNOTSUPP
		                                                                 : -errno;
	if (!!(flags & FS_IMMUTABLE_FL) == on)
		return 0;
	flags = on ? flags | FS_IMMUTABLE_FL : flags & ~FS_IMMUTABLE_FL;
	if (ioctl(fd, FS_IOC_SETFLAGS, &flags) < 0)
		return errno == ENOTTY || errno == EOPNOTSUPP ? -EOPNOTSUPP : -errno;
	return 0;
}

int keep_ram_forget_file(int keep_dir_fd, const char *uuid) {
	_cleanup_free_ char *name = NULL;
	_cleanup_close_ int fd = -EBADF;

	if (!keep_ram_uuid_ok(uuid) || asprintf(&name, "%s.ram", uuid) < 0)
		return -EINVAL;
	fd = openat(keep_dir_fd, name, OPEN_FILE_FLAGS);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd >= 0)
		(void)keep_ram_set_immutable(fd, false);
	if (unlinkat(keep_dir_fd, name, 0) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int keep_ram_keep_file(int ram_fd, const struct stat *st, int keep_dir_fd, const char *uuid,
                       const char *generation) {
	_cleanup_free_ char *name = NULL;
	int k;

	if (!keep_ram_uuid_ok(uuid) || asprintf(&name, "%s.ram", uuid) < 0)
		return -EINVAL;
	k = keep_ram_forget_file(keep_dir_fd, uuid);
	if (k < 0)
		return k;
	if (linkat(ram_fd, "", keep_dir_fd, name, AT_EMPTY_PATH) < 0)
		return -errno;
	/* From here on only root can open it again, and only root can set the mark. */
	if (fchown(ram_fd, 0, 0) < 0 || fchmod(ram_fd, KEEP_RAM_KEPT_MODE) < 0 ||
	    fsetxattr(ram_fd, KEEP_RAM_XATTR, generation, strlen(generation), 0) < 0) {
		k = errno == ENOTSUP ? -EOPNOTSUPP : -errno;
		(void)fchmod(ram_fd, st->st_mode & 0777);
		(void)fchown(ram_fd, st->st_uid, st->st_gid);
		(void)unlinkat(keep_dir_fd, name, 0);
		return k;
	}
	return 0;
}

int keep_ram_has_writers(int fd) {
	/* A read lease is refused with EAGAIN while any descriptor (a writable shared mapping
	 * holds one) has the file open for writing: fs/locks.c, check_conflicting_open(). */
	if (fcntl(fd, F_SETLEASE, F_RDLCK) < 0)
		return errno == EAGAIN ? 1 : -errno;
	(void)fcntl(fd, F_SETLEASE, F_UNLCK);
	return 0;
}

/* The checks of keep_ram_kept_open() on an open descriptor. */
static int kept_check(int fd, const KeepRamEntry *e, const char *path, char **ret_reason) {
	char mark[KEEP_RAM_GENERATION_MAX + 1];
	struct stat st;
	ssize_t n;
	int w;

	if (fstat(fd, &st) < 0)
		return reason(ret_reason, -errno, "cannot stat kept RAM file '%s': %s", path,
		              strerror(errno));
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != e->size)
		return reason(ret_reason, -EFBIG,
		              "kept RAM file '%s' has %lld bytes, %" PRIu64 " were kept", path,
		              (long long)st.st_size, e->size);
	if ((uint64_t)st.st_ino != e->inode)
		return reason(ret_reason, -ESTALE,
		              "kept RAM file '%s' is inode %" PRIu64 ", the kept one was %" PRIu64,
		              path, (uint64_t)st.st_ino, e->inode);
	if (st.st_uid != 0 || st.st_gid != 0 || (st.st_mode & 07077))
		return reason(ret_reason, -EPERM,
		              "kept RAM file '%s' belongs to %u:%u with mode %04o: it was not "
		              "root's alone since the save",
		              path, (unsigned)st.st_uid, (unsigned)st.st_gid,
		              (unsigned)(st.st_mode & 07777));
	n = fgetxattr(fd, KEEP_RAM_XATTR, mark, sizeof(mark) - 1);
	if (n < 0)
		return reason(ret_reason, errno == ENODATA ? -ENODATA : -errno,
		              "kept RAM file '%s' has no generation mark (" KEEP_RAM_XATTR "): %s",
		              path, strerror(errno));
	mark[n] = 0;
	if (!streq(mark, e->generation))
		return reason(ret_reason, -ESTALE,
		              "kept RAM file '%s' carries generation '%s', expected '%s'", path,
		              QUOTE_CUT(mark, 80), e->generation);
	w = keep_ram_has_writers(fd);
	if (w != 0)
		return reason(ret_reason, -EPERM,
		              w > 0 ? "kept RAM file '%s' is open for writing by another process"
		                    : "cannot tell whether kept RAM file '%s' is open for writing",
		              path);
	return 0;
}

int keep_ram_kept_open(int keep_dir_fd, const KeepRamEntry *e, int *ret_fd, char **ret_reason) {
	_cleanup_free_ char *name = NULL;
	_cleanup_close_ int fd = -EBADF;
	int k;

	*ret_reason = NULL;
	if (!keep_ram_uuid_ok(e->uuid) || asprintf(&name, "%s.ram", e->uuid) < 0)
		return reason(ret_reason, -EINVAL, "the entry's uuid is malformed");
	fd = openat(keep_dir_fd, name, OPEN_FILE_FLAGS);
	if (fd < 0)
		return reason(ret_reason, errno == ELOOP ? -EPERM : -errno,
		              "kept RAM file '%s' is missing: %s", e->kept_path,
		              errno == ELOOP ? "a symbolic link is there" : strerror(errno));
	k = kept_check(fd, e, e->kept_path, ret_reason);
	if (k < 0)
		return k;
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int keep_ram_link_into(int kept_fd, int dom_dir_fd) {
	if (unlinkat(dom_dir_fd, LINK_TMP_NAME, 0) < 0 && errno != ENOENT)
		return -errno;
	if (linkat(kept_fd, "", dom_dir_fd, LINK_TMP_NAME, AT_EMPTY_PATH) < 0)
		return -errno;
	if (renameat(dom_dir_fd, LINK_TMP_NAME, dom_dir_fd, KEEP_RAM_RAM_FILE) < 0) {
		int k = -errno;
		(void)unlinkat(dom_dir_fd, LINK_TMP_NAME, 0);
		return k;
	}
	return 0;
}

int keep_ram_give_back(int fd, const KeepRamEntry *e) {
	/* The mode while root owns it (no CAP_FOWNER needed), then the owner. */
	if (fchmod(fd, e->owner_mode & 0777) < 0 || fchown(fd, e->owner_uid, e->owner_gid) < 0)
		return -errno;
	return 0;
}
