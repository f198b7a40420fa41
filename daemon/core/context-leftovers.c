/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * What an interrupted write leaves: write_file_atomic() writes "<id>.json.tmpXXXXXX" beside
 * the record or report and renames it over; a crash (or a full disk) between the two leaves
 * the temporary file. context_load() skips it, and the next start removes it here, before
 * anything else reads the directory, so they never pile up.
 *
 * Root removes files in a directory it owns, so the removal is kept narrow: the directory is
 * opened without following a symbolic link and must be ours and writable by nobody else;
 * only regular files whose whole name has the temporary pattern go, each looked at and
 * unlinked relative to that descriptor (a symbolic link is never followed, never removed).
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "context-private.h"
#include "log.h"
#include "macros.h"

#define TMP_SUFFIX     ".json.tmp"
#define TMP_RANDOM_LEN 6 /* mkstemp()'s XXXXXX */

/* "<16 hex digits>.json.tmp" and six characters of mkstemp(): [A-Za-z0-9]. */
static bool is_leftover_name(const char *name) {
	const size_t s = strlen(TMP_SUFFIX);

	if (strlen(name) != UPDATE_ID_LEN + s + TMP_RANDOM_LEN ||
	    strspn(name, "0123456789abcdef") != UPDATE_ID_LEN ||
	    strncmp(name + UPDATE_ID_LEN, TMP_SUFFIX, s) != 0)
		return false;
	for (const char *p = name + UPDATE_ID_LEN + s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9')))
			return false;
	return true;
}

/* The directory sub of the state directory, opened if it is ours alone; -ENOENT, -EPERM. */
static int open_own_dir(Context *c, const char *sub) {
	_cleanup_close_ int state = -EBADF, fd = -EBADF;
	struct stat st;

	state = open(c->state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (state < 0)
		return -errno;
	fd = openat(state, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)))
		return -EPERM;
	return TAKE_FD(fd);
}

int context_remove_leftovers(Context *c, const char *sub) {
	_cleanup_close_ int fd = -EBADF;
	unsigned removed = 0;
	struct dirent *de;
	DIR *d;

	fd = open_own_dir(c, sub);
	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return log_warning_errno(fd, "Not removing temporary files in '%s/%s': %m",
		                         c->state_dir, sub);
	d = fdopendir(fd);
	if (!d)
		return -errno;
	TAKE_FD(fd); /* d owns it now */
	while ((de = readdir(d))) {
		struct stat st;

		if (!is_leftover_name(de->d_name))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0) < 0) {
			log_warning_errno(-errno, "Failed to remove '%s/%s/%s', ignoring: %m",
			                  c->state_dir, sub, de->d_name);
			continue;
		}
		log_info("Removed '%s/%s/%s', left by an interrupted write (%jd bytes).",
		         c->state_dir, sub, de->d_name, (intmax_t)st.st_size);
		removed++;
	}
	closedir(d);
	return (int)removed;
}
