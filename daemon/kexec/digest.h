/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Staging digests. digest_file() is the one place the daemon hashes an image;
 * it uses the project's SHA-256 (purgatory/sha256.c, the same code purgatory
 * runs between the kernels) with the implementation CPUID says is fastest.
 */

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "sha256.h"

#define DIGEST_SHA256_SIZE     SHA256_DIGEST_SIZE
#define DIGEST_SHA256_HEX_SIZE (DIGEST_SHA256_SIZE * 2 + 1)

/* Hashes the whole file behind fd from offset 0 (pread, the fd offset is left alone).
 * ret_hex receives 64 lowercase hex digits; ret_size the number of bytes hashed. */
int digest_file(int fd, char ret_hex[DIGEST_SHA256_HEX_SIZE], uint64_t *ret_size);
/* The same, bounded: -EFBIG as soon as more than max bytes were read (a file that grows while
 * it is hashed), -ECANCELED as soon as *cancel (may be NULL) is set, polled between reads. */
int digest_file_bounded(int fd, uint64_t max, const atomic_bool *cancel,
                        char ret_hex[DIGEST_SHA256_HEX_SIZE], uint64_t *ret_size);

/* The implementation digest_file() uses on this CPU ("sha-ni", "avx2", "generic"). */
const char *digest_implementation(void);
