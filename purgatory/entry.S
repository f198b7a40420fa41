/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Purgatory's entry. The old kernel jumps to offset 0 of the blob in 64-bit
 * mode, identity-mapped, interrupts off, with no usable stack. We set our own
 * stack, run the C checks (which reset the machine on failure), then enter the
 * new kernel as the 64-bit boot protocol requires: a GDT with flat __BOOT_CS
 * (0x10) and __BOOT_DS (0x18), those selectors loaded, rsi = boot_params.
 * Everything is RIP-relative: the blob runs wherever the loader placed it.
 */

#include "purgatory-abi.h"

#define BOOT_CS 0x10
#define BOOT_DS 0x18

#define CR4_OSFXSR        (1 << 9)  /* SSE instructions allowed (SHA-NI uses xmm) */
#define CR4_OSXMMEXCPT    (1 << 10)
#define CR4_OSXSAVE       (1 << 18) /* xgetbv/xsetbv, and AVX with XCR0 */
#define CPUID1_ECX_XSAVE  (1 << 26)
#define CPUID1_ECX_AVX    (1 << 28)
#define XCR0_X87_SSE      0x3
#define XCR0_AVX          0x4

	.section .text.entry, "ax"
	.code64
	.globl purgatory_start
purgatory_start:
	jmp	purgatory_entry

	.text
purgatory_entry:
	cli
	cld
	leaq	purgatory_stack+PURGATORY_STACK_SIZE(%rip), %rsp

	/* Our GDT: its base is a linear address, known only at run time. */
	leaq	gdt(%rip), %rax
	movq	%rax, gdt_desc+2(%rip)
	lgdt	gdt_desc(%rip)
	pushq	$BOOT_CS
	leaq	1f(%rip), %rax
	pushq	%rax
	lretq
1:	movl	$BOOT_DS, %eax
	movl	%eax, %ds
	movl	%eax, %es
	movl	%eax, %ss
	movl	%eax, %fs
	movl	%eax, %gs

	/*
	 * The old kernel's relocate_kernel leaves CR4 with little more than PAE:
	 * SSE would raise #UD and CPUID would report no OSXSAVE. Enable SSE,
	 * and XSAVE with x87|SSE(|AVX) state in XCR0, so sha256.c's CPUID dispatch
	 * may pick SHA-NI or AVX2; the previous CR4 (r12) and XCR0 (r14) are put
	 * back before the jump. r12-r15 survive the C call (SysV ABI).
	 */
	movq	%cr4, %r12
	movq	%r12, %r13
	orq	$(CR4_OSFXSR | CR4_OSXMMEXCPT), %r13
	movl	$1, %eax
	xorl	%ecx, %ecx
	cpuid
	movl	%ecx, %r15d
	testl	$CPUID1_ECX_XSAVE, %r15d
	jz	2f
	orq	$CR4_OSXSAVE, %r13
2:	movq	%r13, %cr4
	testl	$CPUID1_ECX_XSAVE, %r15d
	jz	3f
	xorl	%ecx, %ecx
	xgetbv
	movl	%eax, %r14d
	orl	$XCR0_X87_SSE, %eax
	testl	$CPUID1_ECX_AVX, %r15d
	jz	4f
	orl	$XCR0_AVX, %eax
4:	xorl	%ecx, %ecx
	xorl	%edx, %edx
	xsetbv
3:
	call	purgatory_entry_c

	testl	$CPUID1_ECX_XSAVE, %r15d
	jz	5f
	movl	%r14d, %eax
	orl	$1, %eax		/* x87 state can never be off */
	xorl	%ecx, %ecx
	xorl	%edx, %edx
	xsetbv
5:	movq	%r12, %cr4

	leaq	purgatory_params(%rip), %rax
	movq	PURGATORY_PARAMS_ENTRY_RSI(%rax), %rsi
	movq	PURGATORY_PARAMS_ENTRY_RIP(%rax), %rax
	xorl	%ebx, %ebx
	xorl	%ecx, %ecx
	xorl	%edx, %edx
	xorl	%edi, %edi
	xorl	%ebp, %ebp
	jmp	*%rax

	.data
	.balign 16
gdt:
	.quad	0			/* null */
	.quad	0			/* unused */
	.quad	0x00af9a000000ffff	/* 0x10: 64-bit code, flat */
	.quad	0x00cf92000000ffff	/* 0x18: data, flat */
gdt_end:
	.balign 16
gdt_desc:
	.word	gdt_end - gdt - 1
	.quad	0

	.section .note.GNU-stack, "", @progbits
