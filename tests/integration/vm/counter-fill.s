# SPDX-License-Identifier: LGPL-2.1-or-later
#
# counter-fill.s: the same counter guest that first fills its RAM (see below), for tests that
# need a save to take seconds. Generated from counter.s's text; keep the two in step.
#
# The tiny guest of the VM integration test: a 512-byte x86 boot sector that counts timer
# interrupts (PIT channel 0, IRQ0, 18.2 Hz as the BIOS leaves it) in a 32-bit RAM word and
# halts between them, so a TCG guest costs next to no CPU. The test reads the word through
# QEMU's monitor ("xp /1wx COUNTER") to prove that a restored VM continued counting from where
# it was paused rather than booting again. MAGIC marks a running counter guest.
#
# COUNTER and MAGIC are physical addresses in free conventional memory, passed by meson
# (--defsym) so that the test and this file agree. Built with GNU as/ld/objcopy at build time.
# (The lab builds a similar guest of its own; the two can be unified later.)

	.code16
	.text
	.globl _start
_start:
	cli
	xorw	%ax, %ax
	movw	%ax, %ds
	movw	%ax, %ss
	movw	$0x7c00, %sp
	ljmp	$0, $1f			# CS = 0, whatever the BIOS jumped with
1:
	# Fill every byte of RAM above 1 MiB with a non-zero pattern, so that a save
	# writes all of it (QEMU writes zero pages as a flag): the big guest's save takes
	# seconds. Unreal mode: ES gets a flat 4 GiB limit in protected mode and keeps it
	# back in real mode; A20 on through port 0x92. RAM size from the CMOS (64 KiB
	# blocks above 16 MiB, registers 0x34/0x35).
	inb	$0x92, %al
	orb	$2, %al
	andb	$0xfe, %al
	outb	%al, $0x92
	lgdt	gdtr
	movl	%cr0, %eax
	orb	$1, %al
	movl	%eax, %cr0
	jmp	2f
2:
	movw	$8, %bx
	movw	%bx, %es
	andb	$0xfe, %al
	movl	%eax, %cr0
	jmp	3f
3:
	movb	$0x35, %al
	outb	%al, $0x70
	inb	$0x71, %al
	movb	%al, %ah
	movb	$0x34, %al
	outb	%al, $0x70
	inb	$0x71, %al
	movzwl	%ax, %ecx
	shll	$14, %ecx		# 64 KiB blocks -> dwords
	addl	$((0x1000000 - 0x100000) / 4), %ecx
	movl	$0x100000, %edi
	movl	$0x5a5aa5a5, %eax
	cld
	addr32 rep stosl
	xorw	%ax, %ax
	movl	$0, COUNTER
	movl	$0x55504721, MAGIC
	movw	$tick, 0x20		# interrupt vector 8 (IRQ0): offset ...
	movw	%ax, 0x22		# ... and segment 0
	sti
2:
	hlt
	jmp	2b

tick:
	pushw	%ax
	incl	%cs:COUNTER
	movb	$0x20, %al		# end of interrupt to the master PIC
	outb	%al, $0x20
	popw	%ax
	iret

	.balign	8
gdt:
	.quad	0
	.quad	0x00cf92000000ffff	# data: base 0, limit 4 GiB, writable
gdtr:
	.word	gdtr - gdt - 1
	.long	gdt

	.org	510
	.byte	0x55, 0xaa		# boot signature
