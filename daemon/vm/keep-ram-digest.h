/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The kept RAM's content digest (docs/vms.md, "Digest"): shared by the daemon, which hashes at
 * the save and verifies in its guard, and upgraded-libvirt-hook, which verifies a digest the
 * daemon's guard did not (a start libvirt was asked for by someone else). No libvirt here.
 */

typedef enum KeepRamDigestMode {
	KEEP_RAM_DIGEST_MARK,    /* the generation mark alone */
	KEEP_RAM_DIGEST_SAMPLED, /* + SHA-256 over 4 KiB of every 256 KiB */
	KEEP_RAM_DIGEST_FULL,    /* + SHA-256 over every byte */
	_KEEP_RAM_DIGEST_MAX,
	_KEEP_RAM_DIGEST_INVALID = -22,
} KeepRamDigestMode;

const char *keep_ram_digest_mode_to_string(KeepRamDigestMode m);
KeepRamDigestMode keep_ram_digest_mode_from_string(const char *s);

/* The digest of the open file fd in mode (not MARK), on threads threads (0 = online CPUs), as
 * lowercase hex. */
int keep_ram_digest_fd(int fd, KeepRamDigestMode mode, unsigned threads, char **ret_hex);
/* The same for the file at path (opened without following a symbolic link). */
int keep_ram_digest_file(const char *path, KeepRamDigestMode mode, unsigned threads,
                         char **ret_hex);
