/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The kexec_file_load(2) backend: the running kernel reads both files through
 * the descriptors we validated, checks the image (signature when KEXEC_SIG is
 * enforced), and builds purgatory with SHA-256 verification of every segment.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fileio.h"
#include "kernel-cmdline.h"
#include "kexec-backend.h"
#include "loader.h"
#include "log.h"
#include "macros.h"
#include "path-util.h"
#include "string-util.h"

/* include/uapi/linux/kexec.h; spelled out so the build does not depend on the
 * installed headers' version. */
#define KEXEC_FILE_UNLOAD       0x00000001
#define KEXEC_FILE_ON_CRASH     0x00000002
#define KEXEC_FILE_NO_INITRAMFS 0x00000004

static KexecFileSyscall syscall_func;
static void *syscall_userdata;

void kexec_file_set_syscall_for_test(KexecFileSyscall f, void *userdata) {
	syscall_func = f;
	syscall_userdata = userdata;
}

/* kexec_file_load(2), or the test's replacement: 0 or -errno. */
static int kexec_file_syscall(int kernel_fd, int initrd_fd, unsigned long cmdline_len,
                              const char *cmdline, unsigned long flags) {
	if (syscall_func)
		return syscall_func(kernel_fd, initrd_fd, cmdline_len, cmdline, flags,
		                    syscall_userdata);
#ifdef SYS_kexec_file_load
	if (syscall(SYS_kexec_file_load, kernel_fd, initrd_fd, cmdline_len, cmdline, flags) < 0)
		return -errno;
	return 0;
#else
	return -ENOSYS;
#endif
}

static int read_sysfs_u64(const char *root, const char *path, unsigned long long *ret) {
	_cleanup_free_ char *full = NULL;
	int r;

	r = path_prefix_root(root, path, &full);
	if (r < 0)
		return r;
	return read_u64_file(full, ret);
}

static int file_probe(const char *root, char **ret_reason) {
	unsigned long long v;
	const char *why;
	int r;

#ifndef SYS_kexec_file_load
	why = "this architecture has no kexec_file_load system call";
	r = -ENOSYS;
	goto out_reason;
#endif
	r = read_sysfs_u64(root, "/sys/kernel/kexec_loaded", &v);
	if (r < 0) {
		why = "the running kernel has no kexec support (no /sys/kernel/kexec_loaded)";
		r = -ENOSYS;
		goto out_reason;
	}
	r = read_sysfs_u64(root, "/proc/sys/kernel/kexec_load_disabled", &v);
	if (r >= 0 && v != 0) {
		why = "kexec is disabled (kernel.kexec_load_disabled=1)";
		r = -EPERM;
		goto out_reason;
	}
	return 0;

out_reason:
	if (ret_reason)
		*ret_reason = strdup(why);
	return r;
}

static int file_load(const char *root, const KexecImage *image) {
	_cleanup_free_ char *marked = NULL;
	unsigned long flags = 0;
	const char *cmdline = image->cmdline ?: "";
	int r;

	if (image->kernel_fd < 0)
		return -EBADF;
	/* The mark follows the caller's words: after a "--" it would be init's (loader.c). */
	if (kernel_cmdline_has_init_separator(cmdline))
		return -EINVAL;
	if (image->initrd_fd < 0)
		flags |= KEXEC_FILE_NO_INITRAMFS;
	/* The crash image carries the panic mark, as our loader's does: the crash kernel must
	 * know itself, or it would take itself for the staged kernel, "complete" the update
	 * inside the reservation and restore the VMs there. Any other image carries the
	 * handoff mark, for the boot after the handoff (the deferred units). */
	if (image->flags & KEXEC_IMAGE_PANIC)
		flags |= KEXEC_FILE_ON_CRASH;
	if (asprintf(&marked, "%s%s%s", cmdline, *cmdline ? " " : "",
	             image->flags & KEXEC_IMAGE_PANIC ? LOADER_PANIC_CMDLINE_MARK
	                                              : LOADER_HANDOFF_CMDLINE_MARK) < 0)
		return -ENOMEM;
	cmdline = marked;
	/* The kernel always verifies: a "fast" request cannot be honoured here. */
	if (image->mode != HANDOFF_MODE_VERIFIED)
		return -EOPNOTSUPP;
	/* The kernel hands its own memory map on: out of a crash kernel, only the
	 * reservation. It cannot be given the machine's full map. */
	if (image->memmap_dir)
		return -EOPNOTSUPP;

	r = kexec_file_syscall(image->kernel_fd, image->initrd_fd >= 0 ? image->initrd_fd : -1,
	                       strlen(cmdline) + 1, cmdline, flags);
	if (r < 0)
		return log_debug_errno(r, "kexec_file_load('%s') failed: %m", image->kernel_path);
	return 0;
}

static int file_unload(const char *root, unsigned flags) {
	unsigned long f = KEXEC_FILE_UNLOAD;

	if (flags & KEXEC_IMAGE_PANIC)
		f |= KEXEC_FILE_ON_CRASH;
	return kexec_file_syscall(-1, -1, 0UL, NULL, f);
}

static int file_is_loaded(const char *root, unsigned flags) {
	unsigned long long v;
	int r;

	r = read_sysfs_u64(root,
	                   flags & KEXEC_IMAGE_PANIC ? "/sys/kernel/kexec_crash_loaded"
	                                             : "/sys/kernel/kexec_loaded",
	                   &v);
	if (r < 0)
		return r == -ENOENT ? -ENOSYS : r;
	return v != 0;
}

const KexecBackend kexec_backend_file = {
	.name = "kexec_file",
	.probe = file_probe,
	.load = file_load,
	.unload = file_unload,
	.is_loaded = file_is_loaded,
	.supported_modes = HANDOFF_MODE_BIT(HANDOFF_MODE_VERIFIED),
	.test_only = false,
};
