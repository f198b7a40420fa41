/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * SHA-256 on arm64 (see sha256.h): the ARMv8 SHA-2 instructions
 * (sha256-ce.S) where the CPU has them, the portable code otherwise. User
 * space asks the kernel (getauxval(AT_HWCAP) & HWCAP_SHA2); purgatory, with
 * no kernel, reads ID_AA64ISAR0_EL1.SHA2 itself. Freestanding like sha256.c.
 */

#include "sha256-internal.h"

#if __STDC_HOSTED__
#include <sys/auxv.h>
#ifndef HWCAP_SHA2
#define HWCAP_SHA2 (1UL << 6) /* arch/arm64/include/uapi/asm/hwcap.h */
#endif
#endif

#define ID_AA64ISAR0_SHA2_SHIFT 12 /* 0b0001 SHA-256, 0b0010 SHA-256 and SHA-512 */

bool sha256_arm64_isar0_has_sha256(uint64_t isar0) {
	return ((isar0 >> ID_AA64ISAR0_SHA2_SHIFT) & 0xf) >= 1;
}

static bool cpu_has_sha256(void) {
#if __STDC_HOSTED__
	return getauxval(AT_HWCAP) & HWCAP_SHA2;
#else
	uint64_t isar0;

	__asm__ volatile("mrs %0, id_aa64isar0_el1" : "=r"(isar0));
	return sha256_arm64_isar0_has_sha256(isar0);
#endif
}

bool sha256_impl_supported(Sha256Impl impl) {
	switch (impl) {
	case SHA256_IMPL_GENERIC:
		return true;
	case SHA256_IMPL_ARMV8_CE:
		return cpu_has_sha256();
	default:
		return false;
	}
}

Sha256Impl sha256_impl_best(void) {
	return cpu_has_sha256() ? SHA256_IMPL_ARMV8_CE : SHA256_IMPL_GENERIC;
}

bool sha256_arch_blocks(Sha256Impl impl, uint32_t state[8], const uint8_t *data, size_t nblocks) {
	if (impl != SHA256_IMPL_ARMV8_CE)
		return false;
	sha256_blocks_ce(state, data, nblocks);
	return true;
}

/* One lane: a single sha256h chain. */
bool sha256_mb_arch_run(struct sha256_mb *mb, uint64_t n) {
	return false;
}

uint64_t sha256_ticks(void) {
	uint64_t v;

	__asm__ volatile("isb; mrs %0, cntvct_el0" : "=r"(v) : : "memory");
	return v;
}
