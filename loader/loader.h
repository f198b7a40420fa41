/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * upgraded's own kexec loader: an x86_64 bzImage or an arm64 Image (with the
 * running kernel's device tree, /chosen rewritten) over the kexec_load syscall,
 * with our purgatory between the kernels. A library for the daemon's kexec backend:
 *
 *   LoaderUnusable why;
 *   if (loader_check_usable(root, &why) < 0 || why != LOADER_USABLE)
 *           -> fall back to kexec_file_load, report loader_unusable_to_string(why)
 *   loader_image_build(&opts, &img, &err);  -- stage: parse, place, hash (no syscall)
 *   loader_image_load(img);                 -- kexec_load (ENOSYS on kernels without kexec)
 *   loader_unload(panic);
 *
 * Every path the loader reads (/sys, /proc) is prefixed with opts.root, so the
 * tests run it against a crafted tree. Errors are named (LoaderError) with a
 * message, and map to -errno.
 */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arm64-image.h"
#include "boot-cpu.h"
#include "bzimage.h"
#include "handoff-mode.h"
#include "purgatory-abi.h"
#include "sha256.h"

/* The panic image's command line carries this mark before purgatory's stamps. The
 * crash kernel boots on whichever CPU panicked; bringing the others up from there
 * (INIT/SIPI to a CPU the dead kernel left in any state) can hang, which is why kdump
 * runs its capture kernel with one CPU: so does ours (it only loads and kexecs). */
#define LOADER_PANIC_CMDLINE_MARK   "nr_cpus=1 reset_devices upgraded.panic=1"
/* Every other (normal) image carries this one instead: the kernel it starts knows it
 * was booted by an update's handoff, for that one boot (upgraded-defer-generator(8)). */
#define LOADER_HANDOFF_CMDLINE_MARK "upgraded.handoff=1"
/* The most the loader appends to a caller's command line (" " disable_cpu_apicid=N
 * (boot-cpu.h) " " mark " " and the stamps key with its field): a caller's line must
 * leave this much room below the kernel's cmdline_size. */
#define LOADER_CMDLINE_APPENDED_MAX                                                              \
	(sizeof(BOOT_CPU_PARAM_MAX " " LOADER_PANIC_CMDLINE_MARK " " PURGATORY_STAMPS_KEY) - 1 + \
	 PURGATORY_STAMPS_FIELD_LEN)
_Static_assert(sizeof(LOADER_HANDOFF_CMDLINE_MARK) <= sizeof(LOADER_PANIC_CMDLINE_MARK),
               "LOADER_CMDLINE_APPENDED_MAX counts the longer mark");

/* Why kexec_load cannot be used here; the backend then uses kexec_file_load. */
typedef enum LoaderUnusable {
	LOADER_USABLE,
	LOADER_UNUSABLE_LOCKDOWN, /* lockdown integrity/confidentiality forbids kexec_load */
	LOADER_UNUSABLE_EFI_NO_RUNTIME_MAP, /* EFI boot without /sys/firmware/efi/runtime-map */
	LOADER_UNUSABLE_EFI_32BIT,          /* EFI boot on 32-bit firmware */
	LOADER_UNUSABLE_EFI_STATE,          /* EFI boot whose state (efi.h) cannot be read */
	LOADER_UNUSABLE_LOAD_DISABLED,      /* /proc/sys/kernel/kexec_load_disabled is 1 */
	_LOADER_UNUSABLE_MAX,
} LoaderUnusable;

typedef enum LoaderError {
	LOADER_OK,
	LOADER_ERR_BZIMAGE,              /* the kernel image is invalid (see bzimage_error) */
	LOADER_ERR_READ,                 /* kernel or initrd could not be read */
	LOADER_ERR_MEMMAP,               /* /sys/firmware/memmap missing or malformed */
	LOADER_ERR_TOO_MANY_E820,        /* more ranges than the zero page holds */
	LOADER_ERR_CMDLINE_TOO_LONG,     /* longer than the kernel's cmdline_size */
	LOADER_ERR_CMDLINE_INVALID,      /* control characters, a "--", or a stray stamps key */
	LOADER_ERR_NO_ROOM_KERNEL,       /* no aligned RAM hole for the kernel */
	LOADER_ERR_NO_ROOM_INITRD,       /* no RAM hole below initrd_addr_max */
	LOADER_ERR_NO_ROOM_PARAMS,       /* no RAM hole below 4 GiB for boot_params */
	LOADER_ERR_NO_ROOM_PURGATORY,    /* no RAM hole below 4 GiB for purgatory */
	LOADER_ERR_NO_CRASH_RESERVATION, /* panic image without a crashkernel= reservation */
	LOADER_ERR_PANIC_NOT_VERIFIED,   /* a panic image must be verified */
	LOADER_ERR_PMEM_HIDDEN,          /* persistent memory whose addresses /proc/iomem hides */
	LOADER_ERR_EFI_STATE,            /* EFI boot whose state (efi.h) cannot be read */
	LOADER_ERR_ARCH_UNSUPPORTED,     /* this build has no purgatory for the asked arch */
	LOADER_ERR_ARM64_IMAGE,          /* not a valid arm64 Image (ret_arm64_image_error) */
	LOADER_ERR_DTB_READ,             /* arm64: <root>/sys/firmware/fdt unreadable */
	LOADER_ERR_DTB_INVALID,          /* arm64: the device tree is malformed */
	LOADER_ERR_DTB_TOO_LARGE,        /* arm64: the device tree exceeds 2 MiB */
	LOADER_ERR_IOMEM,                /* arm64: no RAM in /proc/iomem nor in the DT */
	LOADER_ERR_TOO_MANY_RANGES,      /* arm64: more RAM or reserved ranges than the limits */
	LOADER_ERR_NO_ROOM_DTB,          /* arm64: no RAM hole for the DTB in the kernel's window */
	LOADER_ERR_NO_ROOM_ELFCOREHDR, /* arm64: no room for the ELF core header in the reservation */
	_LOADER_ERR_MAX,
} LoaderError;

/* Which kernel the image boots; the purgatory blob is this build's architecture's. */
typedef enum LoaderArch {
	LOADER_ARCH_DEFAULT, /* the build's architecture */
	LOADER_ARCH_X86_64,
	LOADER_ARCH_ARM64,
	_LOADER_ARCH_MAX,
	_LOADER_ARCH_INVALID = -EINVAL,
} LoaderArch;

#if defined(__aarch64__)
#define LOADER_ARCH_NATIVE LOADER_ARCH_ARM64
#else
#define LOADER_ARCH_NATIVE LOADER_ARCH_X86_64
#endif

const char *loader_arch_to_string(LoaderArch a); /* "x86_64", "arm64"; DEFAULT: the native one */
LoaderArch loader_arch_from_string(const char *s);

struct loader_options {
	LoaderArch arch;     /* 0 (LOADER_ARCH_DEFAULT): the build's */
	const char *root;    /* prefix for /sys and /proc; NULL or "/" for the host */
	int kernel_fd;       /* bzImage, read from its current offset 0 (pread) */
	int initrd_fd;       /* -1: no initrd */
	const char *cmdline; /* the new kernel's command line, without the stamps key */
	HandoffMode mode;
	bool panic;            /* crash image: KEXEC_ON_CRASH, always verified */
	uint16_t console_port; /* serial port for purgatory's mismatch line, 0: none */
	/* NULL: <root>/sys/firmware/memmap. Otherwise a directory laid out like it
	 * (N/start, N/end, N/type), not prefixed with root: the full map saved before
	 * a panic, for the ordinary kexec out of the crash kernel. */
	const char *memmap_dir;
	/* arm64: the parser's verdict when the build fails with LOADER_ERR_ARM64_IMAGE
	 * (may be NULL). */
	Arm64ImageError *ret_arm64_image_error;
};

struct loader_segment {
	const void *buf; /* owned by the image */
	size_t bufsz;
	uint64_t mem;   /* physical address, page aligned */
	uint64_t memsz; /* page aligned, >= bufsz; the rest is zero-filled */
};

enum {
	LOADER_SEG_KERNEL,
	LOADER_SEG_INITRD, /* absent (bufsz 0) without an initrd */
	LOADER_SEG_PARAMS, /* x86_64: boot_params page + command line; arm64: the DTB */
	LOADER_SEG_PURGATORY,
	LOADER_SEG_ELFCOREHDR, /* arm64 panic image: the ELF core header; absent otherwise */
	_LOADER_SEG_MAX,
	LOADER_SEG_DTB = LOADER_SEG_PARAMS,
};

struct loader_image;

const char *loader_unusable_to_string(LoaderUnusable u);
const char *loader_error_to_string(LoaderError e);
int loader_error_to_errno(LoaderError e);

/*
 * Decides whether kexec_load may be used on the host under root. Returns 0 with
 * *ret_reason set (LOADER_USABLE or why not), or -errno when it cannot tell.
 */
int loader_check_usable(const char *root, LoaderUnusable *ret_reason);

/*
 * Stage: reads and validates the kernel (and initrd), reads the memory map,
 * places every segment in RAM (inside the crash reservation for a panic image),
 * never in a persistent-memory range of <root>/proc/iomem (those are passed to
 * the new kernel as persistent memory, not RAM: loader/memrange.h),
 * builds boot_params and the command line with the stamps placeholder, records
 * the SHA-256 of every segment into purgatory's parameters. No syscall.
 * Returns 0, or -errno with *ret_error naming the cause (ret_error may be NULL;
 * for LOADER_ERR_BZIMAGE, loader_image_bzimage_error() is not available, so the
 * bzimage error is in *ret_bzimage_error when non-NULL).
 */
int loader_image_build(const struct loader_options *opts, struct loader_image **ret_image,
                       LoaderError *ret_error, BzImageError *ret_bzimage_error);

struct loader_image *loader_image_free(struct loader_image *img);

/* The segments as they will be passed to kexec_load (tests, diagnostics). */
size_t loader_image_segments(const struct loader_image *img,
                             const struct loader_segment **ret_segments);
uint64_t loader_image_entry(const struct loader_image *img);
const struct purgatory_params *loader_image_params(const struct loader_image *img);
const char *loader_image_cmdline(const struct loader_image *img);
/* NULL for an arm64 image. */
const struct bzimage_info *loader_image_bzimage(const struct loader_image *img);
/* NULL for an x86_64 image. */
const struct arm64_image_info *loader_image_arm64(const struct loader_image *img);
LoaderArch loader_image_arch(const struct loader_image *img);
/* The kernel release the image carries ("" when an arm64 Image has no banner). */
const char *loader_image_release(const struct loader_image *img);

/* kexec_load(entry, segments, KEXEC_ARCH_X86_64 or KEXEC_ARCH_AARCH64 [| KEXEC_ON_CRASH]).
 * -EOPNOTSUPP for an image of another architecture than the build's. -ENOSYS
 * when the running kernel has no kexec, -EPERM without CAP_SYS_BOOT or under
 * lockdown. */
int loader_image_load(const struct loader_image *img);

/* Unloads the normal (or crash) image: kexec_load with no segments. */
int loader_unload(bool panic);

/*
 * Switches a built image between verified and fast: the digests were recorded
 * at build time either way, so this only rewrites purgatory's mode (no file
 * I/O, no hashing); load the image again for the kernel to see it. A panic
 * image refuses anything but verified (-EINVAL, LOADER_ERR_PANIC_NOT_VERIFIED).
 */
int loader_image_set_mode(struct loader_image *img, HandoffMode mode);
bool loader_image_is_panic(const struct loader_image *img);

/* SHA-256 over the memory map placement depends on (/sys/firmware/memmap and
 * the crash reservation in /proc/iomem): equal digests mean a built image's
 * placement still holds. loader_image_memory_map_digest() is the one taken
 * when the image was built. */
int loader_memory_map_digest(const char *root, uint8_t ret[static SHA256_DIGEST_SIZE]);
const uint8_t *loader_image_memory_map_digest(const struct loader_image *img);

/*
 * Records in p what purgatory checks for segs (those with memsz 0 are left
 * out): each segment's address, file and memory size, the chunk size, and the
 * SHA-256 of every chunk of the file part, and in sha256_impl_request the
 * implementation loader_sha256_pick() found fastest, which hashes them here
 * too. -E2BIG with more segments than
 * purgatory takes, -EINVAL when a segment's bufsz exceeds its memsz.
 */
int loader_params_set_digests(struct purgatory_params *p, const struct loader_segment *segs,
                              size_t n);
/* The SHA-256 implementation this CPU runs fastest on the staged bytes: each one
 * it offers timed on the first MiB of the largest of segs (thread CPU time). */
Sha256Impl loader_sha256_pick(const struct loader_segment *segs, size_t n);
/* What purgatory covers in verified mode: every listed segment's memsz (the
 * file part hashed, the rest checked for zeros). */
uint64_t loader_params_verified_bytes(const struct purgatory_params *p);

/* Tests only (the lab's corruption test): flips one bit of the kernel
 * segment's first chunk digest, so a verified handoff must refuse and reset. */
void loader_image_corrupt_digest_for_test(struct loader_image *img);

/* Whether a normal (or crash) image is loaded, from /sys/kernel/kexec_*loaded. */
int loader_is_loaded(const char *root, bool panic);
