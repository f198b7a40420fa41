/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <unistd.h>

#include "digest.h"
#include "fileio.h"
#include "macros.h"

const char *digest_implementation(void) {
	return sha256_impl_to_string(sha256_impl_best());
}

int digest_file(int fd, char ret_hex[DIGEST_SHA256_HEX_SIZE], uint64_t *ret_size) {
	return digest_file_bounded(fd, UINT64_MAX, NULL, ret_hex, ret_size);
}

int digest_file_bounded(int fd, uint64_t max, const atomic_bool *cancel,
                        char ret_hex[DIGEST_SHA256_HEX_SIZE], uint64_t *ret_size) {
	static const char hex[] = "0123456789abcdef";
	uint8_t buf[64 * 1024], md[DIGEST_SHA256_SIZE];
	struct sha256_ctx c;
	uint64_t off = 0;

	if (fd < 0 || !ret_hex)
		return -EINVAL;

	/* CPUID's choice, not sha256_mb_calibrate(): on hardware it is the fastest,
	 * and the daemon never runs under an emulator that inverts the order. */
	sha256_init_impl(&c, sha256_impl_best());
	for (;;) {
		ssize_t n;

		/* Polled every 64 KiB: a few tens of microseconds with sha-ni. */
		if (cancel && *cancel)
			return -ECANCELED;
		n = read_at(fd, buf, sizeof(buf), (int64_t)off);
		if (n < 0)
			return (int)n;
		if (n == 0)
			break;
		if ((uint64_t)n > max - off)
			return -EFBIG; /* grew past the limit while read */
		sha256_update(&c, buf, (size_t)n);
		off += (uint64_t)n;
	}
	sha256_final(&c, md);

	for (unsigned i = 0; i < DIGEST_SHA256_SIZE; i++) {
		ret_hex[2 * i] = hex[md[i] >> 4];
		ret_hex[2 * i + 1] = hex[md[i] & 0xf];
	}
	ret_hex[2 * DIGEST_SHA256_SIZE] = '\0';
	if (ret_size)
		*ret_size = off;
	return 0;
}
