/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The device tree an arm64 kernel is booted with, through libfdt (no parser of
 * our own): the running kernel's (<root>/sys/firmware/fdt) read with a limit
 * and checked whole, what the loader learns from it (RAM, what the firmware and
 * the old kernel reserved, the console, PSCI), and the copy the next kernel
 * gets, with /chosen rewritten. Private to the loader.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memrange.h"
#include "purgatory-abi.h"

/* booting.rst: "The device tree blob (dtb) must be placed on an 8-byte boundary and
 * must not exceed 2 megabytes in size." Read and written blobs alike. */
#define ARM64_FDT_MAX_SIZE   ((size_t)2 << 20)
#define ARM64_FDT_PATH       "/sys/firmware/fdt"
#define ARM64_FDT_KASLR_SIZE 8  /* /chosen/kaslr-seed: one u64 */
#define ARM64_FDT_RNG_SIZE   64 /* /chosen/rng-seed: bytes for the next kernel's pool */
#define ARM64_FDT_MAX_RANGES 64 /* /memory, /reserved-memory and /memreserve/ entries */

typedef enum Arm64FdtError {
	ARM64_FDT_OK,
	ARM64_FDT_ERR_READ,      /* <root>/sys/firmware/fdt missing or unreadable */
	ARM64_FDT_ERR_TOO_LARGE, /* input or result beyond ARM64_FDT_MAX_SIZE */
	ARM64_FDT_ERR_INVALID,   /* libfdt's full check refuses the blob */
	ARM64_FDT_ERR_RANGES,    /* a reg property malformed, or more than the limit */
	ARM64_FDT_ERR_REWRITE,   /* libfdt refused an edit of /chosen */
	_ARM64_FDT_ERR_MAX,
} Arm64FdtError;

const char *arm64_fdt_error_to_string(Arm64FdtError e);

/* What the next kernel's /chosen says. */
struct arm64_fdt_chosen {
	const char *bootargs;
	uint64_t initrd_start, initrd_end; /* [start, end); both 0: no initrd (deleted) */
	uint8_t kaslr_seed[ARM64_FDT_KASLR_SIZE];
	uint8_t rng_seed[ARM64_FDT_RNG_SIZE];
	/* A panic image: linux,elfcorehdr and linux,usable-memory-range (the crash
	 * reservation). A normal image has both deleted. */
	bool panic;
	uint64_t elfcorehdr_addr, elfcorehdr_size;
	const struct mem_range *usable; /* inclusive ends */
	size_t nr_usable;
};

/* The UART and reset the purgatory uses (purgatory-abi.h's PURGATORY_CONSOLE_*,
 * PURGATORY_RESET_*), from /chosen/stdout-path and /psci/method. */
struct arm64_fdt_platform {
	uint32_t console_kind;
	uint64_t console_base; /* 0: no console */
	uint32_t reset_method;
};

/* The CPUs purgatory may hash on (docs/loader.md, "arm64: the CPUs"): the PSCI
 * conduit of a /psci node compatible with "arm,psci-0.2" or later (PSCI 0.1 has
 * no standard function numbers: none), and the MPIDR of each /cpus/cpu node
 * with enable-method "psci" and no status other than "okay", in DT order, at
 * most PURGATORY_MAX_CPUS (more are left out: *truncated). */
struct arm64_fdt_cpus {
	uint32_t psci_conduit; /* PURGATORY_PSCI_*; NONE: nr is 0 */
	uint32_t nr;
	bool truncated;
	uint64_t mpidr[PURGATORY_MAX_CPUS];
};

/* Validates a blob of size bytes (header, totalsize <= size, the whole structure). */
Arm64FdtError arm64_fdt_check(const void *fdt, size_t size);

/* Reads and validates <root>/sys/firmware/fdt. -errno with *ret_error set. */
int arm64_fdt_read(const char *root, uint8_t **ret, size_t *ret_size, Arm64FdtError *ret_error);

/* RAM as the /memory nodes (device_type "memory") describe it, sorted. */
Arm64FdtError arm64_fdt_memory(const void *fdt, struct mem_range *ret, size_t max, size_t *ret_n);

/* What no segment may overlap: the /memreserve/ entries and the reg of every
 * /reserved-memory child, sorted. */
Arm64FdtError arm64_fdt_reserved(const void *fdt, struct mem_range *ret, size_t max, size_t *ret_n);

/* The console (PL011 or 16550 behind /chosen/stdout-path) and the PSCI conduit. */
void arm64_fdt_platform(const void *fdt, struct arm64_fdt_platform *ret);

/* The PSCI conduit and the CPUs (above); a malformed node counts as absent. */
void arm64_fdt_cpus(const void *fdt, struct arm64_fdt_cpus *ret);

/*
 * A new blob (malloc'd, packed, at most ARM64_FDT_MAX_SIZE) that is fdt with /chosen
 * rewritten as c says: bootargs, linux,initrd-start/-end (or deleted), kaslr-seed,
 * rng-seed, and for a panic image linux,elfcorehdr and linux,usable-memory-range
 * (deleted otherwise). Every other property, the UEFI ones (linux,uefi-*) among
 * them, is kept as it was. *ret_bootargs_off is where bootargs' value starts in
 * the new blob. Nothing is returned on failure.
 */
Arm64FdtError arm64_fdt_rewrite(const void *fdt, const struct arm64_fdt_chosen *c, uint8_t **ret,
                                size_t *ret_size, size_t *ret_bootargs_off);
