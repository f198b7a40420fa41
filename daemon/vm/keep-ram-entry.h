/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The keep-ram manifest: one entry per VM whose RAM was kept in place for a handoff, written by
 * the daemon before the VM's managed save and read by the libvirt hook (upgraded-libvirt-hook)
 * when libvirt starts the domain again, on this kernel (rollback) or the next one (restore).
 *
 * An entry lives in STATE_DIR/<uuid>.entry (STATE_DIR = <root>/var/lib/upgraded/keep-ram, on
 * the root filesystem: it must survive the kexec, /run does not). Its format is "key=value"
 * lines; values never hold a newline. The kept RAM file carries the entry's generation mark
 * in the extended attribute KEEP_RAM_XATTR: the hook links the file back only when both agree,
 * so that a QEMU never maps a RAM file that is not the one its device state was saved with.
 *
 * No libvirt here: the hook links only this, libc and common/.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define KEEP_RAM_XATTR          "user.upgraded.generation"
#define KEEP_RAM_STATE_DIR      "/var/lib/upgraded/keep-ram"
#define KEEP_RAM_RUN_DIR        "/run/upgraded/keep-ram"
#define KEEP_RAM_UUID_LEN       36
#define KEEP_RAM_QMP_CHARDEV_ID "upgraded-keep-ram"
#define KEEP_RAM_ENTRY_MAX_SIZE 8192
#define KEEP_RAM_GENERATION_MAX 256

typedef struct KeepRamEntry {
	char uuid[KEEP_RAM_UUID_LEN + 1];
	char *name;
	char *kept_path;   /* the hard link that keeps the RAM file alive */
	uint64_t size;     /* bytes of the RAM file */
	uint64_t inode;    /* its inode number at the save */
	char *generation;  /* the mark, also in the file's KEEP_RAM_XATTR */
	char *backing_dir; /* libvirt's memory_backing_dir */
	char *qmp_socket;  /* the extra monitor the restoring QEMU waits on */
	char *save_image;  /* the managed save image; the entry applies while it exists */
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

/* Writes generation into the file's KEEP_RAM_XATTR. -EOPNOTSUPP: the filesystem has no user
 * extended attributes (the strategy cannot prove the file then). */
int keep_ram_mark_set(const char *path, const char *generation);

/*
 * Whether the kept file is the one the entry describes: present, a regular file of the
 * recorded size, the recorded inode, and its mark equal to the entry's generation.
 * -ENOENT missing, -EFBIG wrong size, -ESTALE wrong inode or mark, -ENODATA no mark; a
 * human-readable *ret_reason on every failure (the caller frees it).
 */
int keep_ram_entry_check_file(const KeepRamEntry *e, char **ret_reason);

/* The running domain's memory directory: the one entry "<id>-*" (libvirt names it "<id>-<short
 * name>") in <backing_dir>/libvirt/qemu, where libvirt puts it for a memory_backing_dir named
 * in qemu.conf, else in <backing_dir> itself, its layout for the built-in default. -ENOENT
 * when none, -EEXIST when two entries match in one place. */
int keep_ram_domain_dir(const char *backing_dir, int id, char **ret_dir);

/* Hard-links the kept file to ram_file, replacing what is there (link + rename, atomic). */
int keep_ram_link_back(const char *kept_path, const char *ram_file);

/* From a domain XML as libvirt hands it to a hook: the uuid and the live id (-1 when the
 * domain element has none). -EBADMSG when there is no <uuid>. */
int keep_ram_xml_facts(const char *xml, char ret_uuid[static KEEP_RAM_UUID_LEN + 1], int *ret_id);

/*
 * The hook's "start begin" step for the domain XML libvirt passed: no entry, or no managed
 * save image (a fresh boot) -> 0; the kept file checked and linked into the new memory
 * directory -> 1 and *ret filled; the file cannot be trusted or linked -> negative: the hook
 * must fail so that libvirt aborts the start. *ret_msg (may be NULL) says what happened.
 */
int keep_ram_hook_start(const char *state_dir, const char *xml, KeepRamEntry *ret, char **ret_msg);

/* The socket path of the extra monitor keep-ram puts into the saved XML (-chardev
 * socket,id=KEEP_RAM_QMP_CHARDEV_ID,path=...). -ENOENT when the XML has none. */
int keep_ram_xml_qmp_socket(const char *xml, char **ret_path);

/* Where that socket lives: root + KEEP_RAM_RUN_DIR/<uuid>/qmp. The directory of its own is
 * given to the QEMU user by the hook, who binds the socket there. */
int keep_ram_qmp_socket_path(const char *root, const char *uuid, char **ret_path);

/* The user and group QEMU runs as, from the DAC security label libvirt put in the domain XML
 * it hands the "start" hook (<seclabel model='dac'><label>+UID:+GID</label>, or names).
 * -ENOENT when the XML has none, -EBADMSG when it cannot be read. */
int keep_ram_xml_dac_owner(const char *xml, uid_t *ret_uid, gid_t *ret_gid);
