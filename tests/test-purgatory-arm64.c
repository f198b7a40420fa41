/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * arm64 purgatory's logic (purgatory.c built for arm64) on the host, under
 * qemu-aarch64, against fake hardware hooks: what the real hooks in
 * purgatory/arm64/ are asked to do. The MMU is mapped before any segment is
 * read (verified mode only), every segment and the stamps field are cleaned
 * to the PoC before the jump, the stamps field is the arm64 one (with
 * CNTFRQ_EL0), the mismatch line goes to a PL011 or a 16550 at its MMIO
 * address, and the reset gets the parameter block (PSCI conduit). Also the
 * SHA-256 implementation choice from ID_AA64ISAR0_EL1 and HWCAP_SHA2. The
 * chunks shared with other CPUs: threads stand in for the CPUs PSCI starts.
 */

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#include <cmocka.h>

#include "purgatory.h"
#include "sha256-internal.h"
#include "sha256-mb.h"
#include "sha256.h"

#define UART_BASE  UINT64_C(0x9000000)
#define FREQ       62500000u
#define CHUNK_SIZE (64 << 10)

static uint64_t fake_counter;
static bool counter_frozen;
static char console[4096];
static size_t console_len;
static unsigned console_width;
static jmp_buf reset_jmp;
static unsigned resets, maps, reset_method_seen;
/* The calls to purgatory_arch_clean(), in order. */
static struct {
	uint64_t addr, size;
	unsigned maps_before; /* maps done when it was cleaned */
} cleans[32];
static unsigned nr_cleans;

/* 1000 ticks a read; none while a thread hashes as another CPU: its speed
 * under qemu-aarch64 is not what the boot CPU's bounded wait is about. */
uint64_t purgatory_arch_counter(void) {
	return __atomic_add_fetch(&fake_counter, counter_frozen ? 0 : 1000, __ATOMIC_RELAXED);
}

uint32_t purgatory_arch_counter_freq(void) {
	return FREQ;
}

void purgatory_arch_outb(uint16_t port, uint8_t value) {
	fail_msg("an I/O port access on arm64 (port %#x)", port);
}

uint8_t purgatory_arch_inb(uint16_t port) {
	fail_msg("an I/O port access on arm64 (port %#x)", port);
	return 0;
}

/* A UART whose transmitter is always ready: PL011 FR reads 0 (TXFF clear),
 * 16550 LSR reads THRE. */
uint32_t purgatory_arch_mmio_read(uint64_t addr, unsigned width) {
	return addr == UART_BASE + 0x18 ? 0 : 0x20;
}

void purgatory_arch_mmio_write(uint64_t addr, unsigned width, uint32_t value) {
	assert_int_equal(addr, UART_BASE);
	console_width = width;
	if (console_len < sizeof(console) - 1)
		console[console_len++] = (char)value;
}

void purgatory_arch_map(struct purgatory_params *p) {
	maps++;
}

void purgatory_arch_clean(uint64_t addr, uint64_t size) {
	assert_true(nr_cleans < 32);
	cleans[nr_cleans].addr = addr;
	cleans[nr_cleans].size = size;
	cleans[nr_cleans++].maps_before = maps;
}

void purgatory_arch_reset(const struct purgatory_params *p) {
	resets++;
	reset_method_seen = p->reset_method;
	longjmp(reset_jmp, 1);
}

/* The other CPUs: what the fake CPU_ON does. */
enum cpus_kind {
	CPUS_NONE,  /* none started: the boot CPU hashes alone */
	CPUS_ALL,   /* one thread hashes every chunk before the boot CPU looks */
	CPUS_ONE,   /* one thread hashes at least one chunk, then the rest is shared */
	CPUS_STUCK, /* one "CPU" claims chunk 0, never finishes it, never turns off */
};
static enum cpus_kind cpus_kind;
static pthread_t cpu_thread;
static bool cpu_thread_running;

static void *cpu_main(void *arg) {
	(void)purgatory_work_run(arg, NULL);
	return NULL;
}

unsigned purgatory_arch_cpus_start(struct purgatory_params *p, struct purgatory_work *w) {
	switch (cpus_kind) {
	case CPUS_NONE:
		return 0;
	case CPUS_STUCK:
		(void)__atomic_fetch_add(&w->next, 1, __ATOMIC_ACQ_REL);
		return 1;
	default:
		assert_int_equal(pthread_create(&cpu_thread, NULL, cpu_main, w), 0);
		cpu_thread_running = true;
		if (cpus_kind == CPUS_ALL) {
			assert_int_equal(pthread_join(cpu_thread, NULL), 0);
			cpu_thread_running = false;
		} else
			while (__atomic_load_n(&w->cpus, __ATOMIC_ACQUIRE) == 0)
				;
		return 1;
	}
}

unsigned purgatory_arch_cpus_stop(struct purgatory_params *p) {
	if (cpu_thread_running) {
		assert_int_equal(pthread_join(cpu_thread, NULL), 0);
		cpu_thread_running = false;
	}
	return cpus_kind == CPUS_STUCK;
}

struct fixture {
	uint8_t *kernel; /* 200 KiB of data, zero to 256 KiB */
	char dtb[512];   /* a stand-in: the bootargs with the stamps field */
	struct purgatory_params params;
};

static void add_segment(struct purgatory_params *p, const void *addr, size_t filesz, size_t memsz) {
	struct purgatory_segment *s = &p->segments[p->nr_segments++];
	struct sha256_mb_msg m = { .data = addr, .size = filesz };

	*s = (struct purgatory_segment){ .addr = (uintptr_t)addr,
		                         .filesz = filesz,
		                         .memsz = memsz,
		                         .first_chunk = p->nr_chunks,
		                         .nr_chunks = (uint32_t)sha256_mb_chunks(filesz,
		                                                                 p->chunk_size) };
	sha256_mb_digest_all(SHA256_IMPL_GENERIC, &m, 1, p->chunk_size,
	                     &p->chunk_sha256[p->nr_chunks]);
	p->nr_chunks += s->nr_chunks;
}

static int setup(void **state) {
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f || !(f->kernel = calloc(1, 256 << 10)))
		return -1;
	for (size_t i = 0; i < (200 << 10); i++)
		f->kernel[i] = (uint8_t)(i * 7 + 1);
	snprintf(f->dtb, sizeof(f->dtb), "console=ttyAMA0 %s%s", PURGATORY_STAMPS_KEY,
	         PURGATORY_STAMPS_TEMPLATE_ARM64);
	f->params = (struct purgatory_params){
		.magic = PURGATORY_ABI_MAGIC,
		.abi_version = PURGATORY_ABI_VERSION,
		.size = sizeof(f->params),
		.entry_pc = 0x40200000,
		.entry_x0 = (uintptr_t)f->dtb,
		.mode = PURGATORY_MODE_VERIFIED,
		.stamps_addr = (uintptr_t)f->dtb + strlen("console=ttyAMA0 ") +
		               strlen(PURGATORY_STAMPS_KEY),
		.stamps_len = PURGATORY_STAMPS_FIELD_LEN_ARM64,
		.console_kind = PURGATORY_CONSOLE_PL011,
		.console_base = UART_BASE,
		.reset_method = PURGATORY_RESET_PSCI_HVC,
		.chunk_size = CHUNK_SIZE,
	};
	add_segment(&f->params, f->kernel, 200 << 10, 256 << 10);
	add_segment(&f->params, f->dtb, sizeof(f->dtb), sizeof(f->dtb));
	fake_counter = 0;
	console_len = 0;
	memset(console, 0, sizeof(console));
	resets = maps = nr_cleans = 0;
	cpus_kind = CPUS_NONE;
	*state = f;
	return 0;
}

static int teardown(void **state) {
	struct fixture *f = *state;

	if (cpu_thread_running) {
		pthread_join(cpu_thread, NULL);
		cpu_thread_running = false;
	}
	free(f->kernel);
	free(f);
	return 0;
}

/* Runs purgatory_main(); true when it returned (the kernel would be entered). */
static bool run(struct fixture *f) {
	if (setjmp(reset_jmp) != 0)
		return false;
	purgatory_main(&f->params);
	return true;
}

static const char *field(struct fixture *f) {
	return (const char *)(uintptr_t)f->params.stamps_addr;
}

/* Verified: mapped once before the first clean, every segment then the
 * stamps field cleaned after verification, and the arm64 field written. */
static void test_verified_maps_cleans_and_stamps(void **state) {
	struct fixture *f = *state;
	char want[PURGATORY_STAMPS_FIELD_LEN_ARM64 + 1] = {};

	assert_true(run(f));
	assert_int_equal(maps, 1);
	assert_int_equal(nr_cleans, 3);
	assert_int_equal(cleans[0].addr, f->params.segments[0].addr);
	assert_int_equal(cleans[0].size, f->params.segments[0].memsz);
	assert_int_equal(cleans[1].addr, f->params.segments[1].addr);
	assert_int_equal(cleans[2].addr, f->params.stamps_addr);
	assert_int_equal(cleans[2].size, PURGATORY_STAMPS_FIELD_LEN_ARM64);
	for (unsigned i = 0; i < nr_cleans; i++)
		assert_int_equal(cleans[i].maps_before, 1);
	assert_int_equal(f->params.counter_freq, FREQ);

	purgatory_format_stamps_arm64(&f->params.stamps, PURGATORY_STAMPS_MODE_VERIFIED,
	                              f->params.sha256_impl == SHA256_IMPL_ARMV8_CE ? 'c' : 'g',
	                              FREQ, 1, 0, want);
	assert_memory_equal(field(f), want, PURGATORY_STAMPS_FIELD_LEN_ARM64);
	assert_memory_equal(field(f) + PURGATORY_STAMPS_FIELD_LEN, ",03b9aca0,01,00", 15);
	assert_int_equal(f->params.cpus_hashed, 1);
	assert_int_equal(field(f)[PURGATORY_STAMPS_FIELD_LEN_ARM64], 0);
	assert_int_equal(resets, 0);
}

/* Fast: nothing read, so no map and no segment cleaned; the field is. */
static void test_fast_maps_nothing(void **state) {
	struct fixture *f = *state;

	f->params.mode = PURGATORY_MODE_FAST;
	f->kernel[10] ^= 1;
	assert_true(run(f));
	assert_int_equal(maps, 0);
	assert_int_equal(nr_cleans, 1);
	assert_int_equal(cleans[0].addr, f->params.stamps_addr);
	assert_memory_equal(field(f) + PURGATORY_STAMPS_MODE_POS, "f,-,03b9aca0,00,00", 18);
}

/* Another CPU hashed: counted in the block and the stamps, none late. It
 * may have taken every chunk before the boot CPU claimed one (1 CPU hashed),
 * or not (2); with all the chunks its own, it alone counts. */
static void test_cpus_share_chunks(void **state) {
	struct fixture *f = *state;
	char want[16];

	cpus_kind = CPUS_ONE;
	counter_frozen = true;
	assert_true(run(f));
	counter_frozen = false;
	assert_in_range(f->params.cpus_hashed, 1, 2);
	assert_int_equal(f->params.cpus_left_on, 0);
	assert_false(f->params.arch_state & PURGATORY_ARCH_STATE_SMP_LATE);
	snprintf(want, sizeof(want), "03b9aca0,%02x,00", f->params.cpus_hashed);
	assert_memory_equal(field(f) + PURGATORY_STAMPS_FREQ_POS, want, 14);
	assert_int_equal(nr_cleans, 3);

	teardown(state);
	setup(state);
	f = *state;
	cpus_kind = CPUS_ALL;
	assert_true(run(f));
	assert_int_equal(f->params.cpus_hashed, 1);
	assert_memory_equal(field(f) + PURGATORY_STAMPS_FREQ_POS, "03b9aca0,01,00", 14);
}

/* A chunk another CPU hashed wrong bytes of is refused like one the boot
 * CPU hashed: its digests are compared, not trusted. */
static void test_cpus_mismatch_refused(void **state) {
	struct fixture *f = *state;

	cpus_kind = CPUS_ALL;
	f->kernel[(128 << 10) + 5] ^= 0x40;
	assert_false(run(f));
	assert_int_equal(resets, 1);
	assert_non_null(strstr(console, "SHA-256 mismatch: segment 0"));
	assert_non_null(strstr(console, "chunk 2 at"));
	assert_memory_equal(field(f), PURGATORY_STAMPS_TEMPLATE_ARM64,
	                    PURGATORY_STAMPS_FIELD_LEN_ARM64);
}

/* A CPU that claimed a chunk and never finished it: the boot CPU waits its
 * bounded time, hashes the chunk itself (a bad one is still refused), and
 * records the CPU left on. */
static void test_cpus_stuck_chunk_hashed_again(void **state) {
	struct fixture *f = *state;

	cpus_kind = CPUS_STUCK;
	assert_true(run(f));
	assert_true(f->params.arch_state & PURGATORY_ARCH_STATE_SMP_LATE);
	assert_int_equal(f->params.cpus_hashed, 1);
	assert_int_equal(f->params.cpus_left_on, 1);
	assert_memory_equal(field(f) + PURGATORY_STAMPS_FREQ_POS, "03b9aca0,01,01", 14);

	teardown(state);
	setup(state);
	f = *state;
	cpus_kind = CPUS_STUCK;
	f->kernel[7] ^= 1; /* chunk 0: the one the stuck CPU claimed */
	assert_false(run(f));
	assert_non_null(strstr(console, "SHA-256 mismatch: segment 0"));
	assert_non_null(strstr(console, "chunk 0 at"));
}

/* More CPUs than the block can list: a misread contract, refused. */
static void test_too_many_cpus_refused(void **state) {
	struct fixture *f = *state;

	f->params.nr_cpus = PURGATORY_MAX_CPUS + 1;
	assert_false(run(f));
	assert_non_null(strstr(console, "too many CPUs listed"));
}

/* A mismatch: the line on the PL011 (CR before LF), a reset with the block's
 * PSCI conduit, nothing cleaned for a kernel that is never entered. */
static void test_mismatch_pl011_and_psci(void **state) {
	struct fixture *f = *state;

	f->kernel[(64 << 10) + 3] ^= 1;
	assert_false(run(f));
	assert_int_equal(resets, 1);
	assert_int_equal(reset_method_seen, PURGATORY_RESET_PSCI_HVC);
	assert_int_equal(console_width, 4);
	assert_non_null(strstr(console, "\r\nupgraded purgatory: SHA-256 mismatch: segment 0"));
	assert_non_null(strstr(console, "chunk 1 at"));
	assert_non_null(strstr(console, "resetting\r\n"));
	assert_int_equal(nr_cleans, 0);
	assert_memory_equal(field(f), PURGATORY_STAMPS_TEMPLATE_ARM64,
	                    PURGATORY_STAMPS_FIELD_LEN_ARM64);
}

/* The 16550 kinds write their transmit register at the base, 4 or 1 bytes
 * wide; an unknown kind prints nothing but still resets. */
static void test_console_kinds(void **state) {
	struct fixture *f = *state;
	static const struct {
		uint32_t kind;
		unsigned width;
		bool prints;
	} k[] = {
		{ PURGATORY_CONSOLE_NS16550_32, 4, true },
		{ PURGATORY_CONSOLE_NS16550_8, 1, true },
		{ 99, 0, false },
		{ PURGATORY_CONSOLE_PORT, 0, false },
	};

	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		console_len = 0;
		memset(console, 0, sizeof(console));
		resets = 0;
		f->params.console_kind = k[i].kind;
		f->params.magic = 0;
		assert_false(run(f));
		assert_int_equal(resets, 1);
		assert_int_equal(console_len > 0, k[i].prints);
		if (k[i].prints) {
			assert_int_equal(console_width, k[i].width);
			assert_non_null(strstr(console, "parameter block does not match"));
		}
	}
}

/* A field of x86's length is never written by arm64 purgatory. */
static void test_x86_field_length_untouched(void **state) {
	struct fixture *f = *state;

	f->params.stamps_len = PURGATORY_STAMPS_FIELD_LEN;
	assert_true(run(f));
	assert_memory_equal(field(f), PURGATORY_STAMPS_TEMPLATE_ARM64,
	                    PURGATORY_STAMPS_FIELD_LEN_ARM64);
}

/* ID_AA64ISAR0_EL1.SHA2 (bits 15:12): 0 none, 1 SHA-256, 2 SHA-256 and
 * SHA-512; user space follows HWCAP_SHA2. */
static void test_sha256_choice(void **state) {
	assert_false(sha256_arm64_isar0_has_sha256(0));
	assert_false(sha256_arm64_isar0_has_sha256(UINT64_C(0xffff0fff)));
	assert_true(sha256_arm64_isar0_has_sha256(UINT64_C(1) << 12));
	assert_true(sha256_arm64_isar0_has_sha256(UINT64_C(2) << 12));
	assert_int_equal(sha256_impl_supported(SHA256_IMPL_ARMV8_CE),
	                 (getauxval(AT_HWCAP) & (1UL << 6)) != 0);
	assert_int_equal(sha256_impl_best(), sha256_impl_supported(SHA256_IMPL_ARMV8_CE)
	                                             ? SHA256_IMPL_ARMV8_CE
	                                             : SHA256_IMPL_GENERIC);
	assert_false(sha256_impl_supported(SHA256_IMPL_SHANI));
	assert_false(sha256_impl_supported(SHA256_IMPL_AVX2));
	assert_false(sha256_impl_supported(SHA256_IMPL_SSE2));
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_verified_maps_cleans_and_stamps, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_fast_maps_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cpus_share_chunks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cpus_mismatch_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cpus_stuck_chunk_hashed_again, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_too_many_cpus_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mismatch_pl011_and_psci, setup, teardown),
		cmocka_unit_test_setup_teardown(test_console_kinds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_x86_field_length_untouched, setup, teardown),
		cmocka_unit_test(test_sha256_choice),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
