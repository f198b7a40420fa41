/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * A minimal arm64 machine for running the real arm64 purgatory blob under
 * qemu-system-aarch64 -M virt (TCG), the way the old kernel leaves it.
 * QEMU starts _start at EL1, or at EL2 with virtualization=on, with the MMU
 * and caches off. At EL2 the stub sets HCR_EL2 as a VHE kernel leaves it
 * (E2H and TGE) when the harness asks (STUB_CONFIG), else as the nVHE hyp
 * stub does; then, interrupts masked and x0..x3 = 0 (kexec_load gives no
 * DTB), it branches to the blob at PURGATORY_ADDR.
 *
 * The fake kernel prints, on the PL011, how it was entered:
 *   FAKE KERNEL el=E sctlr=S x0=A x1=B x2=C x3=D state=T cpu1=P
 *   ARGS <the NUL-terminated string at x0: the stand-in DTB's bootargs>
 * (hex; state is the parameter block's arch_state, cpu1 PSCI AFFINITY_INFO of
 * the CPU with MPIDR 1: 0 on, 1 off, negative without one), then powers the machine
 * off through PSCI (SMC at EL2, HVC at EL1). Built by meson, run by
 * test-purgatory-arm64-qemu.py.
 */

#define UART           0x09000000
#define STUB_CONFIG    0x40170000 /* u64: 1 = enter purgatory with E2H set */
#define PURGATORY_ADDR 0x40200000
#define ARCH_STATE     (PURGATORY_ADDR + 0x40 + 124)
#define PSCI_SYSTEM_OFF 0x84000008
#define PSCI_AFFINITY_INFO 0xc4000004
#define HCR_RW         (1 << 31)
#define HCR_TGE        (1 << 27)
#define HCR_E2H        (1 << 34)

	.section .text.start, "ax"
	.globl	_start
_start:
	msr	daifset, #0xf
	mrs	x9, CurrentEL
	cmp	x9, #(2 << 2)
	b.ne	1f
	mov	x10, #HCR_RW
	ldr	x11, =STUB_CONFIG
	ldr	x11, [x11]
	cbz	x11, 2f
	orr	x10, x10, #HCR_TGE
	orr	x10, x10, #HCR_E2H
2:	msr	hcr_el2, x10
	isb
1:	mov	x0, xzr
	mov	x1, xzr
	mov	x2, xzr
	mov	x3, xzr
	ldr	x4, =PURGATORY_ADDR
	br	x4

	.section .text.fakekernel, "ax"
	.globl	fake_kernel
fake_kernel:
	mov	x19, x0
	mov	x20, x1
	mov	x21, x2
	mov	x22, x3
	ldr	x9, =stack_top
	mov	sp, x9
	mrs	x23, CurrentEL
	lsr	x23, x23, #2
	cmp	x23, #2
	b.ne	1f
	mrs	x24, sctlr_el2
	b	2f
1:	mrs	x24, sctlr_el1
2:	adr	x0, s_head
	bl	puts
	mov	x0, x23
	bl	puthex
	adr	x0, s_sctlr
	bl	puts
	mov	x0, x24
	bl	puthex
	adr	x0, s_x0
	bl	puts
	mov	x0, x19
	bl	puthex
	adr	x0, s_x1
	bl	puts
	mov	x0, x20
	bl	puthex
	adr	x0, s_x2
	bl	puts
	mov	x0, x21
	bl	puthex
	adr	x0, s_x3
	bl	puts
	mov	x0, x22
	bl	puthex
	adr	x0, s_state
	bl	puts
	ldr	x9, =ARCH_STATE
	ldr	w0, [x9]
	bl	puthex
	adr	x0, s_cpu1
	bl	puts
	ldr	x0, =PSCI_AFFINITY_INFO
	mov	x1, #1
	mov	x2, xzr
	cmp	x23, #2
	b.eq	5f
	hvc	#0
	b	6f
5:	smc	#0
6:	bl	puthex
	adr	x0, s_args
	bl	puts
	mov	x0, x19
	bl	puts
	adr	x0, s_nl
	bl	puts
	ldr	x0, =PSCI_SYSTEM_OFF
	cmp	x23, #2
	b.eq	3f
	hvc	#0
	b	4f
3:	smc	#0
4:	wfi
	b	4b

/* x0: NUL-terminated string (at most 1024 bytes). */
puts:
	ldr	x9, =UART
	mov	x10, #1024
1:	ldrb	w11, [x0], #1
	cbz	w11, 2f
	strb	w11, [x9]
	subs	x10, x10, #1
	b.ne	1b
2:	ret

/* x0: 16 hex digits. */
puthex:
	ldr	x9, =UART
	mov	x10, #60
1:	lsr	x11, x0, x10
	and	x11, x11, #0xf
	cmp	x11, #10
	add	x12, x11, #'0'
	add	x13, x11, #('a' - 10)
	csel	x11, x12, x13, lo
	strb	w11, [x9]
	subs	x10, x10, #4
	b.pl	1b
	ret

s_head:	.asciz	"\nFAKE KERNEL el="
s_sctlr: .asciz	" sctlr="
s_x0:	.asciz	" x0="
s_x1:	.asciz	" x1="
s_x2:	.asciz	" x2="
s_x3:	.asciz	" x3="
s_state: .asciz	" state="
s_cpu1:	.asciz	" cpu1="
s_args:	.asciz	"\nARGS "
s_nl:	.asciz	"\n"
	.ltorg

	.section .bss
	.balign	16
	.space	4096
stack_top:

	.section .note.GNU-stack, "", %progbits
