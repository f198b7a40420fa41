/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Purgatory: the code that runs after the old kernel stopped and before the new
 * one starts. Freestanding (no libc); memory is identity-mapped, so a physical
 * address from the loader is a pointer here.
 *
 * Verified mode hashes every segment the loader listed (zero padding included)
 * and compares with the digest recorded at stage time. A mismatch never boots
 * the image: one line goes to the serial console and the machine resets.
 */

#include "purgatory.h"
#include "sha256.h"

#define UART_THR      0 /* transmit holding register */
#define UART_LSR      5 /* line status register */
#define UART_LSR_THRE 0x20
#define UART_SPIN_MAX 100000 /* polls per character before giving up on the UART */

static void console_putc(uint16_t port, char c) {
	for (unsigned i = 0; i < UART_SPIN_MAX; i++)
		if (purgatory_arch_inb(port + UART_LSR) & UART_LSR_THRE)
			break;
	purgatory_arch_outb(port + UART_THR, (uint8_t)c);
}

static void console_puts(uint16_t port, const char *s) {
	if (port == 0)
		return;
	for (; *s; s++) {
		if (*s == '\n')
			console_putc(port, '\r');
		console_putc(port, *s);
	}
}

static void console_puthex(uint16_t port, uint64_t v) {
	char buf[19] = "0x";

	for (int i = 0; i < 16; i++)
		buf[2 + i] = "0123456789abcdef"[(v >> (60 - 4 * i)) & 0xf];
	buf[18] = 0;
	console_puts(port, buf);
}

/* The mismatch path: say why, then reset. Never returns, never spins. */
__attribute__((noreturn)) static void refuse(const struct purgatory_params *p, const char *why,
                                             int segment) {
	uint16_t port = p->console_port;

	console_puts(port, "\nupgraded purgatory: ");
	console_puts(port, why);
	if (segment >= 0) {
		console_puts(port, ": segment ");
		console_putc(port, (char)('0' + segment % 10));
		console_puts(port, " at ");
		console_puthex(port, p->digests[segment].addr);
		console_puts(port, " size ");
		console_puthex(port, p->digests[segment].size);
	}
	console_puts(port, "; not booting the staged kernel, resetting\n");
	purgatory_arch_reset();
}

static bool digest_equal(const uint8_t *a, const uint8_t *b) {
	uint8_t diff = 0;

	for (unsigned i = 0; i < SHA256_DIGEST_SIZE; i++)
		diff |= a[i] ^ b[i];
	return diff == 0;
}

void purgatory_format_stamps(const struct purgatory_stamps *s, char mode, char impl,
                             char out[static PURGATORY_STAMPS_FIELD_LEN]) {
	const uint64_t v[3] = { s->tsc_entry, s->tsc_verified, s->tsc_jump };
	unsigned o = 0;

	for (unsigned k = 0; k < 3; k++) {
		for (int i = 0; i < 16; i++)
			out[o++] = "0123456789abcdef"[(v[k] >> (60 - 4 * i)) & 0xf];
		out[o++] = ',';
	}
	out[o++] = mode;
	out[o++] = ',';
	out[o++] = impl;
}

static char impl_char(Sha256Impl impl) {
	switch (impl) {
	case SHA256_IMPL_SHANI:
		return 's';
	case SHA256_IMPL_AVX2:
		return 'a';
	default:
		return 'g';
	}
}

void purgatory_main(struct purgatory_params *p) {
	uint64_t t_entry = purgatory_arch_rdtsc();
	bool verify;
	char mode, impl = '-';

	/* 1. The contract: a blob and a loader of different versions never mix. */
	if (p->magic != PURGATORY_ABI_MAGIC || p->abi_version != PURGATORY_ABI_VERSION ||
	    p->size != sizeof(*p))
		refuse(p, "parameter block does not match this purgatory", -1);
	if (p->nr_digests > PURGATORY_MAX_DIGESTS)
		refuse(p, "too many segments listed", -1);
	if (p->mode != PURGATORY_MODE_VERIFIED && p->mode != PURGATORY_MODE_FAST)
		refuse(p, "unknown mode", -1);
	/* The panic path always verifies: there is no way to turn it off. */
	if ((p->flags & PURGATORY_FLAG_PANIC) && p->mode != PURGATORY_MODE_VERIFIED)
		refuse(p, "panic image in fast mode", -1);
	verify = p->mode == PURGATORY_MODE_VERIFIED;
	if (verify && p->nr_digests == 0)
		refuse(p, "verified mode without digests", -1);
	p->stamps.tsc_entry = t_entry;

	/* 2. Verification. */
	if (verify) {
		Sha256Impl best;

		if (p->sha256_impl_request != 0 &&
		    sha256_impl_supported((Sha256Impl)(p->sha256_impl_request - 1)))
			best = (Sha256Impl)(p->sha256_impl_request - 1);
		else
			best = sha256_impl_calibrate();

		p->sha256_impl = best;
		impl = impl_char(best);
		for (unsigned i = 0; i < p->nr_digests; i++) {
			uint8_t d[SHA256_DIGEST_SIZE];

			sha256_digest_impl(best, (const void *)(uintptr_t)p->digests[i].addr,
			                   p->digests[i].size, d);
			if (!digest_equal(d, p->digests[i].sha256))
				refuse(p, "SHA-256 mismatch", (int)i);
		}
	}
	p->stamps.tsc_verified = purgatory_arch_rdtsc();

	/* 3. Stamps into the new kernel's command line, then hand over. */
	mode = (p->flags & PURGATORY_FLAG_PANIC) ? 'p' : verify ? 'v' : 'f';
	p->stamps.tsc_jump = purgatory_arch_rdtsc();
	if (p->stamps_addr != 0 && p->stamps_len == PURGATORY_STAMPS_FIELD_LEN)
		purgatory_format_stamps(&p->stamps, mode, impl, (char *)(uintptr_t)p->stamps_addr);
}
