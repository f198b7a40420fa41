/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The machine's boot CPU (BSP) and the CPU the running kernel booted on. They differ after a
 * panic on another CPU: the crash kernel starts on the CPU that panicked, and the dead kernel
 * left the BSP halted in its NMI handler. A kernel started from there must not bring the BSP
 * up: INIT sent to the BSP restarts it in the firmware, which resets the machine (the lab saw
 * QEMU reset under OVMF). The kernel's answer, used by kdump, is disable_cpu_apicid=<BSP> on
 * the command line; it is ignored by a kernel that runs on that CPU. Ours:
 *   - a crash image always carries disable_cpu_apicid=<BSP>, so that the crash kernel knows
 *     which CPU the machine booted on (its nr_cpus=1 starts no other CPU anyway);
 *   - any image loaded by a kernel whose own command line names a BSP it is not running on
 *     carries it too: the BSP stays parked until the machine reboots, and the host has one
 *     CPU less until then (the report says so, docs/state-machine.md "The panic path").
 *
 * Read below a root (tests use crafted trees):
 *   /proc/cpuinfo   "apicid : N" of "processor : 0": the CPU this kernel booted on
 *   /proc/cmdline   disable_cpu_apicid=N (the last one counts, as in the kernel)
 */

#include <stdbool.h>
#include <stdint.h>

#define BOOT_CPU_PARAM     "disable_cpu_apicid="
/* The longest " disable_cpu_apicid=N" the loader appends (a 32-bit x2APIC id). */
#define BOOT_CPU_PARAM_MAX " " BOOT_CPU_PARAM "4294967295"

typedef struct BootCpu {
	bool known;       /* false: /proc/cpuinfo unreadable or without processor 0's apicid */
	uint32_t bsp;     /* the machine's boot CPU: the command line's parameter, else running */
	uint32_t running; /* the CPU this kernel booted on (processor 0) */
} BootCpu;

/* processor 0's "apicid" in a /proc/cpuinfo text. -EBADMSG when absent or malformed. */
int boot_cpu_parse_cpuinfo(const char *text, uint32_t *ret);

/* The last disable_cpu_apicid=N word of a command line (decimal or 0x hex, as the kernel's
 * get_option() takes it). -ENOENT when there is none, -EBADMSG when malformed. */
int boot_cpu_parse_cmdline(const char *cmdline, uint32_t *ret);

/* Both facts below root (NULL: "/"). Unreadable or malformed files leave ret->known false;
 * only -ENOMEM is an error. */
int boot_cpu_read(const char *root, BootCpu *ret);

/* Whether a kernel started from here must be told to leave the BSP alone. */
static inline bool boot_cpu_parked(const BootCpu *b) {
	return b->known && b->bsp != b->running;
}
