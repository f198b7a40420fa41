/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Purgatory's logic (purgatory.c, the same source the blob is built from)
 * against fake hardware: a TSC that ticks, a serial port that records what is
 * written to it, and a reset that jumps back into the test. Proves the
 * verified, fast and panic paths, the mismatch path (message, reset, no
 * stamps) and the stamps written into the command line placeholder.
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "macros.h"
#include "purgatory.h"
#include "sha256-mb.h"
#include "sha256.h"
#include "timebase.h"

static uint64_t fake_tsc;
static char console[4096];
static size_t console_len;
static jmp_buf reset_jmp;
static unsigned resets;

uint64_t purgatory_arch_counter(void) {
	return fake_tsc += 1000;
}

void purgatory_arch_outb(uint16_t port, uint8_t value) {
	if (port == PURGATORY_CONSOLE_COM1 && console_len < sizeof(console) - 1)
		console[console_len++] = (char)value;
}

uint8_t purgatory_arch_inb(uint16_t port) {
	return 0x20; /* transmitter always empty */
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
	resets++;
	longjmp(reset_jmp, 1);
}

#define CMDLINE_PREFIX "console=ttyS0 root=/dev/vda1 "

#define KERNEL_FILESZ ((1 << 20) + 100)
#define KERNEL_MEMSZ  (2 << 20)
#define CHUNK_SIZE    (64 << 10) /* small, for many chunks */

struct fixture {
	uint8_t *kernel;   /* 1 MiB + 100 bytes of data, zero padding to 2 MiB */
	uint8_t *initrd;   /* 300 KiB */
	char cmdline[256]; /* with the stamps placeholder */
	struct purgatory_params params;
};

static void fill(uint8_t *p, size_t n, uint32_t seed) {
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245 + 12345;
		p[i] = seed >> 16;
	}
}

/* Lists a segment the way the loader does: chunk digests of the file part
 * (one-shot SHA-256 per chunk, not the multi-buffer code under test). */
static void add_segment(struct purgatory_params *p, const void *addr, size_t filesz, size_t memsz) {
	struct purgatory_segment *s = &p->segments[p->nr_segments++];

	*s = (struct purgatory_segment){ .addr = (uintptr_t)addr,
		                         .filesz = filesz,
		                         .memsz = memsz,
		                         .first_chunk = p->nr_chunks,
		                         .nr_chunks = (uint32_t)sha256_mb_chunks(filesz,
		                                                                 p->chunk_size) };
	for (uint32_t k = 0; k < s->nr_chunks; k++) {
		size_t off = k * p->chunk_size;

		sha256_digest_impl(SHA256_IMPL_GENERIC, (const uint8_t *)addr + off,
		                   MIN(p->chunk_size, filesz - off),
		                   p->chunk_sha256[p->nr_chunks++]);
	}
}

static int setup(void **state) {
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->kernel = calloc(1, 2 << 20);
	f->initrd = malloc(300 << 10);
	if (!f->kernel || !f->initrd)
		return -1;
	fill(f->kernel, KERNEL_FILESZ, 1);
	fill(f->initrd, 300 << 10, 2);
	snprintf(f->cmdline, sizeof(f->cmdline), "%s%s%s quiet", CMDLINE_PREFIX,
	         PURGATORY_STAMPS_KEY, PURGATORY_STAMPS_TEMPLATE);

	f->params.magic = PURGATORY_ABI_MAGIC;
	f->params.abi_version = PURGATORY_ABI_VERSION;
	f->params.size = sizeof(f->params);
	f->params.mode = PURGATORY_MODE_VERIFIED;
	f->params.console_port = PURGATORY_CONSOLE_COM1;
	f->params.stamps_addr =
	        (uintptr_t)f->cmdline + strlen(CMDLINE_PREFIX) + strlen(PURGATORY_STAMPS_KEY);
	f->params.stamps_len = PURGATORY_STAMPS_FIELD_LEN;
	/* The kernel segment: its file part hashed, the rest to memsz zero. */
	f->params.chunk_size = CHUNK_SIZE;
	add_segment(&f->params, f->kernel, KERNEL_FILESZ, KERNEL_MEMSZ);
	add_segment(&f->params, f->initrd, 300 << 10, 300 << 10);
	add_segment(&f->params, f->cmdline, sizeof(f->cmdline), sizeof(f->cmdline));

	fake_tsc = 0;
	console_len = 0;
	memset(console, 0, sizeof(console));
	resets = 0;
	*state = f;
	return 0;
}

static int teardown(void **state) {
	struct fixture *f = *state;

	free(f->kernel);
	free(f->initrd);
	free(f);
	return 0;
}

/* Runs purgatory_main; true when it returned (would jump to the kernel),
 * false when it reset the machine. */
static bool run(struct fixture *f) {
	if (setjmp(reset_jmp) != 0)
		return false;
	purgatory_main(&f->params);
	return true;
}

static const char *stamps_field(struct fixture *f) {
	return (const char *)(uintptr_t)f->params.stamps_addr;
}

/* Reads the field back with the daemon's parser: what purgatory writes is what
 * the booted system understands (one format, purgatory-abi.h). */
static void parse_stamps(const char *field, uint64_t v[3], char *mode, char *impl) {
	char buf[sizeof(PURGATORY_STAMPS_KEY) + PURGATORY_STAMPS_FIELD_LEN + 16];
	TimebaseStamps st = {};

	snprintf(buf, sizeof(buf), "ro %s%.*s quiet", PURGATORY_STAMPS_KEY,
	         PURGATORY_STAMPS_FIELD_LEN, field);
	assert_int_equal(timebase_stamps_from_cmdline(buf, &st), 0);
	v[0] = st.entry, v[1] = st.verified, v[2] = st.jump;
	*mode = st.mode;
	*impl = st.impl;
}

static void test_purgatory_verified_boots_and_stamps(void **state) {
	static const char impl_stamp[] = PURGATORY_STAMPS_IMPL_OF_SHA256;
	struct fixture *f = *state;
	uint64_t v[3];
	char mode, impl;
	Sha256Impl used;

	assert_true(run(f));
	assert_int_equal(resets, 0);
	assert_int_equal(console_len, 0);

	parse_stamps(stamps_field(f), v, &mode, &impl);
	assert_int_equal(v[0], f->params.stamps.tsc_entry);
	assert_int_equal(v[1], f->params.stamps.tsc_verified);
	assert_int_equal(v[2], f->params.stamps.tsc_jump);
	assert_true(v[0] < v[1] && v[1] < v[2]);
	assert_int_equal(mode, 'v');
	/* The implementation measured fastest here, and the stamp names it. */
	used = f->params.sha256_impl;
	assert_true(sha256_impl_supported(used));
	assert_int_equal(impl, impl_stamp[used]);

	/* Only the field changed: the key before it and the text after it stay. */
	assert_true(strncmp(f->cmdline, CMDLINE_PREFIX PURGATORY_STAMPS_KEY,
	                    strlen(CMDLINE_PREFIX PURGATORY_STAMPS_KEY)) == 0);
	assert_string_equal(stamps_field(f) + PURGATORY_STAMPS_FIELD_LEN, " quiet");
}

static void test_purgatory_mismatch_resets_with_message(void **state) {
	struct fixture *f = *state;

	char want[128];

	f->kernel[KERNEL_FILESZ - 1] ^= 0x40; /* the last byte of the file part */
	assert_false(run(f));
	assert_int_equal(resets, 1);
	print_message("console: %s", console);
	assert_non_null(strstr(console, "upgraded purgatory: SHA-256 mismatch: segment 0 at 0x"));
	snprintf(want, sizeof(want),
	         "size 0x0000000000200000, chunk 16 at 0x%016" PRIxPTR " size 0x0000000000000064;",
	         (uintptr_t)f->kernel + 16 * CHUNK_SIZE);
	assert_non_null(strstr(console, want));
	assert_non_null(strstr(console, "not booting the staged kernel, resetting\r\n"));
	/* No stamps: the placeholder still holds its template. */
	assert_memory_equal(stamps_field(f), PURGATORY_STAMPS_TEMPLATE, PURGATORY_STAMPS_FIELD_LEN);
}

/* A byte in the zero-filled rest (beyond the file part, not hashed) is found
 * by the zero check, wherever it is: first byte, middle, last byte. */
static void test_purgatory_zero_padding_checked(void **state) {
	struct fixture *f = *state;
	const size_t at[] = { KERNEL_FILESZ, KERNEL_FILESZ + 7, (3 << 19) + 3, KERNEL_MEMSZ - 1 };

	for (size_t i = 0; i < ELEMENTSOF(at); i++) {
		char want[96];

		console_len = 0;
		memset(console, 0, sizeof(console));
		f->kernel[at[i]] = 0x01;
		assert_false(run(f));
		snprintf(want, sizeof(want), "byte at 0x%016" PRIxPTR ";",
		         (uintptr_t)f->kernel + at[i]);
		if (!strstr(console, "non-zero byte in the zero padding: segment 0 at ") ||
		    !strstr(console, want))
			fail_msg("offset %zu: %s", at[i], console);
		f->kernel[at[i]] = 0;
	}
	assert_int_equal(resets, ELEMENTSOF(at));
	assert_true(run(f));
}

/* One flipped bit in any chunk of any segment is refused, naming that
 * segment and chunk, with every implementation this CPU has. */
static void test_purgatory_mismatch_in_every_chunk(void **state) {
	struct fixture *f = *state;
	unsigned refused = 0;

	for (Sha256Impl impl = 0; impl < _SHA256_IMPL_MAX; impl++) {
		if (!sha256_impl_supported(impl))
			continue;
		f->params.sha256_impl_request = impl + 1;
		for (unsigned s = 0; s < f->params.nr_segments; s++) {
			const struct purgatory_segment *seg = &f->params.segments[s];
			uint8_t *base = (uint8_t *)(uintptr_t)seg->addr;

			for (unsigned k = 0; k < seg->nr_chunks; k++) {
				/* Some byte inside chunk k (its middle, or its last). */
				size_t off =
				        MIN(k * CHUNK_SIZE + CHUNK_SIZE / 2 + k, seg->filesz - 1);
				char want[64];

				console_len = 0;
				memset(console, 0, sizeof(console));
				base[off] ^= 0x04;
				assert_false(run(f));
				base[off] ^= 0x04;
				snprintf(want, sizeof(want), "SHA-256 mismatch: segment %u at ", s);
				if (!strstr(console, want))
					fail_msg("%s, segment %u chunk %u: %s",
					         sha256_impl_to_string(impl), s, k, console);
				snprintf(want, sizeof(want),
				         ", chunk %u at 0x%016" PRIxPTR " size ", k,
				         (uintptr_t)base + k * CHUNK_SIZE);
				if (!strstr(console, want))
					fail_msg("%s, segment %u chunk %u: %s",
					         sha256_impl_to_string(impl), s, k, console);
				refused++;
			}
		}
		assert_int_equal(f->params.sha256_impl, impl);
		assert_int_equal(f->params.sha256_lanes, sha256_mb_lanes(impl));
		assert_true(run(f));
		/* Back to the recorded command line: the stamps changed it. */
		memcpy((char *)(uintptr_t)f->params.stamps_addr, PURGATORY_STAMPS_TEMPLATE,
		       PURGATORY_STAMPS_FIELD_LEN);
	}
	print_message("[ INFO     ] %u corruptions refused\n", refused);
	assert_int_equal(resets, refused);
}

/* A chunk layout that does not follow from the sizes is refused before any
 * digest is compared. */
static void test_purgatory_layout_refused(void **state) {
	struct fixture *f = *state;
	struct purgatory_params *good = malloc(sizeof(*good));

	assert_non_null(good);
	*good = f->params;

	f->params.chunk_size = 100;
	assert_false(run(f));
	assert_non_null(strstr(console, "invalid chunk size"));

	f->params = *good;
	f->params.segments[1].first_chunk++;
	assert_false(run(f));
	assert_non_null(strstr(console, "segment chunk layout does not match its size"));

	f->params = *good;
	f->params.segments[0].nr_chunks--;
	assert_false(run(f));

	f->params = *good;
	f->params.segments[2].filesz = f->params.segments[2].memsz + 1;
	assert_false(run(f));

	f->params = *good;
	f->params.nr_chunks++;
	assert_false(run(f));
	assert_non_null(strstr(console, "chunk count does not match the segments"));
	assert_int_equal(resets, 5);

	f->params = *good;
	assert_true(run(f));
	free(good);
}

static void test_purgatory_mismatch_in_initrd(void **state) {
	struct fixture *f = *state;

	f->initrd[12345] ^= 0x10;
	assert_false(run(f));
	assert_non_null(strstr(console, "segment 1 at "));
	assert_non_null(strstr(console, ", chunk 0 at "));
}

static void test_purgatory_mismatch_without_console(void **state) {
	struct fixture *f = *state;

	f->params.console_port = 0;
	f->initrd[0] ^= 1;
	assert_false(run(f));
	assert_int_equal(resets, 1);
	assert_int_equal(console_len, 0);
}

static void test_purgatory_fast_skips_verification(void **state) {
	struct fixture *f = *state;
	uint64_t v[3];
	char mode, impl;

	f->params.mode = PURGATORY_MODE_FAST;
	f->initrd[0] ^= 1; /* not noticed: fast mode hashes nothing */
	assert_true(run(f));
	parse_stamps(stamps_field(f), v, &mode, &impl);
	assert_int_equal(mode, 'f');
	assert_int_equal(impl, '-');
	/* Verification took one TSC read, not a hash. */
	assert_int_equal(v[1] - v[0], 1000);
}

static void test_purgatory_panic_always_verifies(void **state) {
	struct fixture *f = *state;
	uint64_t v[3];
	char mode, impl;

	f->params.flags = PURGATORY_FLAG_PANIC;
	assert_true(run(f));
	parse_stamps(stamps_field(f), v, &mode, &impl);
	assert_int_equal(mode, 'p');

	/* A panic image may not be fast, even if a loader asked for it. */
	f->params.flags = PURGATORY_FLAG_PANIC;
	f->params.mode = PURGATORY_MODE_FAST;
	assert_false(run(f));
	assert_non_null(strstr(console, "panic image in fast mode"));
}

static void test_purgatory_contract_mismatch(void **state) {
	struct fixture *f = *state;
	struct purgatory_params good = f->params; /* ~17 KiB: fine for a test's stack */

	f->params.magic ^= 1;
	assert_false(run(f));
	assert_non_null(strstr(console, "parameter block does not match"));

	f->params = good;
	f->params.abi_version++;
	assert_false(run(f));

	f->params = good;
	f->params.size--;
	assert_false(run(f));

	f->params = good;
	f->params.nr_segments = PURGATORY_MAX_SEGMENTS + 1;
	assert_false(run(f));
	assert_non_null(strstr(console, "too many segments"));

	f->params = good;
	f->params.mode = 7;
	assert_false(run(f));

	f->params = good;
	f->params.nr_segments = 0;
	assert_false(run(f));
	assert_non_null(strstr(console, "verified mode without digests"));
	assert_int_equal(resets, 6);

	/* Without a placeholder the kernel still boots, just unstamped. */
	f->params = good;
	f->params.stamps_addr = 0;
	assert_true(run(f));
	assert_memory_equal((const char *)(uintptr_t)good.stamps_addr, PURGATORY_STAMPS_TEMPLATE,
	                    PURGATORY_STAMPS_FIELD_LEN);
}

/* A requested implementation is used when supported; an unsupported or bogus
 * request falls back to the measured choice, never to an unsupported path. */
static void test_purgatory_impl_request(void **state) {
	struct fixture *f = *state;
	uint64_t v[3];
	char mode, impl;

	f->params.sha256_impl_request = SHA256_IMPL_GENERIC + 1;
	assert_true(run(f));
	parse_stamps(stamps_field(f), v, &mode, &impl);
	assert_int_equal(impl, 'g');
	assert_int_equal(f->params.sha256_impl, SHA256_IMPL_GENERIC);

	memcpy((char *)(uintptr_t)f->params.stamps_addr, PURGATORY_STAMPS_TEMPLATE,
	       PURGATORY_STAMPS_FIELD_LEN);
	f->params.sha256_impl_request = 1000;
	assert_true(run(f));
	assert_true(sha256_impl_supported(f->params.sha256_impl));
}

static void test_purgatory_format_stamps(void **state) {
	struct purgatory_stamps s = { 0x1, 0xfedcba9876543210, 0xffffffffffffffff };
	char out[PURGATORY_STAMPS_FIELD_LEN + 1] = {};

	purgatory_format_stamps(&s, 'v', 's', out);
	assert_string_equal(out, "0000000000000001,fedcba9876543210,ffffffffffffffff,v,s");
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_purgatory_verified_boots_and_stamps, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_purgatory_mismatch_resets_with_message, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_purgatory_zero_padding_checked, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_purgatory_mismatch_in_every_chunk, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_purgatory_layout_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_purgatory_mismatch_in_initrd, setup, teardown),
		cmocka_unit_test_setup_teardown(test_purgatory_mismatch_without_console, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_purgatory_fast_skips_verification, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_purgatory_panic_always_verifies, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_purgatory_contract_mismatch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_purgatory_impl_request, setup, teardown),
		cmocka_unit_test(test_purgatory_format_stamps),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
