/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The lab's nested test VM: a 512-byte boot sector that counts PIT ticks.
 *
 * It programs PIT channel 0 as an 18.2 Hz rate generator, installs its own
 * IRQ0 handler (vector 8 under the BIOS's PIC mapping) and halts between
 * ticks, so it costs almost nothing under TCG. Each tick increments a 32-bit
 * counter at COUNTER_VALUE; COUNTER_MAGIC tells a reader it found the right
 * memory. The lab reads both through the QEMU monitor
 * (`xp /2wx 0x500`). A restored VM continues from its saved value; a VM that
 * was restarted instead starts again from 0.
 */
        .equ COUNTER_BASE, 0x500        /* first free RAM after the BIOS data area */
        .equ COUNTER_MAGIC_ADDR, COUNTER_BASE
        .equ COUNTER_VALUE, COUNTER_BASE + 4
        .equ COUNTER_MAGIC, 0x43424c55  /* "ULBC" little-endian */
        .equ BOOT_ADDR, 0x7c00
        .equ IRQ0_VECTOR, 8
        .equ PIT_CH0, 0x40
        .equ PIT_CMD, 0x43
        .equ PIT_CH0_LOHI_RATEGEN, 0x34 /* channel 0, lobyte/hibyte, mode 2, binary */
        .equ PIC1_CMD, 0x20
        .equ PIC1_DATA, 0x21
        .equ PIC_EOI, 0x20

        .code16
        .text
        .globl _start
_start:
        cli
        xorw %ax, %ax
        movw %ax, %ds
        movw %ax, %es
        movw %ax, %ss
        movw $BOOT_ADDR, %sp
        ljmp $0, $start_cs0             /* some BIOSes enter at 07c0:0000 */
start_cs0:
        movl $COUNTER_MAGIC, COUNTER_MAGIC_ADDR
        movl $0, COUNTER_VALUE

        movw $tick, IRQ0_VECTOR * 4
        movw $0, IRQ0_VECTOR * 4 + 2

        movb $PIT_CH0_LOHI_RATEGEN, %al
        outb %al, $PIT_CMD
        xorb %al, %al                   /* divisor 0 = 65536: 1193182 / 65536 = 18.2 Hz */
        outb %al, $PIT_CH0
        outb %al, $PIT_CH0

        inb $PIC1_DATA, %al
        andb $0xfe, %al                 /* unmask IRQ0 */
        outb %al, $PIC1_DATA
        sti
idle:
        hlt
        jmp idle

tick:
        incl %cs:COUNTER_VALUE
        pushw %ax
        movb $PIC_EOI, %al
        outb %al, $PIC1_CMD
        popw %ax
        iret

        .org 510
        .byte 0x55, 0xaa
