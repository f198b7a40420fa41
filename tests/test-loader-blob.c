/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The real purgatory blob, as the loader embeds it, run in user space: copied
 * to two arbitrary addresses (it must need no relocation), its parameters
 * written at PURGATORY_PARAMS_OFFSET, and its C entry called like a function
 * with host buffers standing in for physical memory. This exercises the
 * freestanding build of purgatory.c and sha256.c (CPUID dispatch included).
 * The mismatch path ends in port I/O and lidt, which user space may not do:
 * there the child process must die by a signal before any stamp is written,
 * instead of returning (which would mean "boot the kernel").
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "loader.h"
#include "macros.h"
#include "purgatory-abi.h"
#include "sha256.h"

extern const unsigned char purgatory_blob[];
extern const size_t purgatory_blob_size;
extern const size_t purgatory_blob_entry_c_offset;

#define SEG_SIZE (1u << 20)  /* the file part: several chunks */
#define SEG_PAD  (64u << 10) /* the zero-filled rest */
#define CMDLINE  "console=ttyS0 " PURGATORY_STAMPS_KEY PURGATORY_STAMPS_TEMPLATE

struct run {
	uint8_t *mem; /* the blob's copy */
	size_t size;
	uint8_t *segment;
	char *cmdline; /* shared with a child process */
};

static struct purgatory_params *params_of(struct run *r) {
	return (struct purgatory_params *)(r->mem + PURGATORY_PARAMS_OFFSET);
}

static void run_init(struct run *r, uint32_t mode) {
	struct purgatory_params *p;

	r->size = (purgatory_blob_size + 4095) & ~(size_t)4095;
	r->mem = mmap(NULL, r->size, PROT_READ | PROT_WRITE | PROT_EXEC,
	              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(r->mem != MAP_FAILED);
	memcpy(r->mem, purgatory_blob, purgatory_blob_size);

	r->segment = calloc(1, SEG_SIZE + SEG_PAD);
	assert_non_null(r->segment);
	for (size_t i = 0; i < SEG_SIZE; i++)
		r->segment[i] = (uint8_t)(i * 31 + 7);
	r->cmdline = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(r->cmdline != MAP_FAILED);
	strcpy(r->cmdline, CMDLINE);

	p = params_of(r);
	/* The blob ships with zeroed parameters. */
	for (size_t i = 0; i < sizeof(*p); i++)
		assert_int_equal(((uint8_t *)p)[i], 0);
	*p = (struct purgatory_params){
		.magic = PURGATORY_ABI_MAGIC,
		.abi_version = PURGATORY_ABI_VERSION,
		.size = sizeof(*p),
		.mode = mode,
		.stamps_addr = (uintptr_t)r->cmdline + strlen(CMDLINE) - PURGATORY_STAMPS_FIELD_LEN,
		.stamps_len = PURGATORY_STAMPS_FIELD_LEN,
	};
	assert_int_equal(loader_params_set_digests(p,
	                                           (const struct loader_segment[]){
	                                                   { .buf = r->segment,
	                                                     .bufsz = SEG_SIZE,
	                                                     .mem = (uintptr_t)r->segment,
	                                                     .memsz = SEG_SIZE + SEG_PAD },
	                                                   { .buf = r->cmdline,
	                                                     .bufsz = 4096,
	                                                     .mem = (uintptr_t)r->cmdline,
	                                                     .memsz = 4096 },
	                                           },
	                                           2),
	                 0);
	assert_true(p->nr_chunks > 2);
}

static void run_done(struct run *r) {
	munmap(r->mem, r->size);
	munmap(r->cmdline, 4096);
	free(r->segment);
}

static void call_entry(struct run *r) {
	void (*entry)(void) = (void (*)(void))(uintptr_t)(r->mem + purgatory_blob_entry_c_offset);

	entry();
}

static void test_blob_verified_returns_and_stamps(void **state) {
	struct run r;
	char mode, impl;
	unsigned long long e, v, j;

	run_init(&r, PURGATORY_MODE_VERIFIED);
	call_entry(&r);
	assert_int_equal(
	        sscanf(strstr(r.cmdline, PURGATORY_STAMPS_KEY) + strlen(PURGATORY_STAMPS_KEY),
	               "%16llx,%16llx,%16llx,%c,%c", &e, &v, &j, &mode, &impl),
	        5);
	print_message("[ INFO     ] blob stamps: %s (verify took %llu TSC ticks)\n",
	              strstr(r.cmdline, PURGATORY_STAMPS_KEY), v - e);
	assert_true(e > 0 && e <= v && v <= j);
	assert_int_equal(mode, 'v');
	/* The blob measured its implementations and picked a supported one. */
	assert_true(sha256_impl_supported(params_of(&r)->sha256_impl));
	print_message("[ INFO     ] blob picked %s\n",
	              sha256_impl_to_string(params_of(&r)->sha256_impl));
	assert_int_equal(params_of(&r)->stamps.tsc_entry, e);
	run_done(&r);
}

/* Every implementation this CPU offers, requested explicitly, in the blob. */
static void test_blob_each_implementation(void **state) {
	for (Sha256Impl i = 0; i < _SHA256_IMPL_MAX; i++) {
		static const char impl_stamp[] = PURGATORY_STAMPS_IMPL_OF_SHA256;
		struct run r;
		char *field;

		if (!sha256_impl_supported(i))
			continue;
		run_init(&r, PURGATORY_MODE_VERIFIED);
		params_of(&r)->sha256_impl_request = i + 1;
		call_entry(&r);
		assert_int_equal(params_of(&r)->sha256_impl, i);
		field = strstr(r.cmdline, PURGATORY_STAMPS_KEY);
		assert_non_null(field);
		assert_int_equal(field[strlen(field) - 1], impl_stamp[i]);
		run_done(&r);
	}
}

static void test_blob_runs_at_any_address(void **state) {
	struct run a, b;

	run_init(&a, PURGATORY_MODE_FAST);
	run_init(&b, PURGATORY_MODE_FAST);
	assert_ptr_not_equal(a.mem, b.mem);
	call_entry(&a);
	call_entry(&b);
	assert_non_null(strstr(a.cmdline, ",f,-"));
	assert_non_null(strstr(b.cmdline, ",f,-"));
	run_done(&a);
	run_done(&b);
}

/* Runs the entry in a child; returns the signal that ended it, 0 if it
 * returned (the kernel would have been entered). */
static int run_in_child(struct run *r) {
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		signal(SIGSEGV, SIG_DFL);
		signal(SIGILL, SIG_DFL);
		call_entry(r);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		return WTERMSIG(status);
	assert_true(WIFEXITED(status));
	return 0;
}

static void test_blob_mismatch_never_returns(void **state) {
	struct run r;
	int sig;

	run_init(&r, PURGATORY_MODE_VERIFIED);
	r.segment[SEG_SIZE - 1] ^= 0x80;
	sig = run_in_child(&r);
	print_message("[ INFO     ] mismatch: child ended by signal %d\n", sig);
	assert_true(sig == SIGSEGV || sig == SIGILL || sig == SIGBUS);
	r.segment[SEG_SIZE - 1] ^= 0x80;
	/* A byte in the zero-filled rest is refused the same way. */
	r.segment[SEG_SIZE + SEG_PAD / 2] = 1;
	sig = run_in_child(&r);
	print_message("[ INFO     ] mismatch: child ended by signal %d\n", sig);
	assert_true(sig == SIGSEGV || sig == SIGILL || sig == SIGBUS);
	/* No stamp: the placeholder still holds its template. */
	assert_string_equal(r.cmdline, CMDLINE);

	/* The same corruption in fast mode is not looked at. */
	params_of(&r)->mode = PURGATORY_MODE_FAST;
	assert_int_equal(run_in_child(&r), 0);
	assert_null(strstr(r.cmdline, PURGATORY_STAMPS_TEMPLATE));
	run_done(&r);
}

static void test_blob_panic_fast_refused(void **state) {
	struct run r;

	run_init(&r, PURGATORY_MODE_FAST);
	params_of(&r)->flags = PURGATORY_FLAG_PANIC;
	assert_int_not_equal(run_in_child(&r), 0);
	assert_string_equal(r.cmdline, CMDLINE);
	run_done(&r);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_blob_verified_returns_and_stamps),
		cmocka_unit_test(test_blob_each_implementation),
		cmocka_unit_test(test_blob_runs_at_any_address),
		cmocka_unit_test(test_blob_mismatch_never_returns),
		cmocka_unit_test(test_blob_panic_fast_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
