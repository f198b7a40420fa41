/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Hashing on every CPU (docs/purgatory.md, "arm64: hashing on every CPU"). At
 * a kexec the old kernel took every secondary CPU offline with PSCI CPU_OFF;
 * the boot CPU, after its own MMU setup, starts each CPU the parameters list
 * with PSCI 0.2's CPU_ON at purgatory_secondary_entry (entry.S), each with
 * its own stack. They take the boot CPU's translation regime, hash chunks
 * (purgatory_work_run()) and turn themselves off with CPU_OFF. Before the
 * jump the boot CPU waits, bounded, for AFFINITY_INFO to say each is off.
 */

#include <stddef.h>

#include "arm64.h"
#include "smp-boot.h"

#define PSCI_0_2_VERSION       UINT64_C(0x84000000)
#define PSCI_0_2_CPU_ON_64     UINT64_C(0xc4000003)
#define PSCI_0_2_AFFINITY_INFO UINT64_C(0xc4000004)
#define PSCI_AFFINITY_OFF      1
#define PSCI_VERSION_0_2       0x00000002u            /* major << 16 | minor */
#define MPIDR_AFFINITY_MASK    UINT64_C(0xff00ffffff) /* Aff3, Aff2, Aff1, Aff0 */
/* A secondary's stack: purgatory_work_run() down to the generic SHA-256
 * blocks takes under 600 bytes (-fstack-usage); nothing else runs there. */
#define SECONDARY_STACK_SIZE   2048
/* How long the boot CPU waits for the CPUs it started to be off. */
#define OFF_WAIT_SECONDS       2

struct smp_boot {
	uint64_t el, hcr, mair, tcr, ttbr0, sctlr, cpacr, vbar, smc;
};
_Static_assert(offsetof(struct smp_boot, el) == SMP_BOOT_EL, "smp_boot el");
_Static_assert(offsetof(struct smp_boot, hcr) == SMP_BOOT_HCR, "smp_boot hcr");
_Static_assert(offsetof(struct smp_boot, mair) == SMP_BOOT_MAIR, "smp_boot mair");
_Static_assert(offsetof(struct smp_boot, tcr) == SMP_BOOT_TCR, "smp_boot tcr");
_Static_assert(offsetof(struct smp_boot, ttbr0) == SMP_BOOT_TTBR0, "smp_boot ttbr0");
_Static_assert(offsetof(struct smp_boot, sctlr) == SMP_BOOT_SCTLR, "smp_boot sctlr");
_Static_assert(offsetof(struct smp_boot, cpacr) == SMP_BOOT_CPACR, "smp_boot cpacr");
_Static_assert(offsetof(struct smp_boot, vbar) == SMP_BOOT_VBAR, "smp_boot vbar");
_Static_assert(offsetof(struct smp_boot, smc) == SMP_BOOT_SMC, "smp_boot smc");
_Static_assert(sizeof(struct smp_boot) == SMP_BOOT_SIZE, "smp_boot size");

struct smp_boot purgatory_smp_boot __attribute__((used, aligned(64)));

static unsigned char secondary_stacks[PURGATORY_MAX_CPUS - 1][SECONDARY_STACK_SIZE]
        __attribute__((aligned(16)));
static uint64_t started[PURGATORY_MAX_CPUS - 1];
static unsigned nr_started;
static struct purgatory_work *secondary_work;

extern const char purgatory_secondary_entry[] __attribute__((visibility("hidden")));
extern const char purgatory_secondary_vectors[] __attribute__((visibility("hidden")));

static int64_t psci_call3(bool smc, uint64_t fn, uint64_t a1, uint64_t a2, uint64_t a3) {
	register uint64_t x0 __asm__("x0") = fn;
	register uint64_t x1 __asm__("x1") = a1;
	register uint64_t x2 __asm__("x2") = a2;
	register uint64_t x3 __asm__("x3") = a3;

	/* SMCCC 1.0 lets the callee clobber x0-x17. */
	if (smc)
		__asm__ volatile("smc #0"
		                 : "+r"(x0), "+r"(x1), "+r"(x2), "+r"(x3)
		                 :
		                 : "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11", "x12", "x13",
		                   "x14", "x15", "x16", "x17", "memory");
	else
		__asm__ volatile("hvc #0"
		                 : "+r"(x0), "+r"(x1), "+r"(x2), "+r"(x3)
		                 :
		                 : "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11", "x12", "x13",
		                   "x14", "x15", "x16", "x17", "memory");
	return (int64_t)x0;
}

/* The boot CPU's regime, for CPUs that start with their MMU off. */
static void smp_boot_fill(bool smc) {
	struct smp_boot *b = &purgatory_smp_boot;
	uint64_t el = SYSREG_READ(CurrentEL);

	b->el = el;
	b->smc = smc;
	b->vbar = (uintptr_t)purgatory_secondary_vectors;
	if (((el >> 2) & 3) == 2) {
		b->hcr = SYSREG_READ(hcr_el2);
		b->mair = SYSREG_READ(mair_el2);
		b->tcr = SYSREG_READ(tcr_el2);
		b->ttbr0 = SYSREG_READ(ttbr0_el2);
		b->sctlr = SYSREG_READ(sctlr_el2);
		b->cpacr = SYSREG_READ(cptr_el2);
	} else {
		b->hcr = 0;
		b->mair = SYSREG_READ(mair_el1);
		b->tcr = SYSREG_READ(tcr_el1);
		b->ttbr0 = SYSREG_READ(ttbr0_el1);
		b->sctlr = SYSREG_READ(sctlr_el1);
		b->cpacr = SYSREG_READ(cpacr_el1);
	}
	arm64_dcache_clean_inval((uintptr_t)b, sizeof(*b));
}

/* PSCI by the conduit p names: SMC at EL2 whatever it says (an HVC there
 * would trap to purgatory). False: no PSCI 0.2 to start CPUs with. */
static bool psci_conduit(const struct purgatory_params *p, bool *ret_smc) {
	bool smc = purgatory_regime != REGIME_EL1 || p->psci_conduit == PURGATORY_PSCI_SMC;
	int64_t v;

	if (p->psci_conduit != PURGATORY_PSCI_SMC && p->psci_conduit != PURGATORY_PSCI_HVC)
		return false;
	v = psci_call3(smc, PSCI_0_2_VERSION, 0, 0, 0);
	if (v < 0 || (uint32_t)v < PSCI_VERSION_0_2)
		return false;
	*ret_smc = smc;
	return true;
}

unsigned purgatory_arch_cpus_start(struct purgatory_params *p, struct purgatory_work *w) {
	uint64_t self = SYSREG_READ(mpidr_el1) & MPIDR_AFFINITY_MASK;
	bool smc;

	nr_started = 0;
	/* Atomics want normal cacheable memory: only with the MMU on. */
	if (!(p->arch_state & PURGATORY_ARCH_STATE_MMU) || (p->flags & PURGATORY_FLAG_PANIC) ||
	    p->nr_cpus < 2 || p->nr_cpus > PURGATORY_MAX_CPUS || !psci_conduit(p, &smc))
		return 0;
	secondary_work = w;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	smp_boot_fill(smc);
	for (unsigned i = 0; i < p->nr_cpus && nr_started < PURGATORY_MAX_CPUS - 1; i++) {
		uint64_t mpidr = p->cpu_mpidr[i] & MPIDR_AFFINITY_MASK;
		uintptr_t stack_top =
		        (uintptr_t)secondary_stacks[nr_started] + SECONDARY_STACK_SIZE;

		if (mpidr == self)
			continue;
		/* ALREADY_ON, DENIED, INVALID_PARAMETERS...: that CPU does not hash. */
		if (psci_call3(smc, PSCI_0_2_CPU_ON_64, mpidr, (uintptr_t)purgatory_secondary_entry,
		               stack_top) == 0)
			started[nr_started++] = mpidr;
	}
	return nr_started;
}

unsigned purgatory_arch_cpus_stop(struct purgatory_params *p) {
	uint64_t freq = p->counter_freq ? p->counter_freq : UINT64_C(1000000000);
	uint64_t deadline = purgatory_arch_counter() + freq * OFF_WAIT_SECONDS;
	bool smc = purgatory_smp_boot.smc != 0;
	unsigned left_on = 0;

	for (unsigned i = 0; i < nr_started; i++) {
		while (psci_call3(smc, PSCI_0_2_AFFINITY_INFO, started[i], 0, 0) !=
		               PSCI_AFFINITY_OFF &&
		       purgatory_arch_counter() < deadline)
			;
		if (psci_call3(smc, PSCI_0_2_AFFINITY_INFO, started[i], 0, 0) != PSCI_AFFINITY_OFF)
			left_on++;
	}
	return left_on;
}

/* A secondary CPU's C, on its own stack with the MMU on; entry.S turns the
 * CPU off when it returns. */
void purgatory_secondary_c(void);
void purgatory_secondary_c(void) {
	struct purgatory_work *w = secondary_work;

	if (w)
		(void)purgatory_work_run(w, NULL);
}
