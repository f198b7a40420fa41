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

/* One line on p's console: "upgraded purgatory: MSG". */
void purgatory_console_line(const struct purgatory_params *p, const char *msg);
/* The line for an exception nothing should have raised (arm64's vectors). */
void purgatory_console_exception(const struct purgatory_params *p, unsigned vector, uint64_t esr,
                                 uint64_t elr, uint64_t far);

/* Formats the stamps field (exactly PURGATORY_STAMPS_FIELD_LEN characters, no
 * NUL) for mode char m and implementation char i. */
void purgatory_format_stamps(const struct purgatory_stamps *s, char mode, char impl,
                             char out[static PURGATORY_STAMPS_FIELD_LEN]);
/* The arm64 field: the above, then ",FFFFFFFF" (freq in Hz, lowercase hex). */
void purgatory_format_stamps_arm64(const struct purgatory_stamps *s, char mode, char impl,
                                   uint32_t freq,
                                   char out[static PURGATORY_STAMPS_FIELD_LEN_ARM64]);
