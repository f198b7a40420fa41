/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Purgatory: the code that runs after the old kernel stopped and before the new
 * one starts. Freestanding (no libc); memory is identity-mapped (x86_64: by
 * the old kernel; arm64: by purgatory_arch_map(), or not mapped at all with
 * the MMU off), so a physical address from the loader is a pointer here.
 *
 * Verified mode checks every segment the loader listed: the bytes loaded from
 * the file, chunk by chunk, against the SHA-256 digests recorded at stage time
 * (hashed in parallel lanes), and the zero-filled rest for zeros. A mismatch
 * never boots the image: one line goes to the serial console and the machine
 * resets.
 */

#include "purgatory.h"
#include "sha256-mb.h"
#include "sha256.h"

#define UART_THR             0 /* 16550 transmit holding register */
#define UART_LSR             5 /* 16550 line status register */
#define UART_LSR_THRE        0x20
#define PL011_DR             0x00   /* PL011 data register */
#define PL011_FR             0x18   /* PL011 flag register */
#define PL011_FR_TXFF        0x20   /* transmit FIFO full */
#define UART_SPIN_MAX        100000 /* polls per character before giving up on the UART */
/* How long the boot CPU waits for a chunk another CPU claimed, beyond the
 * slowest chunk it hashed itself, before hashing it again: a second, and
 * eight of its own slowest chunks. */
#define WORK_GRACE_SECONDS   1
#define WORK_GRACE_CHUNKS    8
#define COUNTER_FREQ_UNKNOWN UINT32_C(1000000000) /* when CNTFRQ_EL0 reads 0 */

/* The console the parameter block names: a kind and where it is. */
struct console {
	uint32_t kind;
	uint16_t port;
	uint64_t base;
};

static bool console_ready(const struct console *con) {
	switch (con->kind) {
	case PURGATORY_CONSOLE_PORT:
		return purgatory_arch_inb(con->port + UART_LSR) & UART_LSR_THRE;
	case PURGATORY_CONSOLE_PL011:
		return !(purgatory_arch_mmio_read(con->base + PL011_FR, 4) & PL011_FR_TXFF);
	case PURGATORY_CONSOLE_NS16550_32:
		return purgatory_arch_mmio_read(con->base + 4 * UART_LSR, 4) & UART_LSR_THRE;
	default:
		return purgatory_arch_mmio_read(con->base + UART_LSR, 1) & UART_LSR_THRE;
	}
}

static void console_putc(const struct console *con, char c) {
	for (unsigned i = 0; i < UART_SPIN_MAX; i++)
		if (console_ready(con))
			break;
	switch (con->kind) {
	case PURGATORY_CONSOLE_PORT:
		purgatory_arch_outb(con->port + UART_THR, (uint8_t)c);
		break;
	case PURGATORY_CONSOLE_PL011:
		purgatory_arch_mmio_write(con->base + PL011_DR, 4, (uint8_t)c);
		break;
	case PURGATORY_CONSOLE_NS16550_32:
		purgatory_arch_mmio_write(con->base + UART_THR, 4, (uint8_t)c);
		break;
	default:
		purgatory_arch_mmio_write(con->base + UART_THR, 1, (uint8_t)c);
		break;
	}
}

/* None when the kind is unknown, or names no port or address. */
static bool console_present(const struct console *con) {
	if (con->kind == PURGATORY_CONSOLE_PORT)
		return con->port != 0;
	return con->kind <= PURGATORY_CONSOLE_NS16550_8 && con->base != 0;
}

static void console_puts(const struct console *con, const char *s) {
	if (!console_present(con))
		return;
	for (; *s; s++) {
		if (*s == '\n')
			console_putc(con, '\r');
		console_putc(con, *s);
	}
}

static void console_puthex(const struct console *port, uint64_t v) {
	char buf[19] = "0x";

	for (int i = 0; i < 16; i++)
		buf[2 + i] = "0123456789abcdef"[(v >> (60 - 4 * i)) & 0xf];
	buf[18] = 0;
	console_puts(port, buf);
}

static void console_putdec(const struct console *port, uint64_t v) {
	char buf[21];
	int i = 20;

	buf[i] = 0;
	do
		buf[--i] = (char)('0' + v % 10);
	while ((v /= 10) > 0);
	console_puts(port, buf + i);
}

static struct console console_of(const struct purgatory_params *p) {
	return (struct console){ .kind = p->console_kind,
		                 .port = p->console_port,
		                 .base = p->console_base };
}

/* Where a check failed: a segment, and within it a chunk or a byte. */
struct where {
	int segment;      /* -1: the parameter block itself */
	const char *what; /* "chunk N" or "byte" */
	int64_t chunk;    /* -1: no chunk number */
	uint64_t addr, size;
};

/* The mismatch path: say why, then reset. Never returns, never spins. */
__attribute__((noreturn)) static void refuse_at(const struct purgatory_params *p, const char *why,
                                                const struct where *w) {
	const struct console con = console_of(p);
	const struct console *port = &con;

	console_puts(port, "\nupgraded purgatory: ");
	console_puts(port, why);
	if (w && w->segment >= 0) {
		const struct purgatory_segment *s = &p->segments[w->segment];

		console_puts(port, ": segment ");
		console_putdec(port, (uint64_t)w->segment);
		console_puts(port, " at ");
		console_puthex(port, s->addr);
		console_puts(port, " size ");
		console_puthex(port, s->memsz);
		console_puts(port, ", ");
		console_puts(port, w->what);
		if (w->chunk >= 0) {
			console_puts(port, " ");
			console_putdec(port, (uint64_t)w->chunk);
		}
		console_puts(port, " at ");
		console_puthex(port, w->addr);
		if (w->size > 0) {
			console_puts(port, " size ");
			console_puthex(port, w->size);
		}
	}
	console_puts(port, "; not booting the staged kernel, resetting\n");
	purgatory_arch_reset(p);
}

void purgatory_console_line(const struct purgatory_params *p, const char *msg) {
	const struct console con = console_of(p);

	console_puts(&con, "\nupgraded purgatory: ");
	console_puts(&con, msg);
	console_puts(&con, "\n");
}

void purgatory_console_exception(const struct purgatory_params *p, unsigned vector, uint64_t esr,
                                 uint64_t elr, uint64_t far) {
	const struct console con = console_of(p);

	console_puts(&con, "\nupgraded purgatory: unexpected exception, vector ");
	console_putdec(&con, vector);
	console_puts(&con, " ESR ");
	console_puthex(&con, esr);
	console_puts(&con, " ELR ");
	console_puthex(&con, elr);
	console_puts(&con, " FAR ");
	console_puthex(&con, far);
	console_puts(&con, "; not booting the staged kernel, resetting\n");
}

__attribute__((noreturn)) static void refuse(const struct purgatory_params *p, const char *why) {
	refuse_at(p, why, NULL);
}

/* Offset of the first byte that is not zero in [p, p + n), n when all are.
 * Eight words per step, or-ed together without a branch: memory speed. */
static uint64_t zero_scan(const uint8_t *p, uint64_t n) {
	typedef uint64_t __attribute__((may_alias)) word_t;
	uint64_t i = 0;

	for (; i < n && ((uintptr_t)(p + i) & 7) != 0; i++)
		if (p[i] != 0)
			return i;
	for (; n - i >= 64; i += 64) {
		const word_t *w = (const word_t *)(p + i);

		if ((w[0] | w[1] | w[2] | w[3] | w[4] | w[5] | w[6] | w[7]) != 0)
			break;
	}
	for (; i < n; i++)
		if (p[i] != 0)
			return i;
	return n;
}

static bool digest_equal(const uint8_t *a, const uint8_t *b) {
	uint8_t diff = 0;

	for (unsigned i = 0; i < SHA256_DIGEST_SIZE; i++)
		diff |= a[i] ^ b[i];
	return diff == 0;
}

void purgatory_format_stamps(const struct purgatory_stamps *s, char mode, char impl,
                             char out[static PURGATORY_STAMPS_FIELD_LEN]) {
	const uint64_t v[PURGATORY_STAMPS_NR_TSC] = { s->tsc_entry, s->tsc_verified, s->tsc_jump };
	unsigned o = 0;

	for (unsigned k = 0; k < PURGATORY_STAMPS_NR_TSC; k++) {
		for (int i = 0; i < PURGATORY_STAMPS_TSC_DIGITS; i++)
			out[o++] = "0123456789abcdef"[(v[k] >> (60 - 4 * i)) & 0xf];
		out[o++] = PURGATORY_STAMPS_SEPARATOR;
	}
	out[o++] = mode;
	out[o++] = PURGATORY_STAMPS_SEPARATOR;
	out[o++] = impl;
}

/* digits lowercase hex digits of v at out, a separator before them. */
static void put_hex_field(char *out, uint32_t v, int digits) {
	out[-1] = PURGATORY_STAMPS_SEPARATOR;
	for (int i = 0; i < digits; i++)
		out[i] = "0123456789abcdef"[(v >> (4 * (digits - 1 - i))) & 0xf];
}

void purgatory_format_stamps_arm64(const struct purgatory_stamps *s, char mode, char impl,
                                   uint32_t freq, uint32_t cpus, uint32_t left_on,
                                   char out[static PURGATORY_STAMPS_FIELD_LEN_ARM64]) {
	purgatory_format_stamps(s, mode, impl, out);
	put_hex_field(out + PURGATORY_STAMPS_FREQ_POS, freq, PURGATORY_STAMPS_FREQ_DIGITS);
	put_hex_field(out + PURGATORY_STAMPS_CPUS_POS, cpus > 0xff ? 0xff : cpus,
	              PURGATORY_STAMPS_CPUS_DIGITS);
	put_hex_field(out + PURGATORY_STAMPS_LEFT_ON_POS, left_on > 0xff ? 0xff : left_on,
	              PURGATORY_STAMPS_CPUS_DIGITS);
}

static char impl_char(Sha256Impl impl) {
	static const char letter[] = PURGATORY_STAMPS_IMPL_OF_SHA256;

	_Static_assert(sizeof(letter) == _SHA256_IMPL_MAX, "a stamp letter for every Sha256Impl");
	return impl >= 0 && impl < _SHA256_IMPL_MAX ? letter[impl] : PURGATORY_STAMPS_IMPL_GENERIC;
}

/* The chunk layout must be the one this purgatory derives from the sizes:
 * a misread layout would compare digests against the wrong bytes. */
static void check_layout(const struct purgatory_params *p) {
	uint64_t next = 0;

	if (p->chunk_size == 0 || p->chunk_size % SHA256_BLOCK_SIZE != 0)
		refuse(p, "invalid chunk size");
	for (unsigned i = 0; i < p->nr_segments; i++) {
		const struct purgatory_segment *s = &p->segments[i];

		if (s->filesz > s->memsz || s->first_chunk != next ||
		    s->nr_chunks != sha256_mb_chunks(s->filesz, p->chunk_size))
			refuse(p, "segment chunk layout does not match its size");
		next += s->nr_chunks;
	}
	if (next != p->nr_chunks || next > PURGATORY_MAX_CHUNKS)
		refuse(p, "chunk count does not match the segments");
}

/* The segment chunk idx belongs to (the layout was checked). */
static unsigned segment_of_chunk(const struct purgatory_params *p, uint64_t idx) {
	unsigned i = 0;

	while (idx >= p->segments[i].first_chunk + p->segments[i].nr_chunks)
		i++;
	return i;
}

/* [ret_addr, ret_addr + ret_size): the bytes of chunk idx. */
static void chunk_range(const struct purgatory_params *p, uint64_t idx, uint64_t *ret_addr,
                        uint64_t *ret_size) {
	const struct purgatory_segment *s = &p->segments[segment_of_chunk(p, idx)];
	uint64_t off = (idx - s->first_chunk) * p->chunk_size;

	*ret_addr = s->addr + off;
	*ret_size = s->filesz - off < p->chunk_size ? s->filesz - off : p->chunk_size;
}

__attribute__((noreturn)) static void refuse_chunk(const struct purgatory_params *p, uint64_t idx) {
	unsigned i = segment_of_chunk(p, idx);
	struct where w = { .segment = (int)i,
		           .what = "chunk",
		           .chunk = (int64_t)(idx - p->segments[i].first_chunk) };

	chunk_range(p, idx, &w.addr, &w.size);
	refuse_at(p, "SHA-256 mismatch", &w);
}

uint64_t purgatory_work_run(struct purgatory_work *w, bool *ret_hashed) {
	uint64_t slowest = 0;
	bool first = true;

	for (;;) {
		uint64_t t0 = purgatory_arch_counter(), addr, size;
		uint32_t idx;

		if (__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE))
			break;
		idx = __atomic_fetch_add(&w->next, 1, __ATOMIC_ACQ_REL);
		if (idx >= w->p->nr_chunks)
			break;
		chunk_range(w->p, idx, &addr, &size);
		sha256_digest_impl(w->impl, (const void *)(uintptr_t)addr, size, w->digest[idx]);
		if (first)
			__atomic_fetch_add(&w->cpus, 1, __ATOMIC_ACQ_REL);
		first = false;
		__atomic_store_n(&w->done[idx], 1, __ATOMIC_RELEASE);
		if (purgatory_arch_counter() - t0 > slowest)
			slowest = purgatory_arch_counter() - t0;
	}
	if (ret_hashed)
		*ret_hashed = !first;
	return slowest;
}

static struct purgatory_work work;

/*
 * The chunks hashed on every CPU that started (docs/purgatory.md, "Hashing on
 * every CPU"). False when no other CPU started: the caller hashes alone. The
 * boot CPU hashes too, then waits (bounded) for the chunks the others
 * claimed; one not done in time it hashes again itself. It alone compares.
 */
static bool verify_chunks_cpus(struct purgatory_params *p, Sha256Impl impl) {
	uint64_t freq = p->counter_freq ? p->counter_freq : COUNTER_FREQ_UNKNOWN, deadline;
	bool late = false, hashed;

	work = (struct purgatory_work){ .p = p, .impl = impl };
	if (purgatory_arch_cpus_start(p, &work) == 0)
		return false;
	deadline =
	        purgatory_work_run(&work, &hashed) * WORK_GRACE_CHUNKS + freq * WORK_GRACE_SECONDS;
	deadline += purgatory_arch_counter();
	for (uint32_t idx = 0; idx < p->nr_chunks; idx++) {
		uint8_t d[SHA256_DIGEST_SIZE];
		uint64_t addr, size;

		while (!__atomic_load_n(&work.done[idx], __ATOMIC_ACQUIRE) &&
		       purgatory_arch_counter() < deadline)
			;
		if (__atomic_load_n(&work.done[idx], __ATOMIC_ACQUIRE)) {
			if (!digest_equal(work.digest[idx], p->chunk_sha256[idx]))
				refuse_chunk(p, idx);
			continue;
		}
		/* Claimed and not done in time, or never claimed: here, now. */
		__atomic_store_n(&work.stop, 1, __ATOMIC_RELEASE);
		late = true;
		chunk_range(p, idx, &addr, &size);
		sha256_digest_impl(impl, (const void *)(uintptr_t)addr, size, d);
		if (!digest_equal(d, p->chunk_sha256[idx]))
			refuse_chunk(p, idx);
	}
	__atomic_store_n(&work.stop, 1, __ATOMIC_RELEASE);
	if (late)
		p->arch_state |= PURGATORY_ARCH_STATE_SMP_LATE;
	/* Counted by each CPU before its first chunk was marked done. */
	p->cpus_hashed = __atomic_load_n(&work.cpus, __ATOMIC_ACQUIRE) + (late && !hashed);
	p->cpus_left_on = purgatory_arch_cpus_stop(p);
	return true;
}

/* Every segment: the zero-filled rest must be zero, and every chunk of what
 * was loaded from the file must have its recorded digest. */
static void verify_segments(struct purgatory_params *p, Sha256Impl impl) {
	struct sha256_mb_msg msgs[PURGATORY_MAX_SEGMENTS];
	uint8_t d[SHA256_DIGEST_SIZE];
	struct sha256_mb mb;
	uint64_t idx;

	check_layout(p);
	for (unsigned i = 0; i < p->nr_segments; i++) {
		const struct purgatory_segment *s = &p->segments[i];
		const uint8_t *base = (const uint8_t *)(uintptr_t)s->addr;
		uint64_t z = zero_scan(base + s->filesz, s->memsz - s->filesz);

		if (z < s->memsz - s->filesz)
			refuse_at(p, "non-zero byte in the zero padding",
			          &(struct where){ .segment = (int)i,
			                           .what = "byte",
			                           .chunk = -1,
			                           .addr = s->addr + s->filesz + z });
		msgs[i] = (struct sha256_mb_msg){ .data = base, .size = s->filesz };
	}

	if (verify_chunks_cpus(p, impl))
		return;
	p->cpus_hashed = 1;
	sha256_mb_start(&mb, impl, msgs, p->nr_segments, p->chunk_size);
	while (sha256_mb_next(&mb, &idx, d))
		if (!digest_equal(d, p->chunk_sha256[idx]))
			refuse_chunk(p, idx);
}

/* The field this purgatory's architecture writes, at stamps_addr. */
static void write_stamps(const struct purgatory_params *p, char mode, char impl) {
	char *field = (char *)(uintptr_t)p->stamps_addr;

	if (p->stamps_addr == 0 || p->stamps_len != PURGATORY_STAMPS_FIELD_LEN_NATIVE)
		return;
#if defined(__aarch64__)
	purgatory_format_stamps_arm64(&p->stamps, mode, impl, p->counter_freq, p->cpus_hashed,
	                              p->cpus_left_on, field);
#else
	purgatory_format_stamps(&p->stamps, mode, impl, field);
#endif
	purgatory_arch_clean(p->stamps_addr, p->stamps_len);
}

void purgatory_main(struct purgatory_params *p) {
	uint64_t t_entry = purgatory_arch_counter();
	bool verify;
	char mode, impl = PURGATORY_STAMPS_IMPL_NONE;

	/* 1. The contract: a blob and a loader of different versions never mix. */
	if (p->magic != PURGATORY_ABI_MAGIC || p->abi_version != PURGATORY_ABI_VERSION ||
	    p->size != sizeof(*p))
		refuse(p, "parameter block does not match this purgatory");
	if (p->nr_segments > PURGATORY_MAX_SEGMENTS)
		refuse(p, "too many segments listed");
	if (p->mode != PURGATORY_MODE_VERIFIED && p->mode != PURGATORY_MODE_FAST)
		refuse(p, "unknown mode");
	if (p->flags & ~PURGATORY_FLAGS_KNOWN)
		refuse(p, "unknown flags");
	/* The panic path always verifies: there is no way to turn it off. */
	if ((p->flags & PURGATORY_FLAG_PANIC) && p->mode != PURGATORY_MODE_VERIFIED)
		refuse(p, "panic image in fast mode");
	verify = p->mode == PURGATORY_MODE_VERIFIED;
	if (verify && p->nr_segments == 0)
		refuse(p, "verified mode without digests");
	if (p->nr_cpus > PURGATORY_MAX_CPUS)
		refuse(p, "too many CPUs listed");
	p->stamps.tsc_entry = t_entry;
	p->counter_freq = purgatory_arch_counter_freq();
	p->cpus_hashed = 0;
	p->cpus_left_on = 0;

	/* 2. Verification, over an identity map with the caches on (arm64). */
	if (verify) {
		Sha256Impl best;

		purgatory_arch_map(p);
		if (p->sha256_impl_request != 0 &&
		    sha256_impl_supported((Sha256Impl)(p->sha256_impl_request - 1)))
			best = (Sha256Impl)(p->sha256_impl_request - 1);
		else
			best = sha256_mb_calibrate();

		p->sha256_impl = best;
		p->sha256_lanes = sha256_mb_lanes(best);
		impl = impl_char(best);
		verify_segments(p, best);
	}
	p->stamps.tsc_verified = purgatory_arch_counter();
	/* What was read leaves the caches before the next kernel runs with its
	 * MMU off (arm64); the stamps field is cleaned as it is written. */
	if (verify)
		for (unsigned i = 0; i < p->nr_segments; i++)
			purgatory_arch_clean(p->segments[i].addr, p->segments[i].memsz);

	/* 3. Stamps into the new kernel's command line, then hand over. */
	mode = (p->flags & PURGATORY_FLAG_PANIC) ? PURGATORY_STAMPS_MODE_PANIC
	       : verify                          ? PURGATORY_STAMPS_MODE_VERIFIED
	                                         : PURGATORY_STAMPS_MODE_FAST;
	p->stamps.tsc_jump = purgatory_arch_counter();
	write_stamps(p, mode, impl);
}
