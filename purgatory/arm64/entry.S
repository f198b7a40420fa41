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

	.section .note.GNU-stack, "", %progbits
