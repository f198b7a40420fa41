/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * memguest: a test guest whose RAM holds known, non-zero data that it checks itself.
 *
 * A boot sector that loads the rest of this image (int 13h), finds the RAM above 1 MiB
 * (E820), switches to flat 32-bit protected mode and fills that RAM, up to its end less
 * FILL_MARGIN, with a pattern: a 64 KiB block of xorshift32 output copied with rep movsd,
 * the first dword of every 4 KiB page replaced by the page's physical address, so that no
 * two pages are alike. It then counts PIT ticks exactly like the lab's counter.S (magic
 * and counter at 0x500/0x504, 18.2 Hz, hlt between ticks) and, between ticks, polls the
 * keyboard controller and COM1 for a verify request: key V (`virsh send-key DOMAIN
 * KEY_V`) or the byte 'v' on COM1. A verify compares every filled page with what the
 * fill wrote (repe cmpsd), stores the result in the status block and prints
 *   VERIFY ok mib=N sum=0xS n=COUNT ticks=T
 *   VERIFY BAD addr=0xA mib=N sum=0xS n=COUNT ticks=T
 * on COM1. The fill prints "FILL done mib=N sum=0xS ticks=T".
 *
 * The status block, 32-bit words in low RAM, read from outside with
 * `virsh qemu-monitor-command --hmp DOMAIN 'xp /13wx 0x500'`:
 *   0x500 counter magic 0x43424c55 ("ULBC", as counter.S)
 *   0x504 PIT ticks since boot
 *   0x508 status magic 0x474d454d ("MEMG")
 *   0x50c state: 0 booting, 1 filling, 2 ready, 3 verifying, 4 no RAM found, 5 fault
 *   0x510 MiB filled (from 1 MiB up)
 *   0x514 sum: the 32-bit sum of every filled dword as the fill wrote it
 *   0x518 last verify: 0 none yet, 1 ok, 2 bad
 *   0x51c verifies completed
 *   0x520 last verify's first differing address (0 when it was ok)
 *   0x524 ticks the fill took
 *   0x528 ticks the last verify took
 *   0x52c pattern seed
 *   0x530 progress of the running fill or verify, in MiB
 * A verify proves each filled dword equal to what was written, which is stronger than
 * comparing sums; the sum identifies the fill (seed and size) for a reader outside.
 *
 * Built with GNU as/ld/objcopy: as --32; ld -m elf_i386 -Ttext=0x7c00; objcopy -O binary
 * -j .text. The image is IMAGE_SECTORS sectors; the boot sector loads the rest.
 */
        .equ COUNTER_MAGIC_ADDR, 0x500
        .equ COUNTER_VALUE, 0x504
        .equ COUNTER_MAGIC, 0x43424c55
        .equ ST_MAGIC, 0x508
        .equ ST_STATE, 0x50c
        .equ ST_MIB, 0x510
        .equ ST_SUM, 0x514
        .equ ST_RESULT, 0x518
        .equ ST_COUNT, 0x51c
        .equ ST_BADADDR, 0x520
        .equ ST_FILL_TICKS, 0x524
        .equ ST_VERIFY_TICKS, 0x528
        .equ ST_SEED, 0x52c
        .equ ST_PROGRESS, 0x530
        .equ STATUS_MAGIC, 0x474d454d
        .equ STATE_FILLING, 1
        .equ STATE_READY, 2
        .equ STATE_VERIFYING, 3
        .equ STATE_NO_RAM, 4
        .equ STATE_FAULT, 5
        .equ RESULT_OK, 1
        .equ RESULT_BAD, 2

        .equ BOOT_ADDR, 0x7c00
        .equ IMAGE_SECTORS, 8           /* this image, boot sector included */
        .equ RAM_END, 0x600             /* E820: end of the RAM region holding 1 MiB */
        .equ E820_BUF, 0x640            /* one 24-byte E820 entry */
        .equ XMM_SCRATCH, 0x660         /* 16 bytes, aligned */
        .equ IDT_BASE, 0x1000           /* IDT_VECTORS gates of 8 bytes */
        .equ IDT_VECTORS, 0x30
        .equ TEMPLATE, 0x10000          /* the 64 KiB pattern block */
        .equ BLOCK, 0x10000
        .equ PAGE, 0x1000
        .equ FILL_START, 0x100000
        .equ FILL_MARGIN, 0x100000      /* left unfilled below the region's end */
        .ifndef SEED
        .equ SEED, 0x9e3779b9
        .endif

        .equ PIT_CH0, 0x40
        .equ PIT_CMD, 0x43
        .equ PIC1_CMD, 0x20
        .equ PIC1_DATA, 0x21
        .equ PIC2_CMD, 0xa0
        .equ PIC2_DATA, 0xa1
        .equ PIC_EOI, 0x20
        .equ KBC_DATA, 0x60
        .equ KBC_STATUS, 0x64
        .equ SCANCODE_V, 0x2f           /* set 1 make code, as the controller translates it */
        .equ COM1, 0x3f8

        .code16
        .text
        .globl _start
_start:
        cli
        cld
        xorw %ax, %ax
        movw %ax, %ds
        movw %ax, %es
        movw %ax, %ss
        movw $BOOT_ADDR, %sp
        ljmp $0, $start_cs0             /* some BIOSes enter at 07c0:0000 */
start_cs0:
        movl $COUNTER_MAGIC, COUNTER_MAGIC_ADDR
        movl $0, COUNTER_VALUE
        movw $ST_MAGIC, %di             /* the status block, zeroed */
        movw $(ST_PROGRESS + 4 - ST_MAGIC) / 2, %cx
        rep stosw
        movl $STATUS_MAGIC, ST_MAGIC
        /* The rest of the image: sectors 2.. of the boot drive (DL), right after us. */
        movw $0x0200 + IMAGE_SECTORS - 1, %ax
        movw $0x0002, %cx
        xorb %dh, %dh
        movw $BOOT_ADDR + 512, %bx
        int $0x13
        jc load_failed
        jmp stage2
load_failed:
        hlt
        jmp load_failed

        .org 510
        .byte 0x55, 0xaa

/* ---- second stage, still real mode: RAM size, A20, protected mode ---- */
stage2:
        call e820_ram_end
        inb $0x92, %al                  /* A20 on (fast A20 gate), no reset */
        orb $2, %al
        andb $0xfe, %al
        outb %al, $0x92
        lgdt gdt_desc
        movl %cr0, %eax
        orl $1, %eax
        movl %eax, %cr0
        ljmp $0x08, $pm_entry

/* RAM_END = end of the usable E820 region that holds FILL_START, or 0. */
e820_ram_end:
        movl $0, RAM_END
        xorl %ebx, %ebx
1:
        movl $0xe820, %eax
        movl $0x534d4150, %edx          /* "SMAP" */
        movl $24, %ecx
        movw $E820_BUF, %di
        int $0x15
        jc 3f
        cmpl $0x534d4150, %eax
        jne 3f
        cmpl $1, E820_BUF + 16          /* usable RAM */
        jne 2f
        cmpl $0, E820_BUF + 4           /* below 4 GiB */
        jne 2f
        movl E820_BUF, %eax
        cmpl $FILL_START, %eax
        ja 2f
        addl E820_BUF + 8, %eax
        jc 4f                           /* reaches 4 GiB: stop below it */
        cmpl $0, E820_BUF + 12
        jne 4f
        cmpl $FILL_START, %eax
        jbe 2f
        movl %eax, RAM_END
        jmp 3f
4:
        movl $0xfffff000, RAM_END
        jmp 3f
2:
        testl %ebx, %ebx
        jnz 1b
3:
        ret

        .p2align 3
gdt:
        .quad 0
        .quad 0x00cf9a000000ffff        /* 0x08: code, flat 4 GiB, 32-bit */
        .quad 0x00cf92000000ffff        /* 0x10: data, flat 4 GiB */
gdt_desc:
        .word gdt_desc - gdt - 1
        .long gdt
idt_desc:
        .word IDT_VECTORS * 8 - 1
        .long IDT_BASE

/* ---- protected mode ---- */
        .code32
pm_entry:
        movw $0x10, %ax
        movw %ax, %ds
        movw %ax, %es
        movw %ax, %ss
        movw %ax, %fs
        movw %ax, %gs
        movl $BOOT_ADDR, %esp
        cld
        movl %cr0, %eax                 /* SSE: no FPU emulation, monitor coprocessor */
        andl $~4, %eax
        orl $2, %eax
        movl %eax, %cr0
        movl %cr4, %eax
        orl $0x600, %eax                /* OSFXSR, OSXMMEXCPT */
        movl %eax, %cr4
        call setup_interrupts
        call serial_init
        sti
        call fill
idle:
        sti
        hlt
        call poll_requests
        jmp idle

/* IDT: exceptions to fault, IRQ0 (vector 0x20 after the remap) to tick, the other IRQs
 * to spurious. PIC remapped to 0x20/0x28 with only IRQ0 unmasked; PIT channel 0 at
 * 18.2 Hz (divisor 65536), as counter.S. */
setup_interrupts:
        movl $IDT_BASE, %edi
        xorl %ecx, %ecx
1:
        movl $fault, %eax
        cmpl $0x20, %ecx
        jb 2f
        movl $spurious, %eax
        jne 2f
        movl $tick, %eax
2:
        movw %ax, (%edi)
        movw $0x08, 2(%edi)
        movw $0x8e00, 4(%edi)           /* present, ring 0, 32-bit interrupt gate */
        shrl $16, %eax
        movw %ax, 6(%edi)
        addl $8, %edi
        incl %ecx
        cmpl $IDT_VECTORS, %ecx
        jb 1b
        lidt idt_desc

        movb $0x11, %al                 /* ICW1: edge, cascade, ICW4 follows */
        outb %al, $PIC1_CMD
        outb %al, $PIC2_CMD
        movb $0x20, %al                 /* ICW2: vector bases */
        outb %al, $PIC1_DATA
        movb $0x28, %al
        outb %al, $PIC2_DATA
        movb $4, %al                    /* ICW3: slave on IRQ2 */
        outb %al, $PIC1_DATA
        movb $2, %al
        outb %al, $PIC2_DATA
        movb $1, %al                    /* ICW4: 8086 mode */
        outb %al, $PIC1_DATA
        outb %al, $PIC2_DATA
        movb $0xfe, %al                 /* masks: IRQ0 only */
        outb %al, $PIC1_DATA
        movb $0xff, %al
        outb %al, $PIC2_DATA

        movb $0x34, %al                 /* channel 0, lobyte/hibyte, mode 2, binary */
        outb %al, $PIT_CMD
        xorb %al, %al
        outb %al, $PIT_CH0
        outb %al, $PIT_CH0
        ret

tick:
        incl COUNTER_VALUE
        pushl %eax
        movb $PIC_EOI, %al
        outb %al, $PIC1_CMD
        popl %eax
        iret

spurious:
        pushl %eax
        movb $PIC_EOI, %al
        outb %al, $PIC2_CMD
        outb %al, $PIC1_CMD
        popl %eax
        iret

fault:
        cli
        movl $STATE_FAULT, ST_STATE
        movl $msg_fault, %esi
        call puts
1:
        hlt
        jmp 1b

/* ---- the pattern ---- */

/* Fills [FILL_START, FILL_START + MiB) and sets ST_MIB, ST_SUM, ST_FILL_TICKS. */
fill:
        movl RAM_END, %eax
        subl $FILL_START + FILL_MARGIN, %eax
        jbe no_ram
        shrl $20, %eax
        jz no_ram
        movl %eax, ST_MIB
        movl $SEED, ST_SEED
        movl $STATE_FILLING, ST_STATE
        movl COUNTER_VALUE, %ebp
        call make_template
        /* sum = blocks * (template sum without each page's first dword) + page addresses */
        movl ST_MIB, %ecx
        shll $4, %ecx                   /* 16 blocks a MiB */
        imull %ecx, %edx
        movl $FILL_START, %edi
1:
        movl $TEMPLATE, %ebx            /* the template's page stamps: this block's pages */
        movl %edi, %eax
2:
        movl %eax, (%ebx)
        addl %eax, %edx
        addl $PAGE, %eax
        addl $PAGE, %ebx
        cmpl $TEMPLATE + BLOCK, %ebx
        jb 2b
        movl $TEMPLATE, %esi
3:
        movaps (%esi), %xmm0            /* 128 bytes a round: 16 a move under TCG */
        movaps 16(%esi), %xmm1
        movaps 32(%esi), %xmm2
        movaps 48(%esi), %xmm3
        movaps 64(%esi), %xmm4
        movaps 80(%esi), %xmm5
        movaps 96(%esi), %xmm6
        movaps 112(%esi), %xmm7
        movaps %xmm0, (%edi)
        movaps %xmm1, 16(%edi)
        movaps %xmm2, 32(%edi)
        movaps %xmm3, 48(%edi)
        movaps %xmm4, 64(%edi)
        movaps %xmm5, 80(%edi)
        movaps %xmm6, 96(%edi)
        movaps %xmm7, 112(%edi)
        addl $128, %esi
        addl $128, %edi
        cmpl $TEMPLATE + BLOCK, %esi
        jb 3b
        call progress
        jb 1b
        movl %edx, ST_SUM
        movl COUNTER_VALUE, %eax
        subl %ebp, %eax
        movl %eax, ST_FILL_TICKS
        movl $STATE_READY, ST_STATE
        movl $msg_fill, %esi
        call puts
        call print_figures
        movl ST_FILL_TICKS, %eax
        call putdec
        jmp putnl
no_ram:
        movl $STATE_NO_RAM, ST_STATE
        movl $msg_no_ram, %esi
        jmp puts

/* After a block ending at EDI: ST_PROGRESS = MiB done; CF set while EDI is below the end
 * of the filled RAM. */
progress:
        movl %edi, %eax
        subl $FILL_START, %eax
        shrl $20, %eax
        movl %eax, ST_PROGRESS
        movl ST_MIB, %eax
        shll $20, %eax
        addl $FILL_START, %eax
        cmpl %eax, %edi
        ret

/* TEMPLATE = 64 KiB of xorshift32 output from SEED; EDX = its sum without the first
 * dword of each page (the fill replaces those). */
make_template:
        movl $SEED, %eax
        movl $TEMPLATE, %edi
        xorl %edx, %edx
1:
        movl %eax, %ebx
        shll $13, %ebx
        xorl %ebx, %eax
        movl %eax, %ebx
        shrl $17, %ebx
        xorl %ebx, %eax
        movl %eax, %ebx
        shll $5, %ebx
        xorl %ebx, %eax
        movl %eax, (%edi)
        testl $PAGE - 1, %edi
        jz 2f
        addl %eax, %edx
2:
        addl $4, %edi
        cmpl $TEMPLATE + BLOCK, %edi
        jb 1b
        ret

/* Compares every filled page with the pattern (the template with the page's stamp, XORed
 * into XMM7 16 bytes at a time; the first differing dword found again with repe cmpsl);
 * sets the result words and prints the result. */
verify:
        movl $STATE_VERIFYING, ST_STATE
        movl $0, ST_PROGRESS
        movl COUNTER_VALUE, %ebp
        movl $FILL_START, %edi
        xorl %ebx, %ebx                 /* first differing address */
        pxor %xmm7, %xmm7
1:
        movl %edi, %esi
        andl $BLOCK - 1, %esi
        addl $TEMPLATE, %esi
        movl %edi, (%esi)               /* the page's stamp */
        movl $PAGE / 64, %ecx
2:
        movaps (%edi), %xmm0
        movaps 16(%edi), %xmm1
        movaps 32(%edi), %xmm2
        movaps 48(%edi), %xmm3
        pxor (%esi), %xmm0
        pxor 16(%esi), %xmm1
        pxor 32(%esi), %xmm2
        pxor 48(%esi), %xmm3
        por %xmm0, %xmm1
        por %xmm2, %xmm3
        por %xmm1, %xmm7
        por %xmm3, %xmm7
        addl $64, %esi
        addl $64, %edi
        loop 2b
        movaps %xmm7, XMM_SCRATCH
        movl XMM_SCRATCH, %eax
        orl XMM_SCRATCH + 4, %eax
        orl XMM_SCRATCH + 8, %eax
        orl XMM_SCRATCH + 12, %eax
        jnz 3f
        testl $BLOCK - 1, %edi
        jnz 1b
        call progress
        jb 1b
        jmp 4f
3:
        subl $PAGE, %esi                /* the page again, a dword at a time */
        subl $PAGE, %edi
        movl $PAGE / 4, %ecx
        repe cmpsl
        leal -4(%edi), %ebx
4:
        movl COUNTER_VALUE, %eax
        subl %ebp, %eax
        movl %eax, ST_VERIFY_TICKS
        movl %ebx, ST_BADADDR
        movl $RESULT_OK, ST_RESULT
        testl %ebx, %ebx
        jz 5f
        movl $RESULT_BAD, ST_RESULT
5:
        incl ST_COUNT
        movl $STATE_READY, ST_STATE
        movl $msg_verify_ok, %esi
        testl %ebx, %ebx
        jz 6f
        movl $msg_verify_bad, %esi
        call puts
        movl %ebx, %eax
        call puthex
        movl $msg_mib, %esi
6:
        call puts
        call print_figures
        movl ST_VERIFY_TICKS, %eax
        call putdec
        jmp putnl

/* "<mib> sum=0x<sum> n=<count> ticks=" after a "mib=" already printed. */
print_figures:
        movl ST_MIB, %eax
        call putdec
        movl $msg_sum, %esi
        call puts
        movl ST_SUM, %eax
        call puthex
        movl $msg_n, %esi
        call puts
        movl ST_COUNT, %eax
        call putdec
        movl $msg_ticks, %esi
        jmp puts

/* A verify request from the keyboard (key V) or COM1 ('v'); other input is dropped. */
poll_requests:
        cmpl $STATE_READY, ST_STATE
        jne 3f
1:
        inb $KBC_STATUS, %al
        testb $1, %al                   /* output buffer full */
        jz 2f
        movb %al, %ah
        inb $KBC_DATA, %al
        testb $0x20, %ah                /* mouse data */
        jnz 1b
        cmpb $SCANCODE_V, %al
        jne 1b
        call verify
        jmp 1b
2:
        movw $COM1 + 5, %dx             /* line status: data ready */
        inb %dx, %al
        cmpb $0xff, %al                 /* no UART there */
        je 3f
        testb $1, %al
        jz 3f
        movw $COM1, %dx
        inb %dx, %al
        cmpb $'v', %al
        jne 2b
        call verify
        jmp 2b
3:
        ret

/* ---- COM1 output: 115200 8N1, polled ---- */
serial_init:
        movw $COM1 + 1, %dx             /* no UART interrupts */
        xorb %al, %al
        outb %al, %dx
        movw $COM1 + 3, %dx
        movb $0x80, %al                 /* divisor latch */
        outb %al, %dx
        movw $COM1, %dx
        movb $1, %al                    /* 115200 baud */
        outb %al, %dx
        incw %dx
        xorb %al, %al
        outb %al, %dx
        movw $COM1 + 3, %dx
        movb $3, %al                    /* 8N1 */
        outb %al, %dx
        movw $COM1 + 2, %dx
        movb $0xc7, %al                 /* FIFOs on and cleared */
        outb %al, %dx
        movw $COM1 + 4, %dx
        movb $3, %al                    /* DTR, RTS */
        outb %al, %dx
        ret

putc:                                   /* AL */
        pushl %edx
        pushl %eax
        movw $COM1 + 5, %dx
1:
        inb %dx, %al
        testb $0x20, %al                /* transmitter holding register empty */
        jz 1b
        popl %eax
        movw $COM1, %dx
        outb %al, %dx
        popl %edx
        ret

puts:                                   /* ESI: NUL-terminated */
        lodsb
        testb %al, %al
        jz 1f
        call putc
        jmp puts
1:
        ret

putnl:
        movb $'\r', %al
        call putc
        movb $'\n', %al
        jmp putc

puthex:                                 /* EAX, as 0x%08x */
        pushl %eax
        movb $'0', %al
        call putc
        movb $'x', %al
        call putc
        popl %ebx
        movl $8, %ecx
1:
        roll $4, %ebx
        movb %bl, %al
        andb $0xf, %al
        addb $'0', %al
        cmpb $'9', %al
        jbe 2f
        addb $'a' - '9' - 1, %al
2:
        call putc
        loop 1b
        ret

putdec:                                 /* EAX, unsigned */
        movl $10, %ecx
        xorl %ebx, %ebx                 /* digits pushed */
1:
        xorl %edx, %edx
        divl %ecx
        pushl %edx
        incl %ebx
        testl %eax, %eax
        jnz 1b
2:
        popl %eax
        addb $'0', %al
        call putc
        decl %ebx
        jnz 2b
        ret

msg_fill:       .asciz "FILL done mib="
msg_verify_ok:  .asciz "VERIFY ok mib="
msg_verify_bad: .asciz "VERIFY BAD addr="
msg_mib:        .asciz " mib="
msg_sum:        .asciz " sum="
msg_n:          .asciz " n="
msg_ticks:      .asciz " ticks="
msg_no_ram:     .asciz "FILL failed: no RAM above 1 MiB\r\n"
msg_fault:      .asciz "FAULT\r\n"

        .org IMAGE_SECTORS * 512        /* fails to assemble if the code outgrew it */
