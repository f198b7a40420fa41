/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The image as the loader's architecture paths build it (loader.c: x86_64,
 * loader-arm64.c: arm64). Private to the loader. */

#include "arm64-image.h"
#include "bzimage.h"
#include "efi.h"
#include "loader.h"
#include "sha256.h"

#define LOADER_PAGE_SIZE 4096ULL

struct loader_image {
	LoaderArch arch;               /* never LOADER_ARCH_DEFAULT */
	struct bzimage_info bz;        /* x86_64 */
	struct arm64_image_info arm64; /* arm64 */
	uint8_t *kernel_file;          /* whole bzImage, or the (inflated) arm64 Image */
	size_t kernel_file_size;
	uint8_t *initrd;
	size_t initrd_size;
	uint8_t *params_seg; /* x86_64: zero page + command line; arm64: the DTB */
	size_t params_seg_size;
	uint8_t *purgatory_seg;
	uint8_t *elfcorehdr; /* arm64 panic image */
	char *cmdline;       /* x86_64: points into params_seg; arm64: its own copy */
	struct loader_segment segments[_LOADER_SEG_MAX];
	size_t nr_segments;
	uint64_t entry;
	bool panic;
	struct efi_state *efi;                     /* NULL on a BIOS boot */
	size_t efi_offset;                         /* where the EFI part starts in params_seg */
	uint8_t memmap_digest[SHA256_DIGEST_SIZE]; /* of the map the segments were placed in */
};

static inline uint64_t loader_align_up(uint64_t v, uint64_t a) {
	return (v + a - 1) & ~(a - 1);
}

/* The whole regular file behind fd (pread from 0), at most max bytes: -EFBIG beyond. */
int loader_read_fd_all(int fd, uint64_t max, uint8_t **ret, size_t *ret_size);

/* The purgatory blob for arch: this build carries its own architecture's only
 * (-EOPNOTSUPP for the other). A seam for tests (-Wl,--wrap). */
int loader_purgatory_blob(LoaderArch arch, const uint8_t **ret_blob, size_t *ret_size);

/* The command line the new kernel gets: the caller's, the handoff (or panic) mark,
 * extra (x86: disable_cpu_apicid=, or ""), and the stamps key with template. At most
 * max bytes (without the NUL): LOADER_ERR_CMDLINE_TOO_LONG beyond. */
int loader_build_cmdline(const struct loader_options *o, const char *extra, const char *template,
                         size_t max, char **ret, size_t *ret_field_offset, LoaderError *ret_error);

/* arm64: steps 1 to 8 of loader_image_build() into img (loader-arm64.c). */
int loader_image_build_arm64(const struct loader_options *o, struct loader_image *img,
                             LoaderError *ret_error);
/* arm64: the digest of the placement inputs (/proc/iomem's RAM, reserved, crash). */
int loader_arm64_memory_map_digest(const char *root, uint8_t ret[static SHA256_DIGEST_SIZE]);
