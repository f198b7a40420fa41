# SPDX-License-Identifier: LGPL-2.1-or-later
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

	.org	510
	.byte	0x55, 0xaa		# boot signature
