/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The keep-ram manifest: one entry per VM whose RAM was kept in place for a handoff, written by
 * the daemon before the VM's managed save and read by the libvirt hook (upgraded-libvirt-hook)
 * when libvirt starts the domain again, on this kernel (rollback) or the next one (restore).
 *
 * An entry lives in STATE_DIR/<uuid>.entry (STATE_DIR = <root>/var/lib/upgraded/keep-ram, root's
 * own directory on the root filesystem: it must survive the kexec, /run does not). Its format is
 * "key=value" lines; values never hold a newline. It is the only source of the paths and the
 * owner the hook acts on: nothing of them is read from the domain XML. The kept RAM file carries
 * the entry's generation mark in a trusted.* extended attribute (keep-ram-fs.h): the hook links
 * the file back only when both agree, so that a QEMU never maps a RAM file that is not the one
 * its device state was saved with.
 *
 * No libvirt here: the hook links only this, libxml2, libc and common/.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "keep-ram-xml.h"

#define KEEP_RAM_STATE_DIR      "/var/lib/upgraded/keep-ram"
#define KEEP_RAM_RUN_DIR        "/run/upgraded/keep-ram"
#define KEEP_RAM_QMP_CHARDEV_ID "upgraded-keep-ram"
#define KEEP_RAM_ENTRY_MAX_SIZE 8192
#define KEEP_RAM_GENERATION_MAX 256

typedef struct KeepRamEntry {
	char uuid[KEEP_RAM_UUID_LEN + 1];
	char *name;
	char *kept_path;   /* the hard link that keeps the RAM file alive (for messages) */
	uint64_t size;     /* bytes of the RAM file */
	uint64_t inode;    /* its inode number at the save */
	char *generation;  /* the mark, also in the file's KEEP_RAM_XATTR */
	char *backing_dir; /* libvirt's memory_backing_dir */
	char *qmp_socket;  /* the extra monitor the restoring QEMU waits on */
	char *save_image;  /* the managed save image; the entry applies while it exists */
	/* The RAM file's owner and mode before it was kept (QEMU's user): given back to it when
	 * the file is linked into the restoring domain's memory directory. */
	uid_t owner_uid;
	gid_t owner_gid;
	mode_t owner_mode;
	/* The keep directory's identity: the hook uses no other. */
	uint64_t keep_dir_dev;
	uint64_t keep_dir_inode;
	/* The content digest ("sampled" or "full" and its hex), NULL in mark mode. */
	char *digest_mode;
	char *digest;
	/* The generation whose digest the daemon's guard verified just before it asked libvirt
	 * to restore (the file immutable and root's since): the hook need not hash it again. */
	char *verified;
} KeepRamEntry;

void keep_ram_entry_done(KeepRamEntry *e);

/* Text form. parse: -EBADMSG on a missing or malformed field, the entry untouched. */
int keep_ram_entry_format(const KeepRamEntry *e, char **ret_text);
int keep_ram_entry_parse(const char *text, KeepRamEntry *ret);

/* STATE_DIR/<uuid>.entry, written atomically; read: -ENOENT when there is none. */
int keep_ram_entry_path(const char *state_dir, const char *uuid, char **ret_path);
int keep_ram_entry_write(const char *state_dir, const KeepRamEntry *e);
int keep_ram_entry_read(const char *state_dir, const char *uuid, KeepRamEntry *ret);
int keep_ram_entry_remove(const char *state_dir, const char *uuid);

/* Where the extra monitor's socket lives: root + KEEP_RAM_RUN_DIR/<uuid>/qmp. The directory of
 * its own is given to the QEMU user by the hook, who binds the socket there. */
int keep_ram_qmp_socket_path(const char *root, const char *uuid, char **ret_path);

/* The one value of the -chardev argument keep-ram puts into the saved XML for uuid under root:
 * "socket,id=KEEP_RAM_QMP_CHARDEV_ID,path=<keep_ram_qmp_socket_path()>,server=on,wait=on". The
 * hook answers only a qemu:arg equal to it. */
int keep_ram_qmp_chardev_arg(const char *root, const char *uuid, char **ret_arg);
