/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * A minimal machine for running the real purgatory blob under QEMU (TCG), the
 * way the old kernel leaves it: multiboot brings us to 32-bit protected mode,
 * we identity-map 4 GiB, enter long mode with CR4 = PAE only (as the kernel's
 * relocate_kernel does) and jump to purgatory at 0x200000. Its "kernel" at
 * 0x180000 prints rsi and the command line (with the stamps) to the serial
 * port and exits QEMU through isa-debug-exit. Built by test-loader-qemu.py.
 */

#define HANDOFF_ENTRY 0x700000 /* above the stub's image, which multiboot overwrites */
#define MB_MAGIC 0x1BADB002
#define MB_FLAGS 0x00000000
	.section .multiboot, "a"
	.align 4
	.long MB_MAGIC
	.long MB_FLAGS
	.long -(MB_MAGIC + MB_FLAGS)

	.section .text32, "ax"
	.code32
	.globl _start
_start:
	cli
	movl	$stack_top, %esp
	movl	$pdpt, %eax
	orl	$0x3, %eax
	movl	%eax, pml4
	xorl	%ecx, %ecx
1:	movl	%ecx, %eax
	shll	$12, %eax
	addl	$pd, %eax
	orl	$0x3, %eax
	movl	%eax, pdpt(,%ecx,8)
	incl	%ecx
	cmpl	$4, %ecx
	jb	1b
	xorl	%ecx, %ecx
2:	movl	%ecx, %eax
	shll	$21, %eax
	orl	$0x83, %eax
	movl	%eax, pd(,%ecx,8)
	movl	%ecx, %eax
	shrl	$11, %eax
	movl	%eax, pd+4(,%ecx,8)
	incl	%ecx
	cmpl	$2048, %ecx
	jb	2b
	movl	$0x20, %eax
	movl	%eax, %cr4
	movl	$pml4, %eax
	movl	%eax, %cr3
	movl	$0xC0000080, %ecx
	rdmsr
	orl	$0x100, %eax
	wrmsr
	movl	%cr0, %eax
	orl	$0x80000001, %eax
	andl	$~0xC, %eax
	movl	%eax, %cr0
	lgdt	gdt_desc
	ljmp	$0x08, $long_mode

	.code64
long_mode:
	movl	$0x10, %eax
	movl	%eax, %ds
	movl	%eax, %es
	movl	%eax, %ss
	movabsq	$0xdeadbeef, %rsp
	/* The entry: the qword at HANDOFF_ENTRY when an emulator put one there
	 * (real-kernel runs place segments with -device loader), else the blob
	 * embedded at 0x200000. */
	movabsq	$HANDOFF_ENTRY, %rax
	movq	(%rax), %rax
	testq	%rax, %rax
	jnz	7f
	movabsq	$0x200000, %rax
7:	jmp	*%rax

	.section .fakekernel, "ax"
	.code64
	.globl fake_kernel
fake_kernel:
	movq	%rsi, %rbx
	leaq	msg(%rip), %rsi
	call	puts
	movq	%rbx, %rdi
	call	puthex
	movb	$'\n', %al
	call	putc
	movabsq	$0x500000, %rsi
	call	puts
	movb	$'\n', %al
	call	putc
	movw	$0xf4, %dx
	movb	$0x31, %al
	outb	%al, %dx
3:	hlt
	jmp	3b
putc:
	movw	$0x3f8, %dx
	outb	%al, %dx
	ret
puts:
	lodsb
	testb	%al, %al
	jz	4f
	call	putc
	jmp	puts
4:	ret
puthex:
	movl	$16, %ecx
5:	rolq	$4, %rdi
	movl	%edi, %eax
	andl	$0xf, %eax
	cmpb	$10, %al
	jb	6f
	addb	$('a' - 10 - '0'), %al
6:	addb	$'0', %al
	pushq	%rcx
	call	putc
	popq	%rcx
	decl	%ecx
	jnz	5b
	ret
msg:	.asciz "FAKE KERNEL ENTERED rsi="

	.section .gdt, "a"
	.align 16
gdt:	.quad 0
	.quad 0x00af9a000000ffff
	.quad 0x00cf92000000ffff
gdt_end:
gdt_desc:
	.word gdt_end - gdt - 1
	.long gdt

	.section .purgatory, "ax"
	.incbin "purgatory.bin"
	.section .payload, "a"
	.incbin "payload.bin"
	.section .cmdline, "a"
	.incbin "cmdline.bin"

	.section .pt, "aw", @nobits
	.align 4096
pml4:	.skip 4096
pdpt:	.skip 4096
pd:	.skip 4096 * 4
	.skip 16384
stack_top:
