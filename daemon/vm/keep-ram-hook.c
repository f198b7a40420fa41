/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * upgraded-libvirt-hook's decisions and file work at "start begin" (keep-ram-hook.h): the guard
 * on the kept file, the link back into the restoring domain's memory directory, and the extra
 * monitor's socket directory. The program around it (upgraded-libvirt-hook.c) only reads its
 * arguments and stdin, and forks the QMP helper.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "keep-ram-digest.h"
#include "keep-ram-fs.h"
#include "keep-ram-hook.h"
#include "fileio.h"
#include "macros.h"
#include "string-util.h"

#define OPEN_DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

void keep_ram_hook_start_done(KeepRamHookStart *s) {
	if (!s)
		return;
	free(s->name);
	free(s->kept_path);
	free(s->socket);
	*s = (KeepRamHookStart){};
}

static int msg(char **ret_msg, int error, const char *fmt, ...) _printf_(3, 4);
static int msg(char **ret_msg, int error, const char *fmt, ...) {
	va_list ap;

	free(*ret_msg);
	va_start(ap, fmt);
	if (vasprintf(ret_msg, fmt, ap) < 0)
		*ret_msg = NULL;
	va_end(ap);
	return error;
}

/* The digest the entry carries, unless the daemon's guard verified it for this generation. */
static int check_digest(int fd, const KeepRamEntry *e, char **ret_msg) {
	_cleanup_free_ char *hex = NULL;
	KeepRamDigestMode m;
	int k;

	if (!e->digest || (e->verified && streq(e->verified, e->generation)))
		return 0;
	m = keep_ram_digest_mode_from_string(e->digest_mode);
	if (m != KEEP_RAM_DIGEST_SAMPLED && m != KEEP_RAM_DIGEST_FULL)
		return msg(ret_msg, -EBADMSG, "refusing to start '%s': unknown digest mode '%s'",
		           e->name, e->digest_mode);
	k = keep_ram_digest_fd(fd, m, 0, &hex);
	if (k < 0)
		return msg(ret_msg, k, "refusing to start '%s': cannot hash '%s': %s", e->name,
		           e->kept_path, strerror(-k));
	if (!streq(hex, e->digest))
		return msg(ret_msg, -EBADMSG,
		           "refusing to start '%s' from its managed save: %s digest of '%s' is %s, "
		           "%s at the save",
		           e->name, e->digest_mode, e->kept_path, hex, e->digest);
	return 0;
}

/* The keep directory, by the identity the entry recorded. */
static int open_keep_dir(const KeepRamEntry *e, char **ret_msg) {
	_cleanup_free_ char *why = NULL;
	_cleanup_close_ int fd = keep_ram_keep_dir_open(e->backing_dir, false, &why);
	struct stat st;

	if (fd < 0)
		return msg(ret_msg, fd, "refusing to start '%s' from its managed save: %s", e->name,
		           strna(why));
	if (fstat(fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_dev != e->keep_dir_dev || (uint64_t)st.st_ino != e->keep_dir_inode)
		return msg(ret_msg, -ESTALE,
		           "refusing to start '%s': '%s/" KEEP_RAM_KEEP_SUBDIR "' is not the "
		           "directory its RAM was kept in",
		           e->name, e->backing_dir);
	return TAKE_FD(fd);
}

/* The restore on kept RAM: the guard, then the link into the new id's memory directory. */
static int link_back(const KeepRamEntry *e, const KeepRamXml *x, char **ret_msg) {
	_cleanup_close_ int keep = -EBADF, kept = -EBADF, dom = -EBADF;
	_cleanup_free_ char *why = NULL;
	int k;

	keep = open_keep_dir(e, ret_msg);
	if (keep < 0)
		return keep;
	k = keep_ram_kept_open(keep, e, &kept, &why);
	if (k < 0)
		return msg(ret_msg, k, "refusing to start '%s' from its managed save: %s", e->name,
		           strna(why));
	k = check_digest(kept, e, ret_msg);
	if (k < 0)
		return k;
	dom = keep_ram_domain_dir_open(e->backing_dir, x->id, x->name, NULL);
	if (dom < 0)
		return msg(
		        ret_msg, dom,
		        "refusing to start '%s': no memory directory %s/[libvirt/qemu/]%d-<name> "
		        "to link its kept RAM into: %s",
		        e->name, e->backing_dir, x->id, strerror(-dom));
	/* Nothing changed so far. The flag first (an immutable file cannot be linked), then the
	 * link, then the owner QEMU needs: a failure on the way puts the flag back. */
	k = keep_ram_set_immutable(kept, false);
	if (k < 0 && k != -EOPNOTSUPP)
		return msg(ret_msg, k,
		           "refusing to start '%s': cannot clear the kept file's "
		           "immutable flag: %s",
		           e->name, strerror(-k));
	k = keep_ram_link_into(kept, dom);
	if (k >= 0)
		k = keep_ram_give_back(kept, e);
	if (k < 0) {
		(void)keep_ram_set_immutable(kept, true);
		return msg(ret_msg, k,
		           "refusing to start '%s': cannot link its kept RAM into its "
		           "memory directory: %s",
		           e->name, strerror(-k));
	}
	return 0;
}

/* Whether the save image the entry names exists as a regular file (a restore, not a boot). */
static bool save_image_exists(const KeepRamEntry *e) {
	struct stat st;

	return lstat(e->save_image, &st) >= 0 && S_ISREG(st.st_mode);
}

/* The kept-RAM part: 0 nothing to do or linked (s->linked), negative refused. */
static int hook_kept_ram(const char *root, const KeepRamXml *x, KeepRamHookStart *s,
                         char **ret_msg) {
	_cleanup_free_ char *state_dir = NULL;
	KeepRamEntry e = {};
	int k;

	if (asprintf(&state_dir, "%s%s", strempty(root), KEEP_RAM_STATE_DIR) < 0)
		return -ENOMEM;
	k = keep_ram_entry_read(state_dir, x->uuid, &e);
	if (k == -ENOENT)
		return 0;
	if (k < 0)
		return msg(ret_msg, k, "keep-ram entry of %s is unreadable (%s): refusing", x->uuid,
		           strerror(-k));
	s->socket_uid = e.owner_uid;
	s->socket_gid = e.owner_gid;
	if (!save_image_exists(&e))
		/* Not a restore (no managed save image): a fresh boot does not need the RAM. */
		k = msg(ret_msg, 0,
		        "'%s' starts without its managed save image, kept RAM '%s' not used",
		        e.name, e.kept_path);
	else {
		k = link_back(&e, x, ret_msg);
		if (k >= 0) {
			s->linked = true;
			s->kept_path = TAKE_PTR(e.kept_path);
		}
	}
	keep_ram_entry_done(&e);
	return k;
}

int keep_ram_hook_start(const char *root, const char *xml, size_t len, KeepRamHookStart *ret,
                        char **ret_msg) {
	_cleanup_free_ char *arg = NULL;
	KeepRamHookStart s = {};
	KeepRamXml x;
	int k;

	*ret_msg = NULL;
	k = keep_ram_xml_parse(xml, len, &x);
	if (k < 0) {
		*ret = s;
		return msg(ret_msg, 0, "cannot read the domain XML (%s), ignoring it",
		           strerror(-k));
	}
	memcpy(s.uuid, x.uuid, sizeof(s.uuid));
	s.name = x.name ? strdup(x.name) : NULL;
	if (x.has_dac_owner) {
		s.socket_uid = x.dac_uid;
		s.socket_gid = x.dac_gid;
	}
	k = hook_kept_ram(root, &x, &s, ret_msg);
	/* keep-ram's own monitor only: its one value for this uuid under root. A qemu:arg that
	 * names another path is the domain's own business, never a path root acts on. */
	if (k >= 0 && keep_ram_qmp_chardev_arg(root, x.uuid, &arg) >= 0 &&
	    keep_ram_xml_has_qemu_arg(&x, arg)) {
		s.monitor = true;
		k = keep_ram_qmp_socket_path(root, x.uuid, &s.socket);
	}
	keep_ram_xml_done(&x);
	if (k < 0) {
		keep_ram_hook_start_done(&s);
		return k;
	}
	*ret = s;
	return 0;
}

/* name below the directory at fd: made with mode when missing, opened without following a
 * link, and root's with no write access for others (else -EPERM). */
static int roots_subdir(int fd, const char *name, mode_t mode) {
	_cleanup_close_ int sub = -EBADF;
	struct stat st;

	if (mkdirat(fd, name, mode) < 0 && errno != EEXIST)
		return -errno;
	sub = openat(fd, name, OPEN_DIR_FLAGS);
	if (sub < 0)
		return errno == ELOOP ? -EPERM : -errno;
	if (fstat(sub, &st) < 0)
		return -errno;
	if (st.st_uid != 0 || (st.st_mode & 022))
		return -EPERM;
	return TAKE_FD(sub);
}

int keep_ram_socket_dir_prepare(const char *root, const char *uuid, uid_t uid, gid_t gid) {
	_cleanup_free_ char *run = NULL;
	_cleanup_close_ int fd = -EBADF;
	static const char *const parents[] = { "upgraded", "keep-ram" };
	struct stat st;
	int k;

	if (!keep_ram_uuid_ok(uuid) || asprintf(&run, "%s/run", strempty(root)) < 0)
		return -EINVAL;
	if (root && *root && (k = mkdir_p(run, 0755)) < 0) /* a test's root only */
		return k;
	fd = open(run, OPEN_DIR_FLAGS);
	if (fd < 0)
		return -errno;
	for (size_t i = 0; i < ELEMENTSOF(parents); i++) {
		int sub = roots_subdir(fd, parents[i], 0755);

		if (sub < 0)
			return sub;
		close(fd);
		fd = sub;
	}
	/* <uuid>: root's until it is handed over, so it cannot be someone else's already. */
	if (mkdirat(fd, uuid, 0700) < 0 && errno != EEXIST)
		return -errno;
	{
		_cleanup_close_ int dir = openat(fd, uuid, OPEN_DIR_FLAGS);

		if (dir < 0)
			return errno == ELOOP ? -EPERM : -errno;
		if (fstat(dir, &st) < 0)
			return -errno;
		if (fchown(dir, uid, gid) < 0 || fchmod(dir, 0700) < 0)
			return -errno;
		/* A stale socket would answer ECONNREFUSED: removed by name in this directory. */
		if (unlinkat(dir, "qmp", 0) < 0 && errno != ENOENT)
			return -errno;
	}
	return 0;
}
