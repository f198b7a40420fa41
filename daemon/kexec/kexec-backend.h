/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The seam between the daemon and whatever puts the next kernel into memory.
 *
 * Backends:
 *   "kexec_file"  kexec_file_load(2): the running kernel parses, verifies and
 *                 places the image (its purgatory always checks SHA-256).
 *   "record"      TEST ONLY. Records every request as JSON in
 *                 <root>/run/upgraded/kexec-record.json and loads nothing. The
 *                 daemon accepts it only together with --root; reports and
 *                 Describe() name it.
 *   "kexec_load"  upgraded's own loader (loader/) and purgatory over kexec_load(2):
 *                 verified or fast handoff, the default (kexec-loader.h); when it
 *                 cannot be used here the daemon falls back to "kexec_file".
 *
 * All entry points return 0/positive on success, -errno on failure:
 *   -ENOSYS/-EPERM/-EOPNOTSUPP  kexec is not available on this kernel/system
 *   -ENOEXEC/-EKEYREJECTED/-EBADMSG  the kernel refused the image
 */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "handoff-mode.h"

typedef enum KexecImageFlags {
	KEXEC_IMAGE_PANIC = 1u << 2, /* the crash image; always verified */
} KexecImageFlags;

typedef struct KexecImage {
	int kernel_fd;           /* regular file, validated by image_open() */
	int initrd_fd;           /* -EBADF: none */
	const char *kernel_path; /* for logs and records only */
	const char *initrd_path;
	const char *cmdline; /* never NULL, may be "" */
	unsigned flags;      /* KexecImageFlags */
	HandoffMode mode;    /* verified (the zero value) or fast; a crash image is never fast */
	/* NULL: the running kernel's memory map. Otherwise a saved copy of
	 * /sys/firmware/memmap (N/start, N/end, N/type) to place the image in and
	 * hand to the new kernel: the crash kernel sees only its reservation, the
	 * kernel it starts must get the whole machine. Backends that cannot pass a
	 * map of their own refuse it with -EOPNOTSUPP. */
	const char *memmap_dir;
} KexecImage;

typedef struct KexecBackend {
	const char *name;
	/* Whether the backend can work here. 0 when usable; otherwise a negative errno
	 * and *ret_reason, a sentence saying why (caller frees). */
	int (*probe)(const char *root, char **ret_reason);
	int (*load)(const char *root, const KexecImage *image);
	/* Unloads the normal image, or the crash image with KEXEC_IMAGE_PANIC. */
	int (*unload)(const char *root, unsigned flags);
	/* 1 when an image (crash image with KEXEC_IMAGE_PANIC) is loaded, 0 when not. */
	int (*is_loaded)(const char *root, unsigned flags);
	/* Switches the loaded normal image to mode without reading or hashing anything;
	 * NULL when the backend's image has no mode to switch. */
	int (*set_mode)(const char *root, HandoffMode mode);
	/* Bytes purgatory hashes in verified mode for the loaded normal image; NULL when
	 * the backend cannot say (the kernel's own purgatory). */
	uint64_t (*verified_bytes)(void);
	/* Whether the loaded normal image holds the very bytes hashed at stage, so that
	 * later changes to the files cannot matter; NULL: never (the files are read again). */
	bool (*holds_staged_bytes)(void);
	/* 1 when the loaded normal image was placed for the memory map the host has now,
	 * 0 when the map changed, < 0 when unknown; NULL: the backend places nothing itself. */
	int (*memory_map_unchanged)(const char *root);
	/* Which handoff modes it can do (HANDOFF_MODE_BIT() of each). */
	unsigned supported_modes;
	/* true for backends that must never run outside tests. */
	bool test_only;
} KexecBackend;

extern const KexecBackend kexec_backend_file;
extern const KexecBackend kexec_backend_loader;
extern const KexecBackend kexec_backend_record;

/* Errors meaning "kexec cannot work on this system" rather than "bad image". */
static inline bool kexec_errno_is_unavailable(int r) {
	return r == -ENOSYS || r == -EPERM || r == -EOPNOTSUPP || r == -EACCES;
}

/* Errors meaning the kernel refused this particular image. */
static inline bool kexec_errno_is_bad_image(int r) {
	return r == -ENOEXEC || r == -EKEYREJECTED || r == -EBADMSG || r == -ENOKEY;
}

/* Tests: replaces the kexec_file_load(2) system call of the "kexec_file" backend (NULL
 * restores it), so that no test touches the running kernel's kexec state. f returns 0 or
 * -errno and sees the arguments exactly as the kernel would. */
typedef int (*KexecFileSyscall)(int kernel_fd, int initrd_fd, unsigned long cmdline_len,
                                const char *cmdline, unsigned long flags, void *userdata);
void kexec_file_set_syscall_for_test(KexecFileSyscall f, void *userdata);

/* By name; NULL when unknown. */
const KexecBackend *kexec_backend_find(const char *name);

/* A crash kernel reservation exists (<root>/sys/kernel/kexec_crash_size > 0). */
bool kexec_crash_reserved(const char *root);

/*
 * The default backend: upgraded's own loader (kexec_load) when
 * loader_check_usable() and the kernel allow it, otherwise kexec_file_load.
 * *ret_backend is the one to use; *ret_status is its probe result (< 0: not even
 * the fallback works here); *ret_reason says why (NULL when the first choice
 * works); *ret_fallback is true when kexec_file was chosen because kexec_load
 * cannot be used. ret_reason is newly allocated.
 */
int kexec_backend_select(const char *root, const KexecBackend **ret_backend, int *ret_status,
                         char **ret_reason, bool *ret_fallback);
