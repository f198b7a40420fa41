/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Purgatory's logic, separated from the machine: purgatory.c decides (check
 * the contract, verify digests, write stamps, report a mismatch), the arch
 * hooks below touch the hardware. The real hooks (arch-x86_64.c,
 * arm64/arch-arm64.c) run between the kernels; the unit tests link
 * purgatory.c with fakes of them.
 */

#include <stdbool.h>
#include <stdint.h>

#include "purgatory-abi.h"
#include "sha256.h"

/*
 * One verification shared by several CPUs (arm64, docs/purgatory.md): each
 * CPU claims the next chunk from `next` with an atomic add, hashes it into
 * digest[], then sets done[] (a release store the boot CPU reads with
 * acquire). Only the boot CPU compares digests. Lives in purgatory's own
 * memory, never in the parameter block.
 */
struct purgatory_work {
	const struct purgatory_params *p;
	Sha256Impl impl;
	uint32_t next; /* the next chunk to claim */
	uint32_t stop; /* set by the boot CPU when it stops waiting: claim no more */
	uint32_t cpus; /* CPUs that finished a chunk */
	uint8_t done[PURGATORY_MAX_CHUNKS];
	uint8_t digest[PURGATORY_MAX_CHUNKS][SHA256_DIGEST_SIZE];
};

/* Hardware hooks. */
/* The stamps' counter: the TSC (x86_64), CNTVCT_EL0 (arm64). */
uint64_t purgatory_arch_counter(void);
/* Its frequency in Hz when the CPU says (arm64: CNTFRQ_EL0), else 0. */
uint32_t purgatory_arch_counter_freq(void);
void purgatory_arch_outb(uint16_t port, uint8_t value);
uint8_t purgatory_arch_inb(uint16_t port);
/* Device memory at a physical address, width 1 or 4 bytes (the UARTs). */
uint32_t purgatory_arch_mmio_read(uint64_t addr, unsigned width);
void purgatory_arch_mmio_write(uint64_t addr, unsigned width, uint32_t value);
/* Before the segments are read: arm64 turns the MMU and the caches on over
 * an identity map of what purgatory touches (a no-op on x86_64). */
void purgatory_arch_map(struct purgatory_params *p);
/* [addr, addr + size) leaves the caches for the next kernel: arm64 cleans and
 * invalidates it to the point of coherency by VA (a no-op on x86_64). */
void purgatory_arch_clean(uint64_t addr, uint64_t size);
/* Starts the other CPUs on w (arm64: PSCI CPU_ON of the CPUs p lists, each
 * running purgatory_work_run() and then CPU_OFF); returns how many started.
 * 0 (x86_64, one CPU, no PSCI, the MMU off): the caller hashes alone. */
unsigned purgatory_arch_cpus_start(struct purgatory_params *p, struct purgatory_work *w);
/* Waits, bounded, until every CPU started is off; returns how many are not. */
unsigned purgatory_arch_cpus_stop(struct purgatory_params *p);
/* Resets the machine so firmware boots its default kernel, by p's
 * reset_method. Never returns. */
__attribute__((noreturn)) void purgatory_arch_reset(const struct purgatory_params *p);

/*
 * Runs purgatory's checks on p. Returns only when the new kernel may be
 * entered: the contract is intact and, in verified mode, every digest matched.
 * Otherwise it writes one line to the serial console (when p names one) and
 * calls purgatory_arch_reset(). Writes the stamps into p and into the command
 * line placeholder.
 */
void purgatory_main(struct purgatory_params *p);

/* Claims and hashes chunks of w until none is left or w->stop is set; the
 * most counter ticks one chunk took (the boot CPU's measure of "in time"),
 * and in *ret_hashed (when not NULL) whether this CPU hashed any. */
uint64_t purgatory_work_run(struct purgatory_work *w, bool *ret_hashed);

/* One line on p's console: "upgraded purgatory: MSG". */
void purgatory_console_line(const struct purgatory_params *p, const char *msg);
/* The line for an exception nothing should have raised (arm64's vectors). */
void purgatory_console_exception(const struct purgatory_params *p, unsigned vector, uint64_t esr,
                                 uint64_t elr, uint64_t far);

/* Formats the stamps field (exactly PURGATORY_STAMPS_FIELD_LEN characters, no
 * NUL) for mode char m and implementation char i. */
void purgatory_format_stamps(const struct purgatory_stamps *s, char mode, char impl,
                             char out[static PURGATORY_STAMPS_FIELD_LEN]);
/* The arm64 field: the above, then ",FFFFFFFF,CC,LL" (freq in Hz, the CPUs
 * that hashed, the secondaries left on; lowercase hex). */
void purgatory_format_stamps_arm64(const struct purgatory_stamps *s, char mode, char impl,
                                   uint32_t freq, uint32_t cpus, uint32_t left_on,
                                   char out[static PURGATORY_STAMPS_FIELD_LEN_ARM64]);
