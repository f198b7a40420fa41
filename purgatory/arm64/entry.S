/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * arm64 purgatory's entry and exit (docs/purgatory.md, "arm64").
 *
 * The old kernel's relocate_kernel (or cpu_soft_restart on the panic path)
 * branches to offset 0 of the blob with the MMU and the D-cache off, at EL1,
 * or at EL2 (through the hyp stub's HVC_SOFT_RESTART when the old kernel ran
 * nVHE, directly with HCR_EL2.E2H set when it ran VHE), interrupts masked.
 * Its x0..x3 (the DTB of kexec_file_load, 0 for kexec_load) are not used: the
 * parameter block says where the DTB is.
 *
 * Here: our stack, then C (arch-arm64.c: FP/SIMD access, vectors, checks,
 * MMU on and off for verification), then the exit as the arm64 boot protocol
 * (Documentation/arch/arm64/booting.rst) wants it: everything purgatory
 * touched through the caches cleaned and invalidated to the PoC by VA, the
 * MMU and the D-cache off and the I-cache as we found them, no stale TLB or
 * I-cache entries, x0 = DTB, x1..x3 = 0, at the EL we were entered at.
 * Everything is PC-relative: the blob runs wherever the loader placed it.
 */

#include "purgatory-abi.h"
#include "smp-boot.h"

#define REGIME_EL2 1 /* arch-arm64.c: EL2 without E2H, which has its own registers */

	.section .text.entry, "ax"
	.globl	purgatory_start
purgatory_start:
	b	purgatory_entry

	.text
purgatory_entry:
	msr	daifset, #0xf
	msr	spsel, #1
	adrp	x9, purgatory_stack
	add	x9, x9, :lo12:purgatory_stack
	add	x9, x9, #PURGATORY_STACK_SIZE
	mov	sp, x9

	/* Returns the translation regime; the saved SCTLR and FP access control
	 * are in purgatory_exit_state: [0] SCTLR, [1] CPACR/CPTR at entry. */
	bl	purgatory_entry_c
	mov	x19, x0
	adrp	x20, purgatory_params
	add	x20, x20, :lo12:purgatory_params
	ldr	x21, [x20, #PURGATORY_PARAMS_ENTRY_PC]
	ldr	x22, [x20, #PURGATORY_PARAMS_ENTRY_X0]
	adrp	x9, purgatory_exit_state
	add	x9, x9, :lo12:purgatory_exit_state
	ldp	x23, x24, [x9]

	/* The whole blob (code, parameters, stack, page tables) to the PoC: with
	 * the caches off, the next kernel must not find stale or dirty lines of
	 * it. No store from here on until the MMU is off. */
	adrp	x0, __purgatory_start
	add	x0, x0, :lo12:__purgatory_start
	adrp	x1, __purgatory_end
	add	x1, x1, :lo12:__purgatory_end
	mrs	x3, ctr_el0
	ubfx	x3, x3, #16, #4			/* DminLine: log2 of words */
	mov	x2, #4
	lsl	x2, x2, x3
	sub	x3, x2, #1
	bic	x0, x0, x3
1:	dc	civac, x0
	add	x0, x0, x2
	cmp	x0, x1
	b.lo	1b
	dsb	sy

	/* SCTLR and FP access as at entry: MMU and D-cache off. */
	cmp	x19, #REGIME_EL2
	b.eq	2f
	msr	cpacr_el1, x24			/* at EL2 with E2H: CPTR_EL2 */
	msr	sctlr_el1, x23			/* at EL2 with E2H: SCTLR_EL2 */
	isb
	mrs	x9, CurrentEL
	cmp	x9, #(2 << 2)
	b.eq	3f
	tlbi	vmalle1
	b	4f
2:	msr	cptr_el2, x24
	msr	sctlr_el2, x23
	isb
3:	tlbi	alle2
4:	dsb	ish
	ic	iallu
	dsb	ish
	isb

	mov	x0, x22
	mov	x1, xzr
	mov	x2, xzr
	mov	x3, xzr
	br	x21

/*
 * Exception vectors: nothing should trap here. Any exception says which
 * vector and its syndrome on the console and resets (arch-arm64.c), on a fresh
 * stack: purgatory never returns from one.
 */
	.p2align 11
	.globl	purgatory_vectors
purgatory_vectors:
	.irp	n, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
	.p2align 7
	mov	x0, #\n
	b	purgatory_vector_common
	.endr

purgatory_vector_common:
	adrp	x9, purgatory_stack
	add	x9, x9, :lo12:purgatory_stack
	add	x9, x9, #PURGATORY_STACK_SIZE
	mov	sp, x9
	bl	purgatory_exception_c
5:	wfi
	b	5b

/*
 * A secondary CPU, started by the boot CPU with PSCI CPU_ON (smp-arm64.c), at
 * the boot CPU's EL with its MMU and caches off; x0 (the context id) is the
 * top of its own stack. It takes the boot CPU's translation regime as
 * purgatory_smp_boot holds it (same tables, MAIR, TCR, SCTLR: its loads are
 * cacheable and coherent, its atomics on normal memory), enables FP/SIMD, and
 * only then touches its stack: C hashes its share of the chunks and turns
 * the CPU off. A CPU at another EL than the boot CPU turns itself off at once.
 */
	.globl	purgatory_secondary_entry
purgatory_secondary_entry:
	msr	daifset, #0xf
	msr	spsel, #1
	mov	x19, x0
	adrp	x9, purgatory_smp_boot
	add	x9, x9, :lo12:purgatory_smp_boot
	ldr	x10, [x9, #SMP_BOOT_EL]
	mrs	x11, CurrentEL
	cmp	x10, x11
	b.ne	purgatory_secondary_off
	ldr	x12, [x9, #SMP_BOOT_MAIR]
	ldr	x13, [x9, #SMP_BOOT_TCR]
	ldr	x14, [x9, #SMP_BOOT_TTBR0]
	ldr	x15, [x9, #SMP_BOOT_SCTLR]
	ldr	x16, [x9, #SMP_BOOT_CPACR]
	ldr	x17, [x9, #SMP_BOOT_VBAR]
	cmp	x11, #(2 << 2)
	b.eq	6f
	msr	mair_el1, x12
	msr	tcr_el1, x13
	msr	ttbr0_el1, x14
	msr	cpacr_el1, x16
	msr	vbar_el1, x17
	isb
	tlbi	vmalle1
	ic	iallu
	dsb	nsh
	isb
	msr	sctlr_el1, x15
	isb
	b	7f
6:	ldr	x10, [x9, #SMP_BOOT_HCR]
	msr	hcr_el2, x10
	isb
	msr	mair_el2, x12
	msr	tcr_el2, x13
	msr	ttbr0_el2, x14
	msr	cptr_el2, x16
	msr	vbar_el2, x17
	isb
	tlbi	alle2
	ic	iallu
	dsb	nsh
	isb
	msr	sctlr_el2, x15
	isb
7:	mov	sp, x19
	bl	purgatory_secondary_c
	/* fall through: purgatory_secondary_c() returns only to turn off */

/* PSCI CPU_OFF by the conduit purgatory_smp_boot names. Never returns; if the
 * call fails, the CPU waits for an interrupt that never comes (masked). */
	.globl	purgatory_secondary_off
purgatory_secondary_off:
	adrp	x9, purgatory_smp_boot
	add	x9, x9, :lo12:purgatory_smp_boot
	ldr	x10, [x9, #SMP_BOOT_SMC]
	movz	x0, #PSCI_0_2_CPU_OFF_HI, lsl #16
	movk	x0, #PSCI_0_2_CPU_OFF_LO
	cbnz	x10, 8f
	hvc	#0
	b	9f
8:	smc	#0
9:	wfi
	b	9b

/* A secondary CPU's vectors: any exception turns that CPU off. The boot CPU
 * hashes again what it claimed and did not finish. */
	.p2align 11
	.globl	purgatory_secondary_vectors
purgatory_secondary_vectors:
	.rept	16
	.p2align 7
	b	purgatory_secondary_off
	.endr

	.section .note.GNU-stack, "", %progbits
