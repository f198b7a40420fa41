/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What arm64 purgatory's C files share: the translation regime it runs in
 * and system register access by regime. At EL1, and at EL2 with HCR_EL2.E2H
 * set (VHE), the *_EL1 names reach the current regime's registers (E2H
 * redirects them to the EL2 ones); at EL2 without E2H the *_EL2 registers,
 * with their own formats, are the ones in use.
 */

#include <stdbool.h>
#include <stdint.h>

#include "purgatory.h"

enum {
	REGIME_EL1,     /* entered at EL1: EL1&0 regime */
	REGIME_EL2,     /* entered at EL2, E2H clear: EL2 regime (nVHE hyp stub) */
	REGIME_EL2_E2H, /* entered at EL2, E2H set: EL2&0 regime (VHE kernel) */
};

/* Hidden, as everything the blob declares: reached PC-relative, never
 * through a GOT entry holding an absolute address. */
extern unsigned purgatory_regime __attribute__((visibility("hidden")));

#define SYSREG_READ(r)                                      \
	({                                                  \
		uint64_t v_;                                \
		__asm__ volatile("mrs %0, " #r : "=r"(v_)); \
		v_;                                         \
	})
#define SYSREG_WRITE(r, v) __asm__ volatile("msr " #r ", %0" : : "r"((uint64_t)(v)) : "memory")

/* The register of the current regime: name##_el2 at EL2 without E2H, else name##_el1. */
#define REGIME_READ(name) \
	(purgatory_regime == REGIME_EL2 ? SYSREG_READ(name##_el2) : SYSREG_READ(name##_el1))
#define REGIME_WRITE(name, v)                          \
	do {                                           \
		if (purgatory_regime == REGIME_EL2)    \
			SYSREG_WRITE(name##_el2, (v)); \
		else                                   \
			SYSREG_WRITE(name##_el1, (v)); \
	} while (0)

#define SCTLR_M   (UINT64_C(1) << 0)
#define SCTLR_A   (UINT64_C(1) << 1)
#define SCTLR_C   (UINT64_C(1) << 2)
#define SCTLR_I   (UINT64_C(1) << 12)
#define SCTLR_WXN (UINT64_C(1) << 19)

/* The cache line size for maintenance by VA (CTR_EL0.DminLine). */
static inline uint64_t dcache_line(void) {
	return UINT64_C(4) << ((SYSREG_READ(ctr_el0) >> 16) & 0xf);
}

/* Clean and invalidate [addr, addr + size) to the PoC by VA (= PA: identity). */
void arm64_dcache_clean_inval(uint64_t addr, uint64_t size);
/* Invalidate only: for memory written with the MMU off, whose cache lines
 * (none expected) would be stale. */
void arm64_dcache_inval(uint64_t addr, uint64_t size);
void arm64_tlb_flush(void);

/* mmu-arm64.c: builds the identity map of what p makes purgatory touch and
 * turns the MMU and the caches on; false (MMU still off) when the map cannot
 * be built here: no 4 KiB granule, an address beyond 48 bits, the table pool
 * exhausted. */
bool arm64_mmu_on(const struct purgatory_params *p, uint64_t blob_start, uint64_t blob_end);
