/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * SHA-256 per FIPS 180-4: the portable block function and the streaming API,
 * on every architecture. The architecture's own block functions and the
 * choice among them (CPUID, ID registers) are in sha256-x86_64.c and
 * sha256-arm64.c. Freestanding: no libc calls, no global state, no data that
 * holds pointers (purgatory runs without relocation processing).
 */

#include "sha256-internal.h"

/* FIPS 180-4 section 4.2.2: first 32 bits of the fractional parts of the cube
 * roots of the first 64 primes. */
const uint32_t sha256_k[64] __attribute__((aligned(32))) = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
	0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
	0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
	0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
	0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
	0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
	0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
	0xc67178f2,
};

/* FIPS 180-4 section 5.3.3: initial hash value. */
const uint32_t sha256_h0[8] = {
	0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
	0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
};

static inline uint32_t load_be32(const uint8_t *p) {
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void store_be32(uint8_t *p, uint32_t v) {
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

typedef uint32_t __attribute__((may_alias)) aligned_word_t;

/* Portable block function: the message schedule lives in a 16-word ring. */
static void sha256_blocks_generic(uint32_t state[8], const uint8_t *data, size_t nblocks) {
	for (; nblocks > 0; nblocks--, data += SHA256_BLOCK_SIZE) {
		uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
		uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
		uint32_t bc = b ^ c;
		uint32_t w[16];

		/* Word loads where the block is aligned (purgatory's always are):
		 * built with -mstrict-align the compiler cannot merge the bytes, and
		 * an emulator pays for every access. */
		if (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && ((uintptr_t)data & 3) == 0)
			for (unsigned i = 0; i < 16; i++)
				w[i] = __builtin_bswap32(((const aligned_word_t *)data)[i]);
		else
			for (unsigned i = 0; i < 16; i++)
				w[i] = load_be32(data + 4 * i);

		for (unsigned t = 0; t < 64; t += 8) {
			if (t >= 16)
				for (unsigned i = 0; i < 8; i++) {
					unsigned j = t + i;
					w[j & 15] += SSIG1(w[(j - 2) & 15]) + w[(j - 7) & 15] +
					             SSIG0(w[(j - 15) & 15]);
				}
			ROUND(a, b, c, d, e, f, g, h, w[(t + 0) & 15] + sha256_k[t + 0]);
			ROUND(h, a, b, c, d, e, f, g, w[(t + 1) & 15] + sha256_k[t + 1]);
			ROUND(g, h, a, b, c, d, e, f, w[(t + 2) & 15] + sha256_k[t + 2]);
			ROUND(f, g, h, a, b, c, d, e, w[(t + 3) & 15] + sha256_k[t + 3]);
			ROUND(e, f, g, h, a, b, c, d, w[(t + 4) & 15] + sha256_k[t + 4]);
			ROUND(d, e, f, g, h, a, b, c, w[(t + 5) & 15] + sha256_k[t + 5]);
			ROUND(c, d, e, f, g, h, a, b, w[(t + 6) & 15] + sha256_k[t + 6]);
			ROUND(b, c, d, e, f, g, h, a, w[(t + 7) & 15] + sha256_k[t + 7]);
		}

		SHA256_STATE_ADD(state, a, b, c, d, e, f, g, h);
	}
}

static bool str_equal(const char *a, const char *b) {
	for (; *a && *a == *b; a++, b++)
		;
	return *a == *b;
}

const char *sha256_impl_to_string(Sha256Impl impl) {
	switch (impl) {
	case SHA256_IMPL_GENERIC:
		return "generic";
	case SHA256_IMPL_AVX2:
		return "avx2";
	case SHA256_IMPL_SHANI:
		return "sha-ni";
	case SHA256_IMPL_SSE2:
		return "sse2";
	case SHA256_IMPL_ARMV8_CE:
		return "armv8-ce";
	default:
		return NULL;
	}
}

Sha256Impl sha256_impl_from_string(const char *s) {
	if (!s)
		return _SHA256_IMPL_INVALID;
	for (int i = 0; i < _SHA256_IMPL_MAX; i++)
		if (str_equal(s, sha256_impl_to_string(i)))
			return i;
	return _SHA256_IMPL_INVALID;
}

/* Calls, not function pointers: no relocations for purgatory. */
void sha256_blocks_impl(Sha256Impl impl, uint32_t state[8], const uint8_t *data, size_t nblocks) {
	if (impl == SHA256_IMPL_GENERIC || !sha256_arch_blocks(impl, state, data, nblocks))
		sha256_blocks_generic(state, data, nblocks);
}

void sha256_init_impl(struct sha256_ctx *ctx, Sha256Impl impl) {
	for (unsigned i = 0; i < 8; i++)
		ctx->state[i] = sha256_h0[i];
	ctx->length = 0;
	ctx->buffered = 0;
	ctx->impl = sha256_impl_supported(impl) ? impl : SHA256_IMPL_GENERIC;
}

void sha256_init(struct sha256_ctx *ctx) {
	sha256_init_impl(ctx, sha256_impl_best());
}

void sha256_update(struct sha256_ctx *ctx, const void *data, size_t size) {
	const uint8_t *p = data;

	ctx->length += size;

	if (ctx->buffered > 0) {
		while (size > 0 && ctx->buffered < SHA256_BLOCK_SIZE) {
			ctx->buffer[ctx->buffered++] = *p++;
			size--;
		}
		if (ctx->buffered < SHA256_BLOCK_SIZE)
			return;
		sha256_blocks_impl(ctx->impl, ctx->state, ctx->buffer, 1);
		ctx->buffered = 0;
	}

	if (size >= SHA256_BLOCK_SIZE) {
		size_t n = size / SHA256_BLOCK_SIZE;

		sha256_blocks_impl(ctx->impl, ctx->state, p, n);
		p += n * SHA256_BLOCK_SIZE;
		size -= n * SHA256_BLOCK_SIZE;
	}

	while (size > 0) {
		ctx->buffer[ctx->buffered++] = *p++;
		size--;
	}
}

void sha256_final(struct sha256_ctx *ctx, uint8_t ret_digest[static SHA256_DIGEST_SIZE]) {
	uint64_t bits = ctx->length * 8;
	unsigned i = ctx->buffered;

	/* FIPS 180-4 section 5.1.1: a one bit, zeros, then the 64-bit length. */
	ctx->buffer[i++] = 0x80;
	if (i > SHA256_BLOCK_SIZE - 8) {
		while (i < SHA256_BLOCK_SIZE)
			ctx->buffer[i++] = 0;
		sha256_blocks_impl(ctx->impl, ctx->state, ctx->buffer, 1);
		i = 0;
	}
	while (i < SHA256_BLOCK_SIZE - 8)
		ctx->buffer[i++] = 0;
	for (unsigned j = 0; j < 8; j++)
		ctx->buffer[SHA256_BLOCK_SIZE - 1 - j] = bits >> (8 * j);
	sha256_blocks_impl(ctx->impl, ctx->state, ctx->buffer, 1);

	for (unsigned j = 0; j < 8; j++)
		store_be32(ret_digest + 4 * j, ctx->state[j]);
}

void sha256_digest_impl(Sha256Impl impl, const void *data, size_t size,
                        uint8_t ret_digest[static SHA256_DIGEST_SIZE]) {
	struct sha256_ctx ctx;

	sha256_init_impl(&ctx, impl);
	sha256_update(&ctx, data, size);
	sha256_final(&ctx, ret_digest);
}

void sha256_digest(const void *data, size_t size, uint8_t ret_digest[static SHA256_DIGEST_SIZE]) {
	sha256_digest_impl(sha256_impl_best(), data, size, ret_digest);
}
