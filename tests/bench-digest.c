/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Staging cost of digest_file(): hashes a 64 MiB file (about a bzImage plus an
 * initrd) five times from the page cache and prints the median throughput.
 * A figure, never a pass/fail.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "digest.h"
#include "macros.h"

#define SIZE (64u << 20)
#define RUNS 5

static int cmp_double(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(void) {
	char path[] = "/tmp/bench-digest.XXXXXX", hex[DIGEST_SHA256_HEX_SIZE];
	_cleanup_close_ int fd = mkstemp(path);
	_cleanup_free_ char *buf = malloc(1 << 20);
	double secs[RUNS];

	if (fd < 0 || !buf)
		return 1;
	unlink(path);
	for (unsigned i = 0; i < (1 << 20); i++)
		buf[i] = (char)(i * 2654435761u >> 24);
	for (unsigned i = 0; i < SIZE >> 20; i++)
		if (write(fd, buf, 1 << 20) != 1 << 20)
			return 1;

	for (int r = 0; r < RUNS; r++) {
		struct timespec a, b;
		uint64_t n = 0;

		clock_gettime(CLOCK_MONOTONIC, &a);
		if (digest_file(fd, hex, &n) < 0 || n != SIZE)
			return 1;
		clock_gettime(CLOCK_MONOTONIC, &b);
		secs[r] = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
	}
	qsort(secs, RUNS, sizeof(secs[0]), cmp_double);
	printf("digest_file (SHA-256 %s): 64 MiB in %.1f ms median of %d, "
	       "%.0f MiB/s (min %.1f ms, max %.1f ms)\n",
	       digest_implementation(), secs[RUNS / 2] * 1e3, RUNS, 64 / secs[RUNS / 2],
	       secs[0] * 1e3, secs[RUNS - 1] * 1e3);
	return 0;
}
