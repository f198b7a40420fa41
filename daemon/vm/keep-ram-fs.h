/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * keep-ram's file operations, each on a descriptor that was opened without following a
 * symbolic link and checked with fstat (docs/vms.md, "Threat model"). Shared by the daemon
 * (the save and the guard) and upgraded-libvirt-hook (the guard and the link back).
 *
 * Who can write what: libvirt's memory_backing_dir is named by root (qemu.conf); the domain's
 * memory directory in it and the RAM file QEMU creates there belong to the QEMU user; the keep
 * directory <memory_backing_dir>/upgraded-keep is root's own (0700), and so is a kept file from
 * the moment it is kept: root:root 0400, the generation mark in the trusted.* namespace (only
 * CAP_SYS_ADMIN sets it), immutable once the QEMU that mapped it has exited, and checked to
 * have no writer left (a read lease is granted only when nobody holds it open for writing).
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "keep-ram-entry.h"

#define KEEP_RAM_XATTR       "trusted.upgraded.generation"
#define KEEP_RAM_KEEP_SUBDIR "upgraded-keep"
#define KEEP_RAM_RAM_FILE    "pc.ram"
/* The mode of a kept file: root's, read-only (linkat and fgetxattr need no more). */
#define KEEP_RAM_KEPT_MODE   0400

/*
 * <backing_dir>/upgraded-keep, opened as a directory that is not a symbolic link, owned by
 * root with no access for group or others; made (0700) when create and it does not exist.
 * Returns the descriptor; -EPERM with a reason when it exists and is not root's own (someone
 * else made it first: never used, never repaired), -ENOENT when it does not exist and !create.
 */
int keep_ram_keep_dir_open(const char *backing_dir, bool create, char **ret_reason);

/*
 * The memory directory libvirt made for the running domain: exactly <id>-<short name> (libvirt's
 * virDomainDefGetShortName(): the name cut to KEEP_RAM_SHORT_NAME_MAX characters, whole UTF-8
 * characters or bytes, as libvirtd's locale cuts it) in <backing_dir>/libvirt/qemu, where
 * libvirt puts it for a memory_backing_dir named in qemu.conf, else in <backing_dir> itself.
 * Never a symbolic link, never a guess between two. Returns the descriptor and, when
 * ret_path, its path; -ENOENT when there is none.
 */
int keep_ram_domain_dir_open(const char *backing_dir, int id, const char *name, char **ret_path);

/* The RAM file in a domain's memory directory: a regular file, not a link; its descriptor
 * (read-only) and its stat. -EOPNOTSUPP when it is not a regular file. */
int keep_ram_ram_file_open(int dom_dir_fd, struct stat *ret_st);

/*
 * Keeps the open RAM file: hard-links it to <keep dir>/<uuid>.ram (replacing a leftover), makes
 * it root's (root:root KEEP_RAM_KEPT_MODE) and writes generation into KEEP_RAM_XATTR. Its
 * previous owner and mode are the caller's to record (fstat before). On failure the link is
 * removed and the owner and mode are given back.
 */
int keep_ram_keep_file(int ram_fd, const struct stat *st, int keep_dir_fd, const char *uuid,
                       const char *generation);

/* FS_IMMUTABLE_FL on or off. -EOPNOTSUPP when the filesystem has no such flag. */
int keep_ram_set_immutable(int fd, bool on);

/* Whether anyone holds fd's file open for writing (a shared writable mapping included):
 * 1 yes, 0 no, -errno when it cannot be told (leases disabled). fd must be read-only and
 * the caller its owner (root). */
int keep_ram_has_writers(int fd);

/*
 * The guard: <keep dir>/<uuid>.ram is the file the entry describes, and nobody but root can
 * have changed it: a regular file, root:root with no access for others, the recorded size and
 * inode, the entry's generation in KEEP_RAM_XATTR, no writer. Returns its read-only descriptor
 * in *ret_fd. -ENOENT missing, -EFBIG wrong size, -ESTALE wrong inode or mark, -ENODATA no
 * mark, -EPERM not root's or open for writing; a human-readable *ret_reason on every failure
 * (the caller frees it).
 */
int keep_ram_kept_open(int keep_dir_fd, const KeepRamEntry *e, int *ret_fd, char **ret_reason);

/* Hard-links the kept file into a domain's memory directory as KEEP_RAM_RAM_FILE (a temporary
 * name, then renameat over it: atomic). The file must not be immutable. */
int keep_ram_link_into(int kept_fd, int dom_dir_fd);

/* Gives the file back to the owner and mode it had before it was kept. */
int keep_ram_give_back(int fd, const KeepRamEntry *e);

/* Removes <keep dir>/<uuid>.ram (its immutable flag cleared first). 0 when it is not there. */
int keep_ram_forget_file(int keep_dir_fd, const char *uuid);
