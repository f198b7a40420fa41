/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * SHA-256 throughput of every implementation this CPU offers, next to
 * `openssl speed -evp sha256` measured in the same run, and the digest time of
 * a real kexec payload (kernel 6.1.0-57 vmlinuz, plus its initrd when the lab
 * cache has one). Prints figures; never fails on speed.
 *
 * Usage: bench-sha256 [PAYLOAD_DIR...]   (searched as bench-payload.h says)
 */

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench-payload.h"
#include "fileio.h"
#include "macros.h"
#include "sha256.h"

#define BENCH_BYTES (16u << 20)
#define BENCH_RUNS  15

static double now(void) {
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void pclosep(FILE **f) {
	if (*f)
		pclose(*f);
}

static int cmp_double(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, size_t n) {
	qsort(v, n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Median seconds to hash size bytes with impl; the fastest run in *ret_best
 * (on a shared machine the best run is the one least disturbed). */
static double time_impl(Sha256Impl impl, const uint8_t *buf, size_t size, unsigned runs,
                        double *ret_best) {
	double t[BENCH_RUNS];
	uint8_t d[SHA256_DIGEST_SIZE];

	for (unsigned r = 0; r < runs; r++) {
		double t0 = now();
		sha256_digest_impl(impl, buf, size, d);
		t[r] = now() - t0;
	}
	double m = median(t, runs);
	if (ret_best)
		*ret_best = t[0]; /* median() sorted t */
	return m;
}

static double time_memcpy(uint8_t *dst, const uint8_t *src, size_t size) {
	double t[BENCH_RUNS];

	for (unsigned r = 0; r < BENCH_RUNS; r++) {
		double t0 = now();
		memcpy(dst, src, size);
		__asm__ volatile("" : : "r"(dst) : "memory");
		t[r] = now() - t0;
	}
	return median(t, BENCH_RUNS);
}

/* Runs `openssl speed -evp sha256 -seconds 2 -bytes 16384` (one process, one
 * thread) and parses the "sha256 <N>k" line: N is in 1000s of bytes/s. */
static double openssl_speed_mbps(void) {
	_cleanup_(pclosep) FILE *p = NULL;
	char line[512];
	double kbps = -1;

	p = popen("openssl speed -evp sha256 -seconds 2 -bytes 16384 2>/dev/null", "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		double v;
		if (strncmp(line, "sha256 ", 7) == 0 && sscanf(line + 7, " %lfk", &v) == 1)
			kbps = v;
	}
	return kbps < 0 ? -1 : kbps / 1000.0;
}

static void bench_payload(int argc, char **argv) {
	_cleanup_free_ char *kernel = NULL, *initrd = NULL, *kdata = NULL, *idata = NULL;
	size_t ksize = 0, isize = 0;

	bench_find_payload(argc - 1, argv + 1, &kernel, &initrd);
	if (!kernel || read_file_full(kernel, 256u << 20, &kdata, &ksize) < 0) {
		printf("payload: no %s* found in the given directories; run "
		       "tests/bench-fetch-kernel to download it (not measured)\n",
		       PAYLOAD_KERNEL_PREFIX);
		return;
	}
	if (initrd && read_file_full(initrd, 1024u << 20, &idata, &isize) < 0) {
		free(initrd);
		initrd = NULL;
	}

	printf("\npayload (measured): %s (%zu bytes)", kernel, ksize);
	if (initrd)
		printf(" + %s (%zu bytes)\n", initrd, isize);
	else
		printf("\n  no initrd in the cache (one is generated only in the lab): vmlinuz "
		       "only\n");

	for (Sha256Impl impl = 0; impl < _SHA256_IMPL_MAX; impl++) {
		if (!sha256_impl_supported(impl))
			continue;
		double t = time_impl(impl, (const uint8_t *)kdata, ksize, BENCH_RUNS, NULL);
		if (initrd)
			t += time_impl(impl, (const uint8_t *)idata, isize, BENCH_RUNS, NULL);
		printf("  %-8s %8.2f ms  (median of %d runs)\n", sha256_impl_to_string(impl),
		       t * 1e3, BENCH_RUNS);
	}
}

int main(int argc, char **argv) {
	_cleanup_free_ uint8_t *buf = malloc(BENCH_BYTES), *dst = malloc(BENCH_BYTES);
	double mbps[_SHA256_IMPL_MAX] = {}, best_mbps[_SHA256_IMPL_MAX] = {};
	double ossl;
	/* The upstream measurement's payload: 53 MB bzImage + 28 MB initrd. */
	const double upstream_payload = 81e6;

	if (!buf || !dst)
		return 1;
	for (size_t i = 0; i < BENCH_BYTES; i++)
		buf[i] = (uint8_t)(i * 2654435761u >> 13);
	memset(dst, 0, BENCH_BYTES);

	printf("SHA-256 throughput on this CPU, %u MiB buffer, median of %d runs (measured)\n",
	       BENCH_BYTES >> 20, BENCH_RUNS);
	for (Sha256Impl impl = 0; impl < _SHA256_IMPL_MAX; impl++) {
		if (!sha256_impl_supported(impl)) {
			printf("  %-8s not offered by this CPU\n", sha256_impl_to_string(impl));
			continue;
		}
		double best;
		mbps[impl] =
		        BENCH_BYTES / time_impl(impl, buf, BENCH_BYTES, BENCH_RUNS, &best) / 1e6;
		best_mbps[impl] = BENCH_BYTES / best / 1e6;
	}
	double memcpy_mbps = BENCH_BYTES / time_memcpy(dst, buf, BENCH_BYTES) / 1e6;

	ossl = openssl_speed_mbps();
	if (ossl > 0)
		printf("  %-8s %9.1f MB/s  (openssl speed -evp sha256 -seconds 2 -bytes 16384, "
		       "same run)\n",
		       "openssl", ossl);
	else
		printf("  openssl speed: not available (install openssl), no ratio\n");

	for (Sha256Impl impl = 0; impl < _SHA256_IMPL_MAX; impl++) {
		if (mbps[impl] <= 0)
			continue;
		printf("  %-8s %9.1f MB/s", sha256_impl_to_string(impl), mbps[impl]);
		if (ossl > 0)
			printf("  %5.2fx openssl", mbps[impl] / ossl);
		printf("  %5.2fx generic", mbps[impl] / mbps[SHA256_IMPL_GENERIC]);
		printf("  (best run %.1f MB/s", best_mbps[impl]);
		if (ossl > 0)
			printf(", %.2fx openssl", best_mbps[impl] / ossl);
		printf(")\n");
	}
	printf("  %-8s %9.1f MB/s  (the floor: copying the same buffer)\n", "memcpy", memcpy_mbps);
	if (ossl > 0 && mbps[SHA256_IMPL_SHANI] > 0)
		printf("  target sha-ni within 10%% of openssl: %s (median %+.1f%%, best run "
		       "%+.1f%%; "
		       "both are disturbed by other load on a shared machine)\n",
		       mbps[SHA256_IMPL_SHANI] >= 0.9 * ossl ? "met" : "NOT met",
		       100.0 * (mbps[SHA256_IMPL_SHANI] - ossl) / ossl,
		       100.0 * (best_mbps[SHA256_IMPL_SHANI] - ossl) / ossl);

	printf("\nestimated (computed from the throughput above, not measured): 81 MB upstream "
	       "payload (53 MB bzImage + 28 MB initrd)\n");
	for (Sha256Impl impl = 0; impl < _SHA256_IMPL_MAX; impl++)
		if (mbps[impl] > 0)
			printf("  %-8s %8.1f ms\n", sha256_impl_to_string(impl),
			       upstream_payload / mbps[impl] / 1e3);

	bench_payload(argc, argv);
	return 0;
}
