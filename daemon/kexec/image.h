/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Staging-time validation of kernel and initrd files: path rules, a safe open,
 * ownership and mode checks, the x86 bzImage setup header (validated by the
 * loader's parser, loader/bzimage.h, the same one the kexec_load backend uses),
 * size/mtime/digest.
 * Errors are reported as named D-Bus errors (common/upgrade-bus.h) in *error.
 */

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

#include "bzimage.h"
#include "digest.h"
#include "staged-file.h"

#define IMAGE_VERSION_MAX 64

/* The largest files Stage takes (docs/dbus-api.md, "Stage"), judged on their size before a
 * byte is read: ImageTooLarge. Debian's kernels are 5-12 MiB and their initrds 20-80 MiB
 * (MODULES=most), a few hundred with every firmware; Linux's kexec_file_load reads an
 * initrd of at most INT_MAX bytes. */
#define IMAGE_KERNEL_SIZE_MAX (256ULL * 1024 * 1024)
#define IMAGE_INITRD_SIZE_MAX (1024ULL * 1024 * 1024)

typedef enum ImageKind {
	IMAGE_KERNEL,
	IMAGE_INITRD,
} ImageKind;

typedef struct ImageFile {
	char *path; /* as the caller named it, without --root */
	int fd;     /* O_RDONLY|O_CLOEXEC, opened without following symlinks */
	uint64_t size;
	uint64_t mtime_usec;
	uint64_t inode;
	uint64_t ctime_usec;
	char sha256[DIGEST_SHA256_HEX_SIZE];
	char *version;              /* kernels only: "6.1.0-57-cloud-amd64" */
	const char *version_source; /* "bzimage-header" or "file-name" */
} ImageFile;

typedef struct ImageRules {
	const char *root;     /* --root prefix, NULL for "/" */
	char *const *allowed; /* allowed directories (without root) */
	uid_t owner;          /* required owner, 0 in production */
} ImageRules;

void image_file_done(ImageFile *f);

/* Validates path per rules and opens it. On success *ret is filled (caller owns it). */
int image_open(const ImageRules *rules, const char *path, ImageKind kind, ImageFile *ret,
               sd_bus_error *error);
/* image_open() in two steps: everything but the digest (cheap: a few stat()s and, for a
 * kernel, its setup header; ret->sha256 stays ""), then the digest, which reads the whole
 * file and stops with ECANCELED (error: nothing set) as soon as *cancel (may be NULL). */
int image_open_unhashed(const ImageRules *rules, const char *path, ImageKind kind, ImageFile *ret,
                        sd_bus_error *error);
int image_hash(ImageFile *f, ImageKind kind, const atomic_bool *cancel, sd_bus_error *error);

/* Whether f (below root) is still the file stage validated: looked at without
 * following a symlink in any component, the same inode, size, mtime and ctime. A
 * rename over it, a truncation or a rewrite in place (even with its mtime set back)
 * shows; the content is not hashed again (the commit path reads no file). A file
 * without a path (no initrd) is unchanged. */
bool image_unchanged(const char *root, const UpdateFile *f);

/* "vmlinuz-6.1.0-57-cloud-amd64" -> "6.1.0-57-cloud-amd64"; -ENODATA otherwise. */
int image_version_from_file_name(const char *path, char **ret_version);

bool image_version_is_valid(const char *v);
