/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Parses and validates an x86_64 bzImage's setup header for a kexec load:
 * boot protocol >= 2.12, the 64-bit entry, a relocatable kernel, sane
 * alignment and sizes. Every rejection has a name (BzImageError) and a message.
 * Also extracts the kernel version string the image carries, which tells the
 * daemon which kernel it staged (and, compared with uname, which one booted).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Larger files are refused before they are read: no distribution kernel comes
 * close, and a kexec load must fit in RAM next to the running system. */
#define BZIMAGE_MAX_SIZE       ((uint64_t)512 << 20)
/* init_size beyond this is malformed (the kernel's own limit is far lower). */
#define BZIMAGE_MAX_INIT_SIZE  ((uint64_t)1 << 30)
/* The largest power-of-two alignment accepted (1 GiB). */
#define BZIMAGE_MAX_ALIGNMENT  ((uint32_t)1 << 30)
/* The setup area is at most (255 + 1) sectors: this prefix holds every header. */
#define BZIMAGE_SETUP_MAX_SIZE (256 * 512)
/* Longest version string kept, with its NUL. */
#define BZIMAGE_VERSION_MAX    256

typedef enum BzImageError {
	BZIMAGE_OK,
	BZIMAGE_ERR_TRUNCATED,           /* shorter than its own header says */
	BZIMAGE_ERR_TOO_LARGE,           /* larger than BZIMAGE_MAX_SIZE */
	BZIMAGE_ERR_BAD_BOOT_FLAG,       /* no 0xAA55 at 0x1fe */
	BZIMAGE_ERR_NO_HEADER_MAGIC,     /* no "HdrS" at 0x202 */
	BZIMAGE_ERR_PROTOCOL_TOO_OLD,    /* version < 2.12 */
	BZIMAGE_ERR_HEADER_TOO_SHORT,    /* the jump says the header ends before init_size */
	BZIMAGE_ERR_NO_KERNEL,           /* nothing after the setup sectors */
	BZIMAGE_ERR_SYSSIZE,             /* syssize says more code than the file holds */
	BZIMAGE_ERR_NOT_LOADED_HIGH,     /* zImage: no LOADED_HIGH */
	BZIMAGE_ERR_NOT_64BIT,           /* no XLF_KERNEL_64 entry */
	BZIMAGE_ERR_NOT_RELOCATABLE,     /* relocatable_kernel == 0 */
	BZIMAGE_ERR_BAD_ALIGNMENT,       /* kernel_alignment/min_alignment not sane powers of 2 */
	BZIMAGE_ERR_BAD_PREF_ADDRESS,    /* pref_address not aligned to kernel_alignment */
	BZIMAGE_ERR_BAD_INIT_SIZE,       /* init_size 0, below the code size, or huge */
	BZIMAGE_ERR_BAD_CMDLINE_SIZE,    /* cmdline_size == 0 */
	BZIMAGE_ERR_BAD_INITRD_ADDR_MAX, /* initrd_addr_max == 0 */
	BZIMAGE_ERR_BAD_VERSION_STRING,  /* version offset outside setup, unterminated, binary */
	_BZIMAGE_ERR_MAX,
} BzImageError;

/* What the loader needs from a validated image. Offsets are into the file. */
struct bzimage_info {
	uint16_t protocol;      /* e.g. 0x020f */
	uint32_t setup_size;    /* boot sector + setup sectors, bytes */
	uint32_t header_end;    /* end of the setup header, file offset */
	uint64_t kernel_offset; /* protected-mode kernel starts here (== setup_size) */
	uint64_t kernel_size;   /* bytes from kernel_offset to the end of the file */
	uint64_t syssize_bytes; /* syssize * 16 */
	uint8_t loadflags;
	uint16_t xloadflags;
	uint32_t kernel_alignment;
	uint8_t min_alignment; /* log2 */
	uint32_t initrd_addr_max;
	uint32_t cmdline_size;
	uint32_t init_size;
	uint64_t pref_address;
	bool can_load_above_4g;
	char version[BZIMAGE_VERSION_MAX]; /* "6.1.0-57-cloud-amd64 (debian-kernel@...) #1 ..." */
	char release[BZIMAGE_VERSION_MAX]; /* first word of version: what uname -r prints */
};

const char *bzimage_error_to_string(BzImageError e);
/* -errno for callers that speak errno: -EFBIG for TOO_LARGE, -EBADMSG for the rest. */
int bzimage_error_to_errno(BzImageError e);

/*
 * Validates an image of file_size bytes of which the first avail bytes are in
 * data (avail may be less than file_size: a prefix of BZIMAGE_SETUP_MAX_SIZE
 * bytes holds every header). On success fills *ret_info and returns BZIMAGE_OK;
 * on failure returns the error and leaves *ret_info untouched.
 */
BzImageError bzimage_parse_prefix(const void *data, size_t avail, uint64_t file_size,
                                  struct bzimage_info *ret_info);
/* The whole image is in memory. */
BzImageError bzimage_parse(const void *data, size_t size, struct bzimage_info *ret_info);

/*
 * Reads the header of the bzImage at path (only its setup area) and validates
 * it. Returns 0, -errno for I/O errors, or bzimage_error_to_errno() with
 * *ret_error set (ret_error may be NULL).
 */
int bzimage_parse_file(const char *path, struct bzimage_info *ret_info, BzImageError *ret_error);

/* The kernel release ("6.1.0-57-cloud-amd64") of the bzImage at path, newly
 * allocated. Same errors as bzimage_parse_file(). */
int bzimage_kernel_release(const char *path, char **ret_release, BzImageError *ret_error);
