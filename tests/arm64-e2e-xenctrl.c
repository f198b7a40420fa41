/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * A stand-in for libxenctrl.so.4.17 in the arm64 end-to-end test's initramfs
 * (tests/arm64_e2e.py): Debian's arm64 kexec-tools links libxenctrl, which
 * pulls a dozen Xen libraries. kexec-tools asks xc_interface_open() whether it
 * runs under Xen; this one says no, as on any host without Xen, and every other
 * entry point fails. Symbol versions as the real library's
 * (tests/arm64-e2e-xenctrl.map).
 */

#include <errno.h>
#include <stddef.h>

/* Opaque to kexec-tools: it passes the address only. */
char xc__hypercall_buffer_HYPERCALL_BUFFER_NULL[64];

void *xc_interface_open(void *logger, void *dombuild_logger, unsigned flags);
void *xc_interface_open(void *logger, void *dombuild_logger, unsigned flags) {
	(void)logger;
	(void)dombuild_logger;
	(void)flags;
	return NULL;
}

int xc_interface_close(void *xch);
int xc_interface_close(void *xch) {
	(void)xch;
	return 0;
}

#define XC_FAIL(name)           \
	int name(void);         \
	int name(void) {        \
		errno = ENOSYS; \
		return -1;      \
	}

XC_FAIL(xc_get_max_cpus)
XC_FAIL(xc_version)
XC_FAIL(xc_kexec_exec)
XC_FAIL(xc_kexec_get_range)
XC_FAIL(xc_kexec_load)
XC_FAIL(xc_kexec_status)
XC_FAIL(xc_kexec_unload)

void *xc__hypercall_buffer_array_alloc(void);
void *xc__hypercall_buffer_array_alloc(void) {
	return NULL;
}

void *xc_hypercall_buffer_array_create(void);
void *xc_hypercall_buffer_array_create(void) {
	return NULL;
}

void xc_hypercall_buffer_array_destroy(void);
void xc_hypercall_buffer_array_destroy(void) {
}
