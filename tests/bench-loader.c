/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Stage cost of the loader on this machine and the work purgatory's verified
 * mode does, for the lab's real payload (kernel 6.1.0-57 + its initrd, found as
 * bench-payload.h says):
 *   - loader_image_build(): read, validate, place against this host's
 *     /sys/firmware/memmap, the chunk digests of every segment;
 *   - purgatory's own code (purgatory_main(), the source the blob is built
 *     from) on the built image, its segments copied to host memory standing
 *     in for the physical pages: verified against fast, in interleaved pairs,
 *     per implementation and with the implementation its calibration picks.
 *     Verified minus fast is what verification adds to a handoff.
 * Prints figures, never fails on speed; says so when the kernel is not cached.
 *
 * Usage: bench-loader PAYLOAD_DIR...
 */

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bench-payload.h"
#include "loader.h"
#include "macros.h"
#include "purgatory.h"
#include "sha256-mb.h"
#include "sha256.h"

#define RUNS             5
#define PAIRS            15
/* The target for the lab payload on this CPU. */
#define TARGET_VERIFY_MS 25.0

static double now(void) {
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double loadavg(void) {
	double l[1] = { -1 };

	return getloadavg(l, 1) == 1 ? l[0] : -1;
}

/* Purgatory's hardware hooks, for running purgatory_main() on host memory. */
uint64_t purgatory_arch_counter(void) {
	uint32_t lo, hi;

	__asm__ volatile("lfence; rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}

void purgatory_arch_outb(uint16_t port, uint8_t value) {
	if (port == PURGATORY_CONSOLE_COM1)
		fputc(value, stderr);
}

uint8_t purgatory_arch_inb(uint16_t port) {
	return 0x20; /* transmitter empty */
}

uint32_t purgatory_arch_counter_freq(void) {
	return 0;
}

uint32_t purgatory_arch_mmio_read(uint64_t addr, unsigned width) {
	return 0;
}

void purgatory_arch_mmio_write(uint64_t addr, unsigned width, uint32_t value) {
}

unsigned purgatory_arch_cpus_start(struct purgatory_params *p, struct purgatory_work *w) {
	return 0;
}

unsigned purgatory_arch_cpus_stop(struct purgatory_params *p) {
	return 0;
}

void purgatory_arch_map(struct purgatory_params *p) {
}

void purgatory_arch_clean(uint64_t addr, uint64_t size) {
}

void purgatory_arch_reset(const struct purgatory_params *p) {
	fprintf(stderr, "bench-loader: purgatory refused the image it was given\n");
	abort();
}

static double cpu_now(void) {
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct cost {
	double verified, fast, diff; /* wall clock, ms, medians */
	double cpu_diff;             /* this thread's CPU time, ms, median */
};

/* One run of purgatory_main(); its wall and thread CPU seconds. */
static void time_purgatory(struct purgatory_params *p, uint32_t mode, uint32_t request,
                           double *ret_wall, double *ret_cpu) {
	double t0, c0;

	p->mode = mode;
	p->sha256_impl_request = request;
	c0 = cpu_now();
	t0 = now();
	purgatory_main(p);
	*ret_wall = now() - t0;
	*ret_cpu = cpu_now() - c0;
}

static double median_ms(double *v) {
	qsort(v, PAIRS, sizeof(double), cmp_double);
	return v[PAIRS / 2] * 1e3;
}

/* Verified against fast, PAIRS interleaved pairs (order alternating). On a
 * loaded machine wall clock includes time other processes ran; the thread's
 * CPU time is what purgatory, alone on its CPU between the kernels, costs. */
static struct cost verify_cost(struct purgatory_params *p, uint32_t request) {
	double v[PAIRS], f[PAIRS], d[PAIRS], cv[PAIRS], cf[PAIRS], cd[PAIRS];

	time_purgatory(p, PURGATORY_MODE_VERIFIED, request, &v[0], &cv[0]); /* warm up */
	for (int r = 0; r < PAIRS; r++) {
		if (r % 2 == 0) {
			time_purgatory(p, PURGATORY_MODE_VERIFIED, request, &v[r], &cv[r]);
			time_purgatory(p, PURGATORY_MODE_FAST, 0, &f[r], &cf[r]);
		} else {
			time_purgatory(p, PURGATORY_MODE_FAST, 0, &f[r], &cf[r]);
			time_purgatory(p, PURGATORY_MODE_VERIFIED, request, &v[r], &cv[r]);
		}
		d[r] = v[r] - f[r];
		cd[r] = cv[r] - cf[r];
	}
	return (struct cost){ .verified = median_ms(v),
		              .fast = median_ms(f),
		              .diff = median_ms(d),
		              .cpu_diff = median_ms(cd) };
}

/* Purgatory's parameters for img with every segment copied to host memory
 * (zero-filled to memsz, as the kernel loads it); NULL on failure. */
static struct purgatory_params *host_params(const struct loader_image *img) {
	const struct loader_segment *seg;
	size_t n = loader_image_segments(img, &seg);
	struct purgatory_params *p = malloc(sizeof(*p));

	if (!p)
		return NULL;
	*p = *loader_image_params(img);
	p->stamps_addr = 0; /* no command line to stamp here */
	p->console_port = PURGATORY_CONSOLE_COM1;
	for (unsigned i = 0; i < p->nr_segments; i++)
		for (size_t j = 0; j < n; j++) {
			uint8_t *m;

			if (seg[j].mem != p->segments[i].addr)
				continue;
			m = mmap(NULL, seg[j].memsz, PROT_READ | PROT_WRITE,
			         MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
			if (m == MAP_FAILED) {
				free(p);
				return NULL;
			}
			memcpy(m, seg[j].buf, seg[j].bufsz);
			p->segments[i].addr = (uintptr_t)m;
		}
	return p;
}

static void bench_verify(const struct loader_image *img, bool have_initrd) {
	_cleanup_free_ struct purgatory_params *p = host_params(img);
	uint64_t filesz = 0, memsz = 0;
	struct cost c;

	if (!p) {
		printf("purgatory verification: out of memory, not measured\n");
		return;
	}
	for (unsigned i = 0; i < p->nr_segments; i++) {
		filesz += p->segments[i].filesz;
		memsz += p->segments[i].memsz;
	}
	printf("purgatory verification (measured: purgatory_main() on this CPU, verified and "
	       "fast in %d interleaved pairs, medians): %.1f MB hashed in %u chunks of %" PRIu64
	       " KiB + %.1f MB zero padding checked for zeros\n",
	       PAIRS, filesz / 1e6, p->nr_chunks, p->chunk_size >> 10, (memsz - filesz) / 1e6);
	for (Sha256Impl impl = 0; impl < _SHA256_IMPL_MAX; impl++) {
		if (!sha256_impl_supported(impl)) {
			printf("  %-8s not offered by this CPU\n", sha256_impl_to_string(impl));
			continue;
		}
		c = verify_cost(p, impl + 1);
		printf("  %-8s x%u  verified %7.1f ms, fast %6.3f ms, verified minus fast %7.1f ms "
		       "(CPU time %7.1f ms)\n",
		       sha256_impl_to_string(impl), sha256_mb_lanes(impl), c.verified, c.fast,
		       c.diff, c.cpu_diff);
	}
	c = verify_cost(p, 0);
	printf("  calibrated (purgatory picked %s x%u): verified minus fast %.1f ms wall clock, "
	       "%.1f ms CPU time\n",
	       sha256_impl_to_string(p->sha256_impl), p->sha256_lanes, c.diff, c.cpu_diff);
	printf("  target verified minus fast <= %.0f ms for the lab payload: %s by CPU time, %s by "
	       "wall clock (load average %.1f)%s\n",
	       TARGET_VERIFY_MS, c.cpu_diff <= TARGET_VERIFY_MS ? "met" : "NOT met",
	       c.diff <= TARGET_VERIFY_MS ? "met" : "NOT met", loadavg(),
	       have_initrd ? "" : " (vmlinuz only: no cached initrd, the payload is incomplete)");
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
	bench_verify(img, initrd != NULL);
	loader_image_free(img);
	return 0;
}
