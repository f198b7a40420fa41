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

	.section .text.entry, "ax"
	.code64
	.globl purgatory_start
purgatory_start:
	jmp	purgatory_entry

	.text
purgatory_entry:
	cli
	cld
	leaq	purgatory_stack+16384(%rip), %rsp

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

	call	purgatory_entry_c

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
