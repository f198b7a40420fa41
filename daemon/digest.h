/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Staging digests. digest_file() is the one place the daemon hashes an image;
 * it uses a small local SHA-256 until the project's shared implementation
 * (purgatory/sha256.c, the same code purgatory runs) can be linked instead.
 */

#include <stddef.h>
#include <stdint.h>

#define DIGEST_SHA256_SIZE     32
#define DIGEST_SHA256_HEX_SIZE (DIGEST_SHA256_SIZE * 2 + 1)

typedef struct Sha256Ctx {
	uint32_t state[8];
	uint64_t length;
	uint8_t buffer[64];
	size_t used;
} Sha256Ctx;

void digest_sha256_init(Sha256Ctx *c);
void digest_sha256_update(Sha256Ctx *c, const void *data, size_t size);
void digest_sha256_final(Sha256Ctx *c, uint8_t ret[DIGEST_SHA256_SIZE]);

/* Hashes the whole file behind fd from offset 0 (pread, the fd offset is left alone).
 * ret_hex receives 64 lowercase hex digits; ret_size the number of bytes hashed. */
int digest_file(int fd, char ret_hex[DIGEST_SHA256_HEX_SIZE], uint64_t *ret_size);
