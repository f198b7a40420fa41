/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Purgatory's logic, separated from the machine: purgatory.c decides (check
 * the contract, verify digests, write stamps, report a mismatch), the arch
 * hooks below touch the hardware. The real hooks (arch-x86_64.c) run between
 * the kernels; the unit tests link purgatory.c with fakes of them.
 */

#include <stdbool.h>
#include <stdint.h>

#include "purgatory-abi.h"

/* Hardware hooks. */
uint64_t purgatory_arch_rdtsc(void);
void purgatory_arch_outb(uint16_t port, uint8_t value);
uint8_t purgatory_arch_inb(uint16_t port);
/* Resets the machine so firmware boots its default kernel. Never returns. */
__attribute__((noreturn)) void purgatory_arch_reset(void);

/*
 * Runs purgatory's checks on p. Returns only when the new kernel may be
 * entered: the contract is intact and, in verified mode, every digest matched.
 * Otherwise it writes one line to the serial console (when p names one) and
 * calls purgatory_arch_reset(). Writes the stamps into p and into the command
 * line placeholder.
 */
void purgatory_main(struct purgatory_params *p);

/* Formats the stamps field (exactly PURGATORY_STAMPS_FIELD_LEN characters, no
 * NUL) for mode char m and implementation char i. */
void purgatory_format_stamps(const struct purgatory_stamps *s, char mode, char impl,
                             char out[static PURGATORY_STAMPS_FIELD_LEN]);
