/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Stage cost of the loader on this machine and the work purgatory's verified
 * mode does, for the lab's real payload (kernel 6.1.0-57 + its initrd, found as
 * bench-payload.h says):
 *   - loader_image_build(): read, validate, place against this host's
 *     /sys/firmware/memmap, SHA-256 of every segment with the fastest
 *     implementation;
 *   - per SHA-256 implementation, hashing every segment purgatory checks over
 *     its full memsz (zero padding included, as purgatory does): the
 *     verification time of a verified handoff on this CPU. A fast handoff
 *     hashes nothing.
 * Prints figures, never fails on speed; says so when the kernel is not cached.
 *
 * Usage: bench-loader PAYLOAD_DIR...
 */

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "bench-payload.h"
#include "loader.h"
#include "macros.h"
#include "sha256.h"

#define RUNS 5

static double now(void) {
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* What purgatory does per segment: the file bytes, then zeros up to memsz. */
static void hash_segment(Sha256Impl impl, const struct loader_segment *s) {
	static const uint8_t zeros[1 << 16];
	uint8_t digest[SHA256_DIGEST_SIZE];
	struct sha256_ctx ctx;

	sha256_init_impl(&ctx, impl);
	sha256_update(&ctx, s->buf, s->bufsz);
	for (uint64_t left = s->memsz - s->bufsz; left > 0;) {
		size_t n = left < sizeof(zeros) ? (size_t)left : sizeof(zeros);

		sha256_update(&ctx, zeros, n);
		left -= n;
	}
	sha256_final(&ctx, digest);
	__asm__ volatile("" : : "r"(digest) : "memory");
}

static void bench_verify(const struct loader_image *img) {
	const struct loader_segment *seg;
	size_t n = loader_image_segments(img, &seg);
	uint64_t memsz = 0, bufsz = 0;

	for (size_t i = 0; i < n; i++)
		if (i != LOADER_SEG_PURGATORY) {
			memsz += seg[i].memsz;
			bufsz += seg[i].bufsz;
		}
	printf("purgatory verification (measured on this CPU, median of %d): %.1f MB hashed "
	       "(%.1f MB file bytes + %.1f MB zero padding to memsz)\n",
	       RUNS, memsz / 1e6, bufsz / 1e6, (memsz - bufsz) / 1e6);
	for (Sha256Impl impl = 0; impl < _SHA256_IMPL_MAX; impl++) {
		double t[RUNS];

		if (!sha256_impl_supported(impl)) {
			printf("  %-8s not offered by this CPU\n", sha256_impl_to_string(impl));
			continue;
		}
		for (int r = 0; r < RUNS; r++) {
			double t0 = now();

			for (size_t i = 0; i < n; i++)
				if (i != LOADER_SEG_PURGATORY)
					hash_segment(impl, &seg[i]);
			t[r] = now() - t0;
		}
		qsort(t, RUNS, sizeof(t[0]), cmp_double);
		printf("  %-8s %8.1f ms  (min %.1f, max %.1f)\n", sha256_impl_to_string(impl),
		       t[RUNS / 2] * 1e3, t[0] * 1e3, t[RUNS - 1] * 1e3);
	}
	printf("  fast     %8.1f ms  (no hashing)\n", 0.0);
}

int main(int argc, char **argv) {
	_cleanup_free_ char *kernel = NULL, *initrd = NULL;
	_cleanup_close_ int kfd = -EBADF, ifd = -EBADF;
	struct loader_image *img = NULL;
	double t[RUNS];

	bench_find_payload(argc - 1, argv + 1, &kernel, &initrd);
	if (!kernel) {
		printf("loader stage: no cached %s* (run tests/bench-fetch-kernel or "
		       "tests/lab/build-image), not measured\n",
		       PAYLOAD_KERNEL_PREFIX);
		return 0;
	}
	kfd = open(kernel, O_RDONLY | O_CLOEXEC);
	if (kfd < 0)
		return 1;
	if (initrd) {
		ifd = open(initrd, O_RDONLY | O_CLOEXEC);
		if (ifd < 0)
			return 1;
	}

	for (int r = 0; r < RUNS; r++) {
		struct loader_options o = {
			.kernel_fd = kfd,
			.initrd_fd = ifd,
			.cmdline = "root=/dev/vda1 console=ttyS0",
			.mode = HANDOFF_MODE_VERIFIED,
		};
		LoaderError e = LOADER_OK;
		double t0 = now();
		int k;

		loader_image_free(img);
		img = NULL;
		k = loader_image_build(&o, &img, &e, NULL);
		t[r] = now() - t0;
		if (k < 0) {
			printf("loader stage: failed: %s\n", loader_error_to_string(e));
			return 0;
		}
	}
	qsort(t, RUNS, sizeof(t[0]), cmp_double);
	printf("loader stage (measured): %s + %s, this host's memory map, sha256 %s: "
	       "%.1f ms median of %d (min %.1f, max %.1f)\n",
	       kernel, initrd ?: "no initrd", sha256_impl_to_string(sha256_impl_best()),
	       t[RUNS / 2] * 1e3, RUNS, t[0] * 1e3, t[RUNS - 1] * 1e3);
	bench_verify(img);
	loader_image_free(img);
	return 0;
}
