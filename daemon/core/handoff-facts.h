/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The facts the policy weighs before a fast handoff (docs/policy.md, HandoffFacts): the
 * one place they are gathered. Besides what the backend holds, the IOMMU and the taint
 * flags, these are the host's error counters, machine checks and EDAC memory errors
 * since boot. Each fact is either measured or unknown, never guessed:
 *
 *   hardware errors, by architecture (HandoffFacts.architecture):
 *   - x86_64, machine checks: the kernel must handle them
 *     (/sys/devices/system/machinecheck exists, i.e. CONFIG_X86_MCE), then the count
 *     is the MCE (exceptions), THR (threshold: corrected errors over the bank's
 *     limit) and DFR (deferred errors) rows of /proc/interrupts summed over CPUs,
 *     plus the kernel log's "[Hardware Error]" records (every logged event, polled
 *     corrected ones included, is printed with that prefix).
 *   - arm64: synchronous external aborts, SErrors and RAS extension records reach
 *     the kernel through firmware first (ACPI APEI GHES), which logs every one as a
 *     "[Hardware Error]" record: a GHES device must be bound
 *     (/sys/bus/platform/drivers/GHES/GHES.<N>), then the count is those records.
 *   The log counts only when it is complete since boot: it starts at sequence 0
 *   with no gap.
 *   EDAC: the sum of ce_count + ue_count of every memory controller in
 *     /sys/devices/system/edac/mc/mc<N>; unknown without any controller (no EDAC
 *     driver watches the memory). The same on both architectures.
 * A fact that stays unknown says why (HandoffFacts.mce_unknown, .edac_unknown).
 *
 * The health_* parsers are pure; handoff_facts_gather() reads the files below a root
 * ("--root").
 * Return 0 / -errno; ret_* are written only on success.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kexec-backend.h"
#include "policy.h"

/* The MCE, THR and DFR rows of /proc/interrupts, summed. -ENOENT without an
 * MCE row (the kernel counts no machine checks), -EBADMSG on a malformed row. */
int health_parse_interrupts(const char *text, uint64_t *ret);

/* "[Hardware Error]" records in /dev/kmsg text (one "PRI,SEQ,TS,FLAGS;MSG"
 * record per line, continuation lines start with a space). -ESTALE when the
 * records do not start at sequence 0 or skip one (overwritten: the log is not
 * complete since boot), -EBADMSG on a record that is not in that format. */
int health_count_kmsg_hw_errors(const char *text, size_t size, uint64_t *ret);

/* Hardware errors since boot on a host of ARCH ("x86_64", "arm64") from the files
 * below root (see above). On failure *ret_why says why the count is unknown (a static
 * string): -ENOENT when the kernel has no source of them, -EOPNOTSUPP for another
 * architecture, else the read or parse error. */
int health_hw_errors(const char *root, const char *arch, uint64_t *ret, const char **ret_why);

/* Sum of ce_count + ue_count below DIR (/sys/devices/system/edac/mc).
 * -ENOENT when there is no mc<N>; -EBADMSG when a counter is unreadable. */
int health_edac_errors(const char *dir, uint64_t *ret);

/*
 * Whether the IOMMU translates every device's DMA, from the files below root: an IOMMU unit
 * is registered (/sys/class/iommu/<unit>), there is at least one IOMMU group, every group's
 * default domain (/sys/kernel/iommu_groups/N/type) translates ("DMA", "DMA-FQ", or
 * "unmanaged" and "blocked", owned by a driver such as VFIO), and the command line
 * (/proc/cmdline) does not ask for passthrough (iommu=pt, iommu.passthrough=1). An
 * "identity" group (passthrough: the device writes physical memory directly) or a group
 * whose type cannot be read means false. A missing root means false.
 */
bool health_iommu_translates(const char *root);

/* THE facts the policy weighs before a handoff (policy_decide_handoff()), gathered from
 * the files below root and what backend holds; cheap and honest to give at commit time.
 * Everything not measured stays zero ("unknown"), which never allows fast. */
void handoff_facts_gather(const char *root, const KexecBackend *backend, HandoffFacts *ret);
