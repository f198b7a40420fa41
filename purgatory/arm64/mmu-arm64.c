/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * arm64 purgatory's identity map (docs/purgatory.md, "arm64"): 4 KiB
 * granule, 48-bit addresses, four levels, tables from a pool inside the blob.
 * Mapped, and nothing else: the UART page as Device-nGnRE, the blob as
 * normal write-back memory (executable), every listed segment and the stamps
 * field as normal write-back memory, never executable. Exactly those pages:
 * 2 MiB blocks only where a whole block lies inside a range, so no mapping
 * reaches memory the old kernel kept from itself (no-map firmware carve-outs,
 * device windows), where even a speculative cacheable read may abort. The
 * first mapping of a page wins, and the UART and the blob are mapped first.
 */

#include "arm64.h"

#define PAGE_SIZE  UINT64_C(4096)
#define BLOCK_SIZE (UINT64_C(2) << 20)
#define VA_BITS    48
#define POOL_PAGES 48 /* 192 KiB: 2 levels per GiB touched, 1 table per partial block */

#define DESC_VALID  UINT64_C(1)
#define DESC_TABLE  UINT64_C(3) /* levels 0-2: next-level table; level 3: page */
#define DESC_BLOCK  UINT64_C(1)
#define DESC_ADDR   UINT64_C(0x0000fffffffff000)
#define ATTR_IDX(i) ((uint64_t)(i) << 2)
#define ATTR_AP1    (UINT64_C(1) << 6) /* RES1 in the EL2 regime without E2H */
#define ATTR_SH_IS  (UINT64_C(3) << 8)
#define ATTR_AF     (UINT64_C(1) << 10)
#define ATTR_PXN    (UINT64_C(1) << 53)
#define ATTR_XN     (UINT64_C(1) << 54) /* UXN in the EL1&0 and EL2&0 regimes */

#define MAIR_DEVICE_NGNRE 0x04 /* attribute index 0 */
#define MAIR_NORMAL_WB    0xff /* index 1: inner and outer write-back, read/write-allocate */

/* TCR (EL1 layout, also TCR_EL2 with E2H; EL2 without E2H shares the low bits). */
#define TCR_T0SZ         (64 - VA_BITS)
#define TCR_IRGN0_WB     (UINT64_C(1) << 8)
#define TCR_ORGN0_WB     (UINT64_C(1) << 10)
#define TCR_SH0_IS       (UINT64_C(3) << 12)
#define TCR_EPD1         (UINT64_C(1) << 23)
#define TCR_IPS_SHIFT    32
#define TCR_EL2_PS_SHIFT 16
#define TCR_EL2_RES1     ((UINT64_C(1) << 31) | (UINT64_C(1) << 23))

enum { KIND_DEVICE, KIND_CODE, KIND_DATA };

static uint64_t pool[POOL_PAGES][512] __attribute__((aligned(4096)));
static unsigned pool_used;

static uint64_t *table_new(void) {
	uint64_t *t;

	if (pool_used >= POOL_PAGES)
		return NULL;
	t = pool[pool_used++];
	for (unsigned i = 0; i < 512; i++)
		t[i] = 0;
	return t;
}

static uint64_t leaf_attrs(unsigned kind) {
	uint64_t a = ATTR_AF;
	bool el2 = purgatory_regime == REGIME_EL2;

	if (el2)
		a |= ATTR_AP1;
	if (kind == KIND_DEVICE)
		a |= ATTR_IDX(0);
	else
		a |= ATTR_IDX(1) | ATTR_SH_IS;
	if (kind != KIND_CODE)
		a |= ATTR_XN | (el2 ? 0 : ATTR_PXN);
	return a;
}

/* The entry for va at level `level` (2: 2 MiB, 3: 4 KiB), making tables on
 * the way down. NULL when the pool is exhausted, or when a block above
 * already maps va (*covered set). */
static uint64_t *walk(uint64_t *l0, uint64_t va, unsigned level, bool *covered) {
	uint64_t *t = l0;

	*covered = false;
	for (unsigned l = 0; l < level; l++) {
		uint64_t *e = &t[(va >> (39 - 9 * l)) & 511];

		if ((*e & DESC_TABLE) == DESC_BLOCK) {
			*covered = true;
			return NULL;
		}
		if (!(*e & DESC_VALID)) {
			uint64_t *n = table_new();

			if (!n)
				return NULL;
			*e = (uintptr_t)n | DESC_TABLE;
		}
		t = (uint64_t *)(uintptr_t)(*e & DESC_ADDR);
	}
	return &t[(va >> (39 - 9 * level)) & 511];
}

/* [start, end) rounded out to pages; false when the pool ran out. */
static bool map_range(uint64_t *l0, uint64_t start, uint64_t end, unsigned kind) {
	uint64_t attrs = leaf_attrs(kind);
	bool covered;

	start &= ~(PAGE_SIZE - 1);
	end = (end + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1);
	while (start < end) {
		bool block =
		        kind != KIND_DEVICE && start % BLOCK_SIZE == 0 && end - start >= BLOCK_SIZE;
		uint64_t *e = walk(l0, start, block ? 2 : 3, &covered);

		if (!e && !covered)
			return false;
		if (e && block && (*e & DESC_VALID) && (*e & DESC_TABLE) == DESC_TABLE) {
			/* A table of pages is there (an earlier range's edge): fill it. */
			for (uint64_t a = start; a < start + BLOCK_SIZE; a += PAGE_SIZE) {
				uint64_t *pe = walk(l0, a, 3, &covered);

				if (pe && !(*pe & DESC_VALID))
					*pe = a | attrs | DESC_TABLE;
			}
		} else if (e && !(*e & DESC_VALID))
			*e = start | attrs | (block ? DESC_BLOCK : DESC_TABLE);
		start += block ? BLOCK_SIZE : PAGE_SIZE;
	}
	return true;
}

static bool fits(uint64_t addr, uint64_t size, uint64_t pa_limit) {
	return addr < pa_limit && size <= pa_limit - addr;
}

/* All ranges, or false. pa_limit: what the CPU and 48-bit tables reach. */
static bool map_all(uint64_t *l0, const struct purgatory_params *p, uint64_t blob_start,
                    uint64_t blob_end, uint64_t pa_limit) {
	if (p->console_kind != PURGATORY_CONSOLE_PORT && p->console_base != 0) {
		if (!fits(p->console_base, PAGE_SIZE, pa_limit) ||
		    !map_range(l0, p->console_base, p->console_base + 1, KIND_DEVICE))
			return false;
	}
	if (!fits(blob_start, blob_end - blob_start, pa_limit) ||
	    !map_range(l0, blob_start, blob_end, KIND_CODE))
		return false;
	for (unsigned i = 0; i < p->nr_segments && i < PURGATORY_MAX_SEGMENTS; i++) {
		const struct purgatory_segment *s = &p->segments[i];

		if (!fits(s->addr, s->memsz, pa_limit) ||
		    !map_range(l0, s->addr, s->addr + s->memsz, KIND_DATA))
			return false;
	}
	if (p->stamps_addr != 0 &&
	    (!fits(p->stamps_addr, p->stamps_len, pa_limit) ||
	     !map_range(l0, p->stamps_addr, p->stamps_addr + p->stamps_len, KIND_DATA)))
		return false;
	return true;
}

bool arm64_mmu_on(const struct purgatory_params *p, uint64_t blob_start, uint64_t blob_end) {
	uint64_t mmfr0 = SYSREG_READ(id_aa64mmfr0_el1);
	uint64_t parange = mmfr0 & 0xf, tgran4 = (mmfr0 >> 28) & 0xf;
	uint64_t ps = parange > 5 ? 5 : parange; /* 48 bits at most with these tables */
	static const unsigned pa_bits[] = { 32, 36, 40, 42, 44, 48 };
	uint64_t tcr, sctlr, *l0;

	if (tgran4 == 0xf)
		return false;
	pool_used = 0;
	l0 = table_new();
	if (!map_all(l0, p, blob_start, blob_end, UINT64_C(1) << pa_bits[ps]))
		return false;

	/* The tables, the stack, the parameters went to memory uncached (MMU
	 * off); the walker and purgatory read them through the caches from now
	 * on, which must hold no older line of them. */
	__asm__ volatile("dsb sy" : : : "memory");
	arm64_dcache_inval(blob_start, blob_end - blob_start);

	tcr = TCR_T0SZ | TCR_IRGN0_WB | TCR_ORGN0_WB | TCR_SH0_IS;
	if (purgatory_regime == REGIME_EL2)
		tcr |= TCR_EL2_RES1 | ps << TCR_EL2_PS_SHIFT;
	else
		tcr |= TCR_EPD1 | ps << TCR_IPS_SHIFT;
	REGIME_WRITE(mair, (uint64_t)MAIR_NORMAL_WB << 8 | MAIR_DEVICE_NGNRE);
	REGIME_WRITE(tcr, tcr);
	REGIME_WRITE(ttbr0, (uintptr_t)l0);
	__asm__ volatile("isb" : : : "memory");
	arm64_tlb_flush();

	sctlr = REGIME_READ(sctlr);
	sctlr = (sctlr | SCTLR_M | SCTLR_C | SCTLR_I) & ~(SCTLR_A | SCTLR_WXN);
	REGIME_WRITE(sctlr, sctlr);
	__asm__ volatile("isb" : : : "memory");
	return true;
}
