/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Purgatory's hardware hooks on arm64 (see purgatory.h), its C entry, and
 * the exception handler. entry.S runs before and after.
 */

#include <stddef.h>

#include "arm64.h"

#define CPACR_FPEN        (UINT64_C(3) << 20) /* CPACR_EL1, and CPTR_EL2 with E2H */
#define CPTR_EL2_TFP      (UINT64_C(1) << 10) /* CPTR_EL2 without E2H */
#define HCR_EL2_E2H       (UINT64_C(1) << 34)
#define PSCI_SYSTEM_RESET UINT64_C(0x84000009)

/* Contract and params live in the blob at PURGATORY_PARAMS_OFFSET (see the
 * linker script); the loader fills them in. */
struct purgatory_params purgatory_params __attribute__((section(".params"), used));

/* Purgatory's stack; in .data (-fno-zero-initialized-in-bss) so the blob has it. */
unsigned char purgatory_stack[PURGATORY_STACK_SIZE] __attribute__((aligned(16), used));

/* For entry.S's exit: SCTLR and the FP/SIMD access control as found. */
uint64_t purgatory_exit_state[2] __attribute__((used));

unsigned purgatory_regime;
static unsigned reset_attempts;

extern const char __purgatory_start[] __attribute__((visibility("hidden")));
extern const char __purgatory_end[] __attribute__((visibility("hidden")));
extern const char purgatory_vectors[] __attribute__((visibility("hidden")));

uint64_t purgatory_arch_counter(void) {
	uint64_t v;

	__asm__ volatile("isb; mrs %0, cntvct_el0" : "=r"(v) : : "memory");
	return v;
}

uint32_t purgatory_arch_counter_freq(void) {
	return (uint32_t)SYSREG_READ(cntfrq_el0);
}

/* arm64 has no I/O ports: PURGATORY_CONSOLE_PORT means no console here. */
void purgatory_arch_outb(uint16_t port, uint8_t value) {
}

uint8_t purgatory_arch_inb(uint16_t port) {
	return 0xff;
}

void arm64_dcache_clean_inval(uint64_t addr, uint64_t size) {
	uint64_t line = dcache_line();

	for (uint64_t a = addr & ~(line - 1); a < addr + size; a += line)
		__asm__ volatile("dc civac, %0" : : "r"(a) : "memory");
	__asm__ volatile("dsb sy" : : : "memory");
}

void arm64_dcache_inval(uint64_t addr, uint64_t size) {
	uint64_t line = dcache_line();

	for (uint64_t a = addr & ~(line - 1); a < addr + size; a += line)
		__asm__ volatile("dc ivac, %0" : : "r"(a) : "memory");
	__asm__ volatile("dsb sy" : : : "memory");
}

void arm64_tlb_flush(void) {
	if (purgatory_regime == REGIME_EL1)
		__asm__ volatile("dsb ishst; tlbi vmalle1; dsb ish; isb" : : : "memory");
	else
		__asm__ volatile("dsb ishst; tlbi alle2; dsb ish; isb" : : : "memory");
}

void purgatory_arch_clean(uint64_t addr, uint64_t size) {
	arm64_dcache_clean_inval(addr, size);
}

void purgatory_arch_map(struct purgatory_params *p) {
	if (p->flags & PURGATORY_FLAG_MMU_OFF)
		return;
	if (arm64_mmu_on(p, (uintptr_t)__purgatory_start, (uintptr_t)__purgatory_end))
		p->arch_state |= PURGATORY_ARCH_STATE_MMU;
	else
		p->arch_state |= PURGATORY_ARCH_STATE_NO_MMU;
}

static uint64_t psci_call(bool smc, uint64_t fn) {
	register uint64_t x0 __asm__("x0") = fn;

	/* SMCCC 1.0 lets the callee clobber x0-x17. */
	if (smc)
		__asm__ volatile("smc #0"
		                 : "+r"(x0)
		                 :
		                 : "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10",
		                   "x11", "x12", "x13", "x14", "x15", "x16", "x17", "memory");
	else
		__asm__ volatile("hvc #0"
		                 : "+r"(x0)
		                 :
		                 : "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10",
		                   "x11", "x12", "x13", "x14", "x15", "x16", "x17", "memory");
	return x0;
}

/*
 * PSCI SYSTEM_RESET through the conduit p names (the DT's /psci method). At
 * EL2 an HVC would trap to purgatory itself, so EL2 always uses SMC. When the
 * call returns or traps (back here through the vectors), the other conduit
 * is tried once at EL1; then purgatory says so and waits for an interrupt
 * that never comes (masked): a stop with a reason, not a silent spin.
 */
void purgatory_arch_reset(const struct purgatory_params *p) {
	bool el2 = purgatory_regime != REGIME_EL1;
	bool smc = el2 || p->reset_method == PURGATORY_RESET_PSCI_SMC;
	unsigned attempt = reset_attempts++;

	if (attempt == 0)
		(void)psci_call(smc, PSCI_SYSTEM_RESET);
	else if (attempt == 1 && !el2)
		(void)psci_call(!smc, PSCI_SYSTEM_RESET);
	purgatory_console_line(p, "PSCI SYSTEM_RESET did not reset; halted");
	for (;;)
		__asm__ volatile("wfi");
}

/* FP/SIMD access at the current EL (the ARMv8 SHA-2 instructions use the
 * vector registers); the previous control is put back at the exit. */
static void fpsimd_enable(void) {
	uint64_t v;

	if (purgatory_regime == REGIME_EL2) {
		v = SYSREG_READ(cptr_el2);
		purgatory_exit_state[1] = v;
		SYSREG_WRITE(cptr_el2, v & ~CPTR_EL2_TFP);
	} else {
		v = SYSREG_READ(cpacr_el1);
		purgatory_exit_state[1] = v;
		SYSREG_WRITE(cpacr_el1, v | CPACR_FPEN);
	}
	__asm__ volatile("isb" : : : "memory");
}

unsigned purgatory_entry_c(void);
unsigned purgatory_entry_c(void) {
	struct purgatory_params *p = &purgatory_params;
	unsigned el = (unsigned)(SYSREG_READ(CurrentEL) >> 2) & 3;

	purgatory_regime = REGIME_EL1;
	if (el == 2)
		purgatory_regime =
		        (SYSREG_READ(hcr_el2) & HCR_EL2_E2H) ? REGIME_EL2_E2H : REGIME_EL2;
	p->arch_state = el | (purgatory_regime == REGIME_EL2_E2H ? PURGATORY_ARCH_STATE_E2H : 0);
	purgatory_exit_state[0] = REGIME_READ(sctlr);
	REGIME_WRITE(vbar, (uintptr_t)purgatory_vectors);
	__asm__ volatile("isb" : : : "memory");
	fpsimd_enable();

	purgatory_main(p);
	return purgatory_regime;
}

void purgatory_exception_c(unsigned vector);
void purgatory_exception_c(unsigned vector) {
	const struct purgatory_params *p = &purgatory_params;

	purgatory_console_exception(p, vector, REGIME_READ(esr), REGIME_READ(elr),
	                            REGIME_READ(far));
	purgatory_arch_reset(p);
}
