/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What the SHA-256 tests share: libcrypto as the independent reference,
 * reproducible test data, and the skip notice for implementations this CPU
 * does not offer. Include after <cmocka.h>.
 */

#include <openssl/evp.h>
#include <stdio.h>

#include "sha256.h"

static inline void hex(const uint8_t *d, size_t n, char *ret) {
	for (size_t i = 0; i < n; i++)
		sprintf(ret + 2 * i, "%02x", d[i]);
}

static inline void reference_sha256(const void *data, size_t size,
                                    uint8_t ret[SHA256_DIGEST_SIZE]) {
	unsigned len = 0;

	assert_int_equal(EVP_Digest(data, size, ret, &len, EVP_sha256(), NULL), 1);
	assert_int_equal(len, SHA256_DIGEST_SIZE);
}

static inline uint32_t xorshift(uint32_t *x) {
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

/* Deterministic test data (xorshift), so a failure is reproducible. */
static inline void fill(uint8_t *p, size_t n, uint32_t seed) {
	uint32_t x = seed | 1;

	for (size_t i = 0; i < n; i++)
		p[i] = xorshift(&x) >> 24;
}

static inline bool impl_usable(Sha256Impl impl) {
	bool ok = sha256_impl_supported(impl);

	if (!ok)
		print_message("[ INFO     ] %s not offered by this CPU, skipped\n",
		              sha256_impl_to_string(impl));
	return ok;
}
