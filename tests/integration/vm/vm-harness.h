/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once
/*
 * What the VM integration tests and the keep-ram benchmark share, run inside private-libvirtd
 * (LIBVIRT_TEST_URI, LIBVIRT_TEST_WORKDIR): guests defined and started from a boot image,
 * guest memory read through the QEMU monitor, the domain's state, and memguest's status block
 * and self-verify (docs/memguest.md).
 */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <libvirt/libvirt.h>

#include "../check.h"

/* memguest's status block (docs/memguest.md): 32-bit words of guest-physical memory. */
#define MG_TICKS        0x504
#define MG_STATE        0x50c
#define MG_MIB          0x510
#define MG_SUM          0x514
#define MG_LAST         0x518
#define MG_VERIFIES     0x51c
#define MG_STATE_READY  2
#define MG_VERIFY_OK    1
#define MG_FILL_TIMEOUT 900.0

/* CLOCK_MONOTONIC in seconds. */
double harness_now(void);

/* A 32-bit word of guest-physical memory (HMP "xp"), -1 when it cannot be read. */
int64_t harness_read_word(virConnectPtr conn, const char *name, unsigned long addr);

/* virDomainState of name, -1 when it does not exist. */
int harness_state(virConnectPtr conn, const char *name);

/* virDomainHasManagedSaveImage() of name: 1, 0, or -1 when it does not exist. */
int harness_has_image(virConnectPtr conn, const char *name);

/* Defines and starts name (TCG, pc, one vCPU) with mib MiB of RAM, its IDE disk a copy of
 * image in LIBVIRT_TEST_WORKDIR; shared: file-backed shared RAM in memory_backing_dir.
 * 0, or -1 with libvirt's error set. */
int harness_define_and_start(virConnectPtr conn, const char *image, const char *name, unsigned mib,
                             bool shared);

/* The median of v[0..n) (sorts v). */
double harness_median(double *v, int n);

/* Waits until word addr of name equals want (with at_least: reaches it), at most timeout
 * seconds; returns the last value read. */
int64_t harness_mg_wait(virConnectPtr conn, const char *name, unsigned long addr, int64_t want,
                        bool at_least, double timeout);

/* Asks memguest name to verify every filled page (key V) and waits for its answer; prints a
 * line naming phase. true when the guest answered ok. */
bool harness_mg_verify(virConnectPtr conn, const char *name, const char *phase);
