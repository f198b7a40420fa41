/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What upgraded-libvirt-hook does at "start begin" (docs/vms.md, "Restore side" and "Threat
 * model"), as a library the unit tests drive. Every path it acts on comes from root's own
 * manifest entry for the domain's uuid or is derived from that uuid under root's directories;
 * from the domain XML it takes only the uuid, the live id and the name (libvirt's elements), and
 * whether a qemu:arg equals the one monitor keep-ram itself writes.
 */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "keep-ram-entry.h"

typedef struct KeepRamHookStart {
	char uuid[KEEP_RAM_UUID_LEN + 1];
	char *name;
	bool linked;      /* the kept RAM was linked into the new memory directory */
	char *kept_path;  /* when linked (for the log) */
	bool monitor;     /* the XML carries keep-ram's own extra monitor: a helper must answer */
	char *socket;     /* its socket (root + KEEP_RAM_RUN_DIR/<uuid>/qmp) */
	uid_t socket_uid; /* who binds it: the entry's QEMU user, else the XML's DAC label, */
	gid_t socket_gid; /* else root */
} KeepRamHookStart;

void keep_ram_hook_start_done(KeepRamHookStart *s);

/*
 * The hook's "start begin" step for the domain XML (len bytes) libvirt passed, under root (""
 * for the host). 0 and *ret filled: nothing to refuse (linked or not, monitor or not); negative:
 * the kept file cannot be trusted or linked, the hook must fail so that libvirt aborts the
 * start (nothing was changed: the image and the kept file stay). *ret_msg (may be NULL on
 * success) says what happened.
 */
int keep_ram_hook_start(const char *root, const char *xml, size_t len, KeepRamHookStart *ret,
                        char **ret_msg);

/*
 * The monitor socket's own directory root + KEEP_RAM_RUN_DIR/<uuid>/ (0700, given to uid:gid),
 * its parents root's (0755), no stale socket left in it. Every step relative to a directory
 * descriptor that was checked to be root's own; a parent that is not (someone else made it) is
 * refused with -EPERM.
 */
int keep_ram_socket_dir_prepare(const char *root, const char *uuid, uid_t uid, gid_t gid);
