/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * SHA-256 (FIPS 180-4) for both sides of a kexec handoff: the loader hashes the
 * segments at stage time, purgatory hashes them again between the kernels.
 * The same source builds into host programs and into the freestanding
 * purgatory, so this header and sha256.c use no libc (only compiler headers).
 *
 * Block functions chosen at run time, by architecture:
 *   x86_64 (sha256-x86_64.c, sha256-sse2.S), from CPUID:
 *   SHA256_IMPL_SHANI   Intel SHA extensions (sha256rnds2/msg1/msg2)
 *   SHA256_IMPL_AVX2    message schedule of two blocks at once in ymm registers,
 *                       rounds in general registers with BMI2 rorx
 *   SHA256_IMPL_SSE2    x86_64 assembly, rounds unrolled with immediate
 *                       constants, the message schedule in the xmm registers:
 *                       no memory access but the message and the state, which
 *                       is what an emulated CPU (QEMU's TCG) rewards
 *   arm64 (sha256-arm64.c, sha256-ce.S), from HWCAP_SHA2 in user space and
 *   ID_AA64ISAR0_EL1 in purgatory:
 *   SHA256_IMPL_ARMV8_CE the ARMv8 SHA-2 instructions (sha256h/h2/su0/su1)
 *   everywhere (sha256.c):
 *   SHA256_IMPL_GENERIC portable C, the baseline the kernel's purgatory uses
 * Every implementation produces the same digest; the tests prove it. This is
 * the single-stream API (one message at a time); sha256-mb.h hashes many
 * messages at once (what purgatory uses), and its calibration picks the
 * implementation purgatory runs.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST_SIZE 32
#define SHA256_BLOCK_SIZE  64

typedef enum Sha256Impl {
	SHA256_IMPL_GENERIC,
	SHA256_IMPL_AVX2,
	SHA256_IMPL_SHANI,
	SHA256_IMPL_SSE2,
	SHA256_IMPL_ARMV8_CE, /* last: purgatory's sha256_impl_request numbers are an ABI */
	_SHA256_IMPL_MAX,
	_SHA256_IMPL_INVALID = -1,
} Sha256Impl;

/* No pointers inside: purgatory runs without relocation processing. */
struct sha256_ctx {
	uint32_t state[8];
	uint64_t length; /* bytes hashed so far */
	uint8_t buffer[SHA256_BLOCK_SIZE];
	uint32_t buffered;
	Sha256Impl impl;
};

/* True when this CPU (and the OS state: XSAVE-enabled ymm registers for AVX2)
 * can run impl. SHA256_IMPL_GENERIC is always supported. */
bool sha256_impl_supported(Sha256Impl impl);

/* The implementation expected to be fastest from CPUID (SHA-NI, AVX2,
 * generic) or the arm64 ID registers (the SHA-2 instructions, generic). */
Sha256Impl sha256_impl_best(void);

/* "generic", "avx2", "sha-ni", "sse2", "armv8-ce"; NULL for an invalid value. */
const char *sha256_impl_to_string(Sha256Impl impl);
/* The reverse; _SHA256_IMPL_INVALID for an unknown name. */
Sha256Impl sha256_impl_from_string(const char *s);

/* Starts a hash with impl, which must be supported (else it uses generic). */
void sha256_init_impl(struct sha256_ctx *ctx, Sha256Impl impl);
/* Starts a hash with the best implementation. */
void sha256_init(struct sha256_ctx *ctx);
void sha256_update(struct sha256_ctx *ctx, const void *data, size_t size);
/* Writes the digest; ctx must be initialized again before reuse. */
void sha256_final(struct sha256_ctx *ctx, uint8_t ret_digest[static SHA256_DIGEST_SIZE]);

/* One-shot helpers. */
void sha256_digest_impl(Sha256Impl impl, const void *data, size_t size,
                        uint8_t ret_digest[static SHA256_DIGEST_SIZE]);
void sha256_digest(const void *data, size_t size, uint8_t ret_digest[static SHA256_DIGEST_SIZE]);
