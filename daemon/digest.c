/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "digest.h"
#include "macros.h"

/* FIPS 180-4, section 4.2.2: the first 32 bits of the fractional parts of the
 * cube roots of the first 64 primes. */
static const uint32_t K[64] = {
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

static inline uint32_t ror32(uint32_t x, unsigned n) {
	return (x >> n) | (x << (32 - n));
}

static void sha256_block(uint32_t s[8], const uint8_t *p) {
	uint32_t w[64], a, b, c, d, e, f, g, h;

	for (unsigned i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
	for (unsigned i = 16; i < 64; i++) {
		uint32_t s0 = ror32(w[i - 15], 7) ^ ror32(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = ror32(w[i - 2], 17) ^ ror32(w[i - 2], 19) ^ (w[i - 2] >> 10);
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}

	a = s[0], b = s[1], c = s[2], d = s[3], e = s[4], f = s[5], g = s[6], h = s[7];
	for (unsigned i = 0; i < 64; i++) {
		uint32_t t1 = h + (ror32(e, 6) ^ ror32(e, 11) ^ ror32(e, 25)) +
		              ((e & f) ^ (~e & g)) + K[i] + w[i];
		uint32_t t2 =
		        (ror32(a, 2) ^ ror32(a, 13) ^ ror32(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
		h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
	}
	s[0] += a, s[1] += b, s[2] += c, s[3] += d, s[4] += e, s[5] += f, s[6] += g, s[7] += h;
}

void digest_sha256_init(Sha256Ctx *c) {
	static const uint32_t H0[8] = {
		0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
		0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
	};

	memcpy(c->state, H0, sizeof(H0));
	c->length = 0;
	c->used = 0;
}

void digest_sha256_update(Sha256Ctx *c, const void *data, size_t size) {
	const uint8_t *p = data;

	c->length += size;
	if (c->used > 0) {
		size_t n = MIN(size, sizeof(c->buffer) - c->used);

		memcpy(c->buffer + c->used, p, n);
		c->used += n, p += n, size -= n;
		if (c->used < sizeof(c->buffer))
			return;
		sha256_block(c->state, c->buffer);
		c->used = 0;
	}
	for (; size >= 64; p += 64, size -= 64)
		sha256_block(c->state, p);
	memcpy(c->buffer, p, size);
	c->used = size;
}

void digest_sha256_final(Sha256Ctx *c, uint8_t ret[DIGEST_SHA256_SIZE]) {
	uint64_t bits = c->length * 8;
	uint8_t pad[72] = { 0x80 };
	size_t padlen = (c->used < 56 ? 56 : 120) - c->used;

	for (unsigned i = 0; i < 8; i++)
		pad[padlen + i] = (uint8_t)(bits >> (56 - 8 * i));
	digest_sha256_update(c, pad, padlen + 8);
	for (unsigned i = 0; i < 8; i++) {
		ret[4 * i] = (uint8_t)(c->state[i] >> 24);
		ret[4 * i + 1] = (uint8_t)(c->state[i] >> 16);
		ret[4 * i + 2] = (uint8_t)(c->state[i] >> 8);
		ret[4 * i + 3] = (uint8_t)c->state[i];
	}
}

int digest_file(int fd, char ret_hex[DIGEST_SHA256_HEX_SIZE], uint64_t *ret_size) {
	static const char hex[] = "0123456789abcdef";
	uint8_t buf[64 * 1024], md[DIGEST_SHA256_SIZE];
	uint64_t off = 0;
	Sha256Ctx c;

	if (fd < 0 || !ret_hex)
		return -EINVAL;

	digest_sha256_init(&c);
	for (;;) {
		ssize_t n = pread(fd, buf, sizeof(buf), (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		digest_sha256_update(&c, buf, (size_t)n);
		off += (uint64_t)n;
	}
	digest_sha256_final(&c, md);

	for (unsigned i = 0; i < DIGEST_SHA256_SIZE; i++) {
		ret_hex[2 * i] = hex[md[i] >> 4];
		ret_hex[2 * i + 1] = hex[md[i] & 0xf];
	}
	ret_hex[2 * DIGEST_SHA256_SIZE] = '\0';
	if (ret_size)
		*ret_size = off;
	return 0;
}
