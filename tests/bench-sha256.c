/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * SHA-256 throughput: ours next to libcrypto's EVP SHA-256, in this process,
 * on the same buffer, in interleaved pairs (ours then OpenSSL, then the other
 * order), BENCH_PAIRS pairs, medians of this thread's CPU time. Each line
 * prints both MB/s and the median of the per-pair ratios, so what load on a
 * shared machine still does (caches, the other hyperthread) hits both sides of
 * a pair alike instead of skewing the ratio.
 *
 * Ours is measured single-stream (one 16 MiB message) and multi-buffer (the
 * same 16 MiB cut into 256 KiB chunks, a digest per chunk, as purgatory hashes
 * a segment); OpenSSL single-stream on the whole buffer.
 *
 * OpenSSL picks its code from CPUID when libcrypto initializes; to compare
 * with its AVX2 path on a CPU with SHA-NI, the program runs itself again with
 * OPENSSL_ia32cap=":~0x20000000" (bit 29 of CPUID leaf 7 EBX, the SHA
 * extensions, cleared in the second word of OpenSSL 3.0's capability vector)
 * and --openssl-no-sha.
 *
 * Usage: bench-sha256 [--openssl-no-sha]
 */

#include <errno.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "macros.h"
#include "sha256-mb.h"
#include "sha256.h"

#define BENCH_BYTES         (16u << 20)
#define BENCH_CHUNK         (256u << 10)
#define BENCH_PAIRS         21
#define OPENSSL_NO_SHA_MASK ":~0x20000000"

/* This thread's CPU time: on a shared, loaded machine, wall clock also counts
 * the time other processes ran; CPU time counts what the hash cost. */
static double now(void) {
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(const double *v, size_t n) {
	double s[BENCH_PAIRS];

	memcpy(s, v, n * sizeof(double));
	qsort(s, n, sizeof(double), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

typedef enum Side {
	SIDE_SINGLE, /* ours, one stream */
	SIDE_MULTI,  /* ours, multi-buffer over BENCH_CHUNK chunks */
	SIDE_OPENSSL,
} Side;

static uint8_t chunk_digests[BENCH_BYTES / BENCH_CHUNK][SHA256_DIGEST_SIZE];

static double time_side(Side side, Sha256Impl impl, const uint8_t *buf) {
	uint8_t d[EVP_MAX_MD_SIZE];
	unsigned len = 0;
	double t0 = now();

	switch (side) {
	case SIDE_SINGLE:
		sha256_digest_impl(impl, buf, BENCH_BYTES, d);
		break;
	case SIDE_MULTI:
		sha256_mb_digest_all(impl, &(struct sha256_mb_msg){ buf, BENCH_BYTES }, 1,
		                     BENCH_CHUNK, chunk_digests);
		break;
	case SIDE_OPENSSL:
		if (EVP_Digest(buf, BENCH_BYTES, d, &len, EVP_sha256(), NULL) != 1)
			abort();
		break;
	}
	__asm__ volatile("" : : "r"(d), "r"(chunk_digests) : "memory");
	return now() - t0;
}

/* Ours (side, impl) against OpenSSL, BENCH_PAIRS interleaved pairs; prints
 * both medians and the median ratio; returns the median ratio. */
static double compare(const char *label, Side side, Sha256Impl impl, const uint8_t *buf,
                      const char *openssl_label) {
	double ours[BENCH_PAIRS], ossl[BENCH_PAIRS], ratio[BENCH_PAIRS];

	(void)time_side(side, impl, buf); /* warm up: page faults, frequency */
	(void)time_side(SIDE_OPENSSL, impl, buf);
	for (unsigned r = 0; r < BENCH_PAIRS; r++) {
		if (r % 2 == 0) {
			ours[r] = time_side(side, impl, buf);
			ossl[r] = time_side(SIDE_OPENSSL, impl, buf);
		} else {
			ossl[r] = time_side(SIDE_OPENSSL, impl, buf);
			ours[r] = time_side(side, impl, buf);
		}
		ratio[r] = ossl[r] / ours[r];
	}
	double m = median(ratio, BENCH_PAIRS);
	printf("  %-26s %8.1f MB/s   %-30s %8.1f MB/s   ratio %5.2fx\n", label,
	       BENCH_BYTES / median(ours, BENCH_PAIRS) / 1e6, openssl_label,
	       BENCH_BYTES / median(ossl, BENCH_PAIRS) / 1e6, m);
	return m;
}

static void print_method(void) {
	double l[1] = { -1 };

	(void)getloadavg(l, 1);
	printf("method: %u MiB buffer, ours and libcrypto EVP_Digest(EVP_sha256()) in this "
	       "process on the same buffer, %d interleaved pairs (order alternating), medians of "
	       "thread CPU time (load average %.1f); "
	       "ratio = median over pairs of (OpenSSL time / our time); multi-buffer = the "
	       "buffer cut into %u KiB chunks, a digest per chunk (measured)\n",
	       BENCH_BYTES >> 20, BENCH_PAIRS, l[0], BENCH_CHUNK >> 10);
}

static void target(const char *what, double got, double want) {
	printf("  target %s >= %.2fx: %s (%.2fx)\n", what, want, got >= want ? "met" : "NOT met",
	       got);
}

/* The default run: OpenSSL as it configures itself (SHA-NI where present). */
static void bench_default(const uint8_t *buf) {
	char label[64];

	printf("OpenSSL %s, capabilities from CPUID (SHA-NI when the CPU has it)\n",
	       OpenSSL_version(OPENSSL_VERSION));
	for (Sha256Impl impl = 0; impl < _SHA256_IMPL_MAX; impl++) {
		double single, multi;

		if (!sha256_impl_supported(impl)) {
			printf("  %-26s not offered by this CPU\n", sha256_impl_to_string(impl));
			continue;
		}
		snprintf(label, sizeof(label), "%s single-stream", sha256_impl_to_string(impl));
		single = compare(label, SIDE_SINGLE, impl, buf, "openssl (default)");
		snprintf(label, sizeof(label), "%s multi-buffer x%u", sha256_impl_to_string(impl),
		         sha256_mb_lanes(impl));
		multi = compare(label, SIDE_MULTI, impl, buf, "openssl (default)");
		if (impl == SHA256_IMPL_SHANI) {
			target("sha-ni multi-buffer vs openssl single-stream", multi, 1.5);
			printf("  (sha-ni single-stream: %.2fx openssl)\n", single);
		}
	}
}

/* The re-executed run: OpenSSL with SHA-NI masked, i.e. its AVX2 code. */
static void bench_no_sha(const uint8_t *buf) {
	printf("\nOpenSSL with SHA-NI masked (OPENSSL_ia32cap=\"%s\" set before libcrypto "
	       "initialized): its AVX2 path\n",
	       getenv("OPENSSL_ia32cap") ?: "?");
	if (!sha256_impl_supported(SHA256_IMPL_AVX2)) {
		printf("  avx2 not offered by this CPU: not measured\n");
		return;
	}
	compare("avx2 single-stream", SIDE_SINGLE, SHA256_IMPL_AVX2, buf, "openssl (avx2)");
	target("avx2 multi-buffer (2 groups of 8 lanes) vs openssl avx2 single-stream",
	       compare("avx2 multi-buffer x16", SIDE_MULTI, SHA256_IMPL_AVX2, buf,
	               "openssl (avx2)"),
	       2.0);
	compare("generic multi-buffer x1", SIDE_MULTI, SHA256_IMPL_GENERIC, buf, "openssl (avx2)");
}

/* Runs this program again with OpenSSL's SHA extensions masked. */
static int reexec_no_sha(const char *self) {
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		setenv("OPENSSL_ia32cap", OPENSSL_NO_SHA_MASK, 1);
		execl("/proc/self/exe", self, "--openssl-no-sha", (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

int main(int argc, char **argv) {
	_cleanup_free_ uint8_t *buf = malloc(BENCH_BYTES);
	bool no_sha = argc > 1 && streq(argv[1], "--openssl-no-sha");

	if (!buf)
		return 1;
	for (size_t i = 0; i < BENCH_BYTES; i++)
		buf[i] = (uint8_t)(i * 2654435761u >> 13);

	if (no_sha) {
		/* Only meaningful when the mask was in place before libcrypto started. */
		if (!streq_ptr(getenv("OPENSSL_ia32cap"), OPENSSL_NO_SHA_MASK))
			return reexec_no_sha(argv[0]) < 0;
		bench_no_sha(buf);
		return 0;
	}
	print_method();
	printf("purgatory's calibration here picks: %s (%u lanes)\n\n",
	       sha256_impl_to_string(sha256_mb_calibrate()),
	       sha256_mb_lanes(sha256_mb_calibrate()));
	bench_default(buf);
	if (reexec_no_sha(argv[0]) < 0)
		printf("the OpenSSL AVX2 comparison failed to run\n");
	return 0;
}
