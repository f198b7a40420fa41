/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Staging-time validation of kernel and initrd files: path rules, a safe open,
 * ownership and mode checks, the x86 bzImage setup header, size/mtime/digest.
 * Errors are reported as named D-Bus errors (upgrade-errors.h) in *error.
 */

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

#include "digest.h"

/* x86 boot protocol (Documentation/arch/x86/boot.rst): offsets into the file. */
#define BZIMAGE_SETUP_SECTS_OFFSET    0x1f1
#define BZIMAGE_BOOT_FLAG_OFFSET      0x1fe
#define BZIMAGE_BOOT_FLAG             0xaa55
#define BZIMAGE_HEADER_MAGIC_OFFSET   0x202
#define BZIMAGE_HEADER_MAGIC          "HdrS"
#define BZIMAGE_VERSION_OFFSET        0x206
#define BZIMAGE_KERNEL_VERSION_OFFSET 0x20e
#define BZIMAGE_XLOADFLAGS_OFFSET     0x236
#define BZIMAGE_XLF_KERNEL_64         (1u << 0)
#define BZIMAGE_SETUP_HEADER_END      0x268
/* kernel_version is an offset relative to this base (boot.rst: "plus 0x200"). */
#define BZIMAGE_KERNEL_VERSION_BASE   0x200
#define BZIMAGE_SECTOR_SIZE           512
#define BZIMAGE_DEFAULT_SETUP_SECTS   4
#define BZIMAGE_MIN_PROTOCOL          0x020c /* 2.12: xloadflags, needed for a 64-bit kexec */

#define IMAGE_VERSION_MAX 64

typedef enum ImageKind {
	IMAGE_KERNEL,
	IMAGE_INITRD,
} ImageKind;

typedef struct ImageFile {
	char *path; /* as the caller named it, without --root */
	int fd;     /* O_RDONLY|O_CLOEXEC, opened without following symlinks */
	uint64_t size;
	uint64_t mtime_usec;
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

/* Parses the setup header in buf (the file's first bytes) and extracts the version
 * string's first word. -EBADMSG when it is not a 64-bit bzImage, -ENODATA when the
 * header carries no version. */
int image_parse_bzimage(const uint8_t *buf, size_t size, uint64_t file_size, char **ret_version);

/* "vmlinuz-6.1.0-57-cloud-amd64" -> "6.1.0-57-cloud-amd64"; -ENODATA otherwise. */
int image_version_from_file_name(const char *path, char **ret_version);

bool image_version_is_valid(const char *v);
