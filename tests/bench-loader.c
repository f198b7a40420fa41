/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Stage cost of the loader on this machine: loader_image_build() for the lab's
 * real kernel (read, validate, place against this host's /sys/firmware/memmap,
 * SHA-256 of every segment with the fastest implementation). Prints figures,
 * never fails on speed; says so when the kernel is not cached.
 *
 * Usage: bench-loader VMLINUZ...   (the first readable one is used)
 */

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

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

int main(int argc, char **argv) {
	const char *path = NULL;
	double t[RUNS];
	int fd;

	for (int i = 1; i < argc && !path; i++)
		if (access(argv[i], R_OK) == 0)
			path = argv[i];
	if (!path) {
		printf("loader stage: no cached vmlinuz (run tests/bench-fetch-kernel), not "
		       "measured\n");
		return 0;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 1;

	for (int r = 0; r < RUNS; r++) {
		struct loader_options o = {
			.kernel_fd = fd,
			.initrd_fd = -1,
			.cmdline = "root=/dev/vda1 console=ttyS0",
			.mode = LOADER_MODE_VERIFIED,
		};
		struct loader_image *img = NULL;
		LoaderError e = LOADER_OK;
		double t0 = now();
		int k = loader_image_build(&o, &img, &e, NULL);

		t[r] = now() - t0;
		if (k < 0) {
			printf("loader stage: failed: %s\n", loader_error_to_string(e));
			close(fd);
			return 0;
		}
		loader_image_free(img);
	}
	close(fd);
	qsort(t, RUNS, sizeof(t[0]), cmp_double);
	printf("loader stage (measured): %s, no initrd, this host's memory map, sha256 %s: "
	       "%.1f ms median of %d (min %.1f, max %.1f)\n",
	       path, sha256_impl_to_string(sha256_impl_best()), t[RUNS / 2] * 1e3, RUNS, t[0] * 1e3,
	       t[RUNS - 1] * 1e3);
	return 0;
}
