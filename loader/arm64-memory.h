/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The running arm64 machine's memory as the loader places segments in it, read as
 * kexec-tools' arm64 port does: /proc/iomem's top-level "System RAM" ranges, every
 * "reserved" range (the old kernel's memblock reservations and no-map firmware
 * regions, nested or not) and the "Crash kernel" reservation; the device tree's
 * /memory nodes when /proc/iomem has no RAM. And the ELF core header a crash
 * kernel is given. Private to the loader.
 */

#include <stddef.h>
#include <stdint.h>

#include "memrange.h"
#include "sha256.h"

#define ARM64_MEMORY_MAX_RAM      128
#define ARM64_MEMORY_MAX_RESERVED 512
#define ARM64_MEMORY_MAX_CRASH    8
#define IOMEM_RESERVED            "reserved"
#define IOMEM_CRASH               "Crash kernel"

struct arm64_memory {
	struct mem_range ram[ARM64_MEMORY_MAX_RAM]; /* inclusive ends, sorted */
	size_t nr_ram;
	struct mem_range reserved[ARM64_MEMORY_MAX_RESERVED];
	size_t nr_reserved;
	struct mem_range crash[ARM64_MEMORY_MAX_CRASH];
	size_t nr_crash;
};

/* Parses an /proc/iomem text into m (zeroed first). -E2BIG past a limit; -EPERM when
 * every address is hidden (read without CAP_SYS_ADMIN). */
int arm64_memory_parse_iomem(const char *data, size_t size, struct arm64_memory *m);

/* <root>/proc/iomem into m; a missing file leaves m empty (0). */
int arm64_memory_read_iomem(const char *root, struct arm64_memory *m);

/* The SHA-256 of m's ranges (what placement depended on). */
void arm64_memory_digest(const struct arm64_memory *m, uint8_t ret[static SHA256_DIGEST_SIZE]);

/*
 * The ELF core header (ELF64, ET_CORE, EM_AARCH64) of the crashed kernel's memory:
 * a PT_NOTE for vmcoreinfo and each CPU's crash notes that <root>/sys names
 * (/sys/kernel/vmcoreinfo, /sys/devices/system/cpu/cpuN/crash_notes; absent ones
 * are left out), and a PT_LOAD per System RAM range with the crash reservation cut
 * out (p_paddr = p_offset = the physical address; p_vaddr 0). Newly allocated.
 */
int arm64_memory_elfcorehdr(const char *root, const struct arm64_memory *m, uint8_t **ret,
                            size_t *ret_size);
