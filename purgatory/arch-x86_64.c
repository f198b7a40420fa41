/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Purgatory's hardware hooks on x86_64.
 */

#include <stddef.h>

#include "purgatory.h"

#define KBD_CONTROLLER_CMD  0x64
#define KBD_CMD_PULSE_RESET 0xfe
#define PCI_RESET_CONTROL   0xcf9
#define PCI_RESET_HARD_CPU  0x06

/* Contract and params live in the blob at PURGATORY_PARAMS_OFFSET (see the
 * linker script); the loader fills them in. */
struct purgatory_params purgatory_params __attribute__((section(".params"), used));

/* Purgatory's stack; in .data (-fno-zero-initialized-in-bss) so the blob has it. */
unsigned char purgatory_stack[PURGATORY_STACK_SIZE] __attribute__((aligned(16), used));

uint64_t purgatory_arch_counter(void) {
	uint32_t lo, hi;

	__asm__ volatile("lfence; rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}

/* The TSC's rate is the booted kernel's to say (tsc: Detected ... MHz). */
uint32_t purgatory_arch_counter_freq(void) {
	return 0;
}

/* The old kernel's identity map covers all memory, with caches coherent. */
void purgatory_arch_map(struct purgatory_params *p) {
}

void purgatory_arch_clean(uint64_t addr, uint64_t size) {
}

void purgatory_arch_outb(uint16_t port, uint8_t value) {
	__asm__ volatile("outb %0, %1" : : "a"(value), "Nd"(port));
}

uint8_t purgatory_arch_inb(uint16_t port) {
	uint8_t v;

	__asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}

/* Keyboard controller reset, then the PCI reset register, then a triple fault
 * (an empty IDT and an exception), which resets every x86 machine; x86 has
 * one reset_method. */
void purgatory_arch_reset(const struct purgatory_params *p) {
	static const struct {
		uint16_t limit;
		uint64_t base;
	} __attribute__((packed)) empty_idt = { 0, 0 };

	for (;;) {
		purgatory_arch_outb(KBD_CONTROLLER_CMD, KBD_CMD_PULSE_RESET);
		for (volatile unsigned i = 0; i < 100000; i++)
			;
		purgatory_arch_outb(PCI_RESET_CONTROL, PCI_RESET_HARD_CPU);
		for (volatile unsigned i = 0; i < 100000; i++)
			;
		__asm__ volatile("lidt %0; int3" : : "m"(empty_idt));
	}
}

void purgatory_entry_c(void);
void purgatory_entry_c(void) {
	purgatory_main(&purgatory_params);
}

/* x86_64 hashes on the CPU that entered purgatory, in SIMD lanes. */
unsigned purgatory_arch_cpus_start(struct purgatory_params *p, struct purgatory_work *w) {
	return 0;
}

unsigned purgatory_arch_cpus_stop(struct purgatory_params *p) {
	return 0;
}
