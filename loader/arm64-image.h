/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Parses and validates an arm64 kernel for a kexec load
 * (Documentation/arch/arm64/booting.rst, "Call the kernel image"): the 64-byte
 * Image header (code0/code1, text_offset, image_size, flags, magic "ARM\x64"),
 * after undoing what a distribution may have wrapped around it: Debian's arm64
 * vmlinuz is the bare Image (with its PE/EFI stub header, "MZ"); a gzip file
 * (Image.gz) or an EFI zboot image (a PE whose payload is a gzip'd Image) is
 * inflated first, never beyond ARM64_IMAGE_MAX_SIZE. Every rejection has a name
 * (Arm64ImageError) and a message.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Neither a file nor its inflated Image may be larger: no distribution kernel
 * comes close (Debian's 6.1 cloud Image is 27 MB). */
#define ARM64_IMAGE_MAX_SIZE        ((uint64_t)256 << 20)
/* image_size (what the kernel uses from its load address, BSS included) beyond this is
 * malformed. */
#define ARM64_IMAGE_MAX_IMAGE_SIZE  ((uint64_t)1 << 30)
/* text_offset is below the 2 MiB alignment of the base (0x80000 before 5.8, 0 since). */
#define ARM64_IMAGE_BASE_ALIGN      ((uint64_t)2 << 20)
#define ARM64_IMAGE_HEADER_SIZE     64
#define ARM64_IMAGE_MAGIC           0x644d5241u /* "ARM\x64", little endian */
#define ARM64_IMAGE_MAGIC_OFFSET    56
#define ARM64_IMAGE_TEXT_OFFSET_OFF 8
#define ARM64_IMAGE_SIZE_OFF        16
#define ARM64_IMAGE_FLAGS_OFF       24
/* flags: bit 0 the kernel's endianness (1: big), bits 1-2 its page size, bit 3 where
 * the 2 MiB aligned base may be (1: anywhere in RAM; 0: as low as possible). */
#define ARM64_IMAGE_FLAG_BE         (UINT64_C(1) << 0)
#define ARM64_IMAGE_FLAG_PAGE_SHIFT 1
#define ARM64_IMAGE_FLAG_PAGE_MASK  (UINT64_C(3) << ARM64_IMAGE_FLAG_PAGE_SHIFT)
#define ARM64_IMAGE_FLAG_PHYS_ANY   (UINT64_C(1) << 3)
#define ARM64_IMAGE_FLAGS_KNOWN     UINT64_C(0xf)
/* The release string the Image carries in its banner. */
#define ARM64_IMAGE_BANNER          "Linux version "
#define ARM64_IMAGE_RELEASE_MAX     128

/* EFI zboot (drivers/firmware/efi/libstub/zboot-header.S): "MZ", then "zimg", the
 * payload's offset and size (u32 at 8 and 12) and its compression ("gzip" at 24). */
#define ARM64_ZBOOT_MAGIC        "zimg"
#define ARM64_ZBOOT_MAGIC_OFF    4
#define ARM64_ZBOOT_PAYLOAD_OFF  8
#define ARM64_ZBOOT_PAYLOAD_SIZE 12
#define ARM64_ZBOOT_COMP_OFF     24
#define ARM64_ZBOOT_HEADER_SIZE  32

typedef enum Arm64ImageError {
	ARM64_IMAGE_OK,
	ARM64_IMAGE_ERR_TRUNCATED,         /* shorter than the 64-byte header */
	ARM64_IMAGE_ERR_TOO_LARGE,         /* file or inflated Image beyond ARM64_IMAGE_MAX_SIZE */
	ARM64_IMAGE_ERR_BAD_MAGIC,         /* no "ARM\x64" at offset 56 */
	ARM64_IMAGE_ERR_BIG_ENDIAN,        /* flags say a big-endian kernel */
	ARM64_IMAGE_ERR_NO_IMAGE_SIZE,     /* image_size 0: a pre-3.17 kernel, size unknown */
	ARM64_IMAGE_ERR_BAD_IMAGE_SIZE,    /* image_size below the file or beyond the limit */
	ARM64_IMAGE_ERR_BAD_TEXT_OFFSET,   /* text_offset not below 2 MiB or not 4 KiB aligned */
	ARM64_IMAGE_ERR_BAD_FLAGS,         /* reserved flag bits set */
	ARM64_IMAGE_ERR_COMPRESSED,        /* gzip or zboot data that does not inflate */
	ARM64_IMAGE_ERR_ZBOOT_UNSUPPORTED, /* a zboot payload compressed other than with gzip */
	_ARM64_IMAGE_ERR_MAX,
} Arm64ImageError;

/* How the file carried the Image. */
typedef enum Arm64ImageWrap {
	ARM64_IMAGE_WRAP_NONE,  /* the bare Image (with or without the PE stub) */
	ARM64_IMAGE_WRAP_GZIP,  /* Image.gz */
	ARM64_IMAGE_WRAP_ZBOOT, /* EFI zboot, gzip payload */
} Arm64ImageWrap;

struct arm64_image_info {
	uint64_t text_offset;
	uint64_t image_size; /* bytes the kernel needs from its load address */
	uint64_t flags;
	uint64_t file_size; /* of the (inflated) Image */
	unsigned page_size; /* 4096, 16384, 65536, or 0 when unspecified */
	bool phys_anywhere; /* ARM64_IMAGE_FLAG_PHYS_ANY */
	bool pe_stub;       /* starts with "MZ": the EFI stub */
	Arm64ImageWrap wrap;
	char release[ARM64_IMAGE_RELEASE_MAX]; /* "6.1.0-57-cloud-arm64", or "" when not found */
};

const char *arm64_image_error_to_string(Arm64ImageError e);
/* -EFBIG for TOO_LARGE, -EBADMSG for the rest. */
int arm64_image_error_to_errno(Arm64ImageError e);

/* Validates a bare Image of size bytes. Fills *ret_info on success only. */
Arm64ImageError arm64_image_parse(const void *data, size_t size, struct arm64_image_info *ret_info);

/*
 * Takes a file's bytes as read (*data, *size: the bare Image, Image.gz or zboot),
 * inflates them in place of the input when wrapped (the old buffer is freed), then
 * validates the Image. On failure *data and *size are left as they were.
 */
Arm64ImageError arm64_image_unwrap_parse(uint8_t **data, size_t *size,
                                         struct arm64_image_info *ret_info);

/* Whether the bytes look like an arm64 kernel in any of the accepted forms (a
 * cheap sniff on the first ARM64_IMAGE_HEADER_SIZE bytes, for the arch default). */
bool arm64_image_sniff(const void *data, size_t size);

/* The release of the arm64 kernel at path (read and inflated whole), newly allocated. */
int arm64_image_kernel_release(const char *path, char **ret_release, Arm64ImageError *ret_error);
