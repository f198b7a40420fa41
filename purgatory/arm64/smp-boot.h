/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What a secondary CPU reads with its MMU off when PSCI CPU_ON starts it in
 * purgatory (entry.S, purgatory_secondary_entry): the boot CPU's translation
 * regime, register by register, cleaned to the point of coherency before any
 * CPU_ON. Offsets for entry.S, asserted against the struct in smp-arm64.c.
 */

#define SMP_BOOT_EL    0  /* the boot CPU's CurrentEL */
#define SMP_BOOT_HCR   8  /* HCR_EL2 (EL2 only): E2H as on the boot CPU */
#define SMP_BOOT_MAIR  16 /* MAIR, TCR, TTBR0, SCTLR of the regime */
#define SMP_BOOT_TCR   24
#define SMP_BOOT_TTBR0 32
#define SMP_BOOT_SCTLR 40
#define SMP_BOOT_CPACR 48 /* CPACR_EL1 at EL1, CPTR_EL2 at EL2: FP/SIMD on */
#define SMP_BOOT_VBAR  56 /* purgatory_secondary_vectors */
#define SMP_BOOT_SMC   64 /* nonzero: PSCI by SMC, else HVC */
#define SMP_BOOT_SIZE  72

#define PSCI_0_2_CPU_OFF    0x84000002
#define PSCI_0_2_CPU_OFF_HI 0x8400
#define PSCI_0_2_CPU_OFF_LO 0x0002
