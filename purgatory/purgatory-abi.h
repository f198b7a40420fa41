/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The contract between the loader and purgatory: ONE struct, filled in by the
 * loader at stage time inside the purgatory segment (at PURGATORY_PARAMS_OFFSET
 * from the start of the blob) and read by purgatory between the kernels.
 * Fixed-width types and explicit padding only, so both sides (and any future
 * 32-bit tool reading a dump) agree byte for byte; the asserts below pin it.
 *
 * Bump PURGATORY_ABI_VERSION on any change: purgatory refuses (resets) when the
 * magic or version differ, rather than boot with a misread contract.
 */

/* The blob starts with a jump over the parameters (entry at offset 0). */
#define PURGATORY_PARAMS_OFFSET 0x40

/* Purgatory's own stack (in the blob): the AVX2 multi-buffer path keeps the
 * schedules of 16 lanes on it (about 14 KiB deep at most, -fstack-usage). */
#define PURGATORY_STACK_SIZE 32768

/* entry.S reads the entry registers at these offsets (asserted below). */
#define PURGATORY_PARAMS_ENTRY_RIP 16
#define PURGATORY_PARAMS_ENTRY_RSI 24

#ifndef __ASSEMBLER__
#include <stddef.h>
#include <stdint.h>

#define PURGATORY_ABI_MAGIC   UINT64_C(0x3147525055504755) /* "UGPUPRG1" little-endian */
#define PURGATORY_ABI_VERSION 2

/* kernel, initrd, boot_params + cmdline, and room to spare. */
#define PURGATORY_MAX_SEGMENTS   16
/* Chunk digests over all segments; the loader picks the chunk size so that
 * the payload fits (a power of two from PURGATORY_CHUNK_SIZE_MIN up). */
#define PURGATORY_MAX_CHUNKS     512
#define PURGATORY_CHUNK_SIZE_MIN (UINT64_C(256) << 10)

/* Verified: hash every listed segment before jumping. Fast: do not. */
#define PURGATORY_MODE_FAST     0
#define PURGATORY_MODE_VERIFIED 1

/* A crash (panic) image: the loader always sets PURGATORY_MODE_VERIFIED too,
 * and purgatory refuses to run a panic image in fast mode. */
#define PURGATORY_FLAG_PANIC (UINT32_C(1) << 0)

/* The port of the serial console for the mismatch message; 0: none. */
#define PURGATORY_CONSOLE_COM1 0x3f8

/*
 * The cross-kexec stamps. The loader puts
 *   upgraded.stamps=<PURGATORY_STAMPS_FIELD_LEN characters of template>
 * in the new kernel's command line and records where the field starts;
 * purgatory overwrites the field (never the key, never beyond it) with
 *   EEEEEEEEEEEEEEEE,VVVVVVVVVVVVVVVV,JJJJJJJJJJJJJJJJ,M,I
 * TSC at entry, after verification, just before the jump (16 hex digits each),
 * the mode ('v' verified, 'f' fast, 'p' panic) and the SHA-256 implementation
 * ('s' SHA-NI 2 lanes, 'a' AVX2 8 lanes, 'g' generic 1 lane, '-' none in fast
 * mode).
 */
#define PURGATORY_STAMPS_KEY           "upgraded.stamps="
#define PURGATORY_STAMPS_FIELD_LEN     54
#define PURGATORY_STAMPS_TEMPLATE      "0000000000000000,0000000000000000,0000000000000000,-,-"
/* The layout, for the writer (purgatory) and every reader (the daemon's
 * timebase_stamps_from_cmdline()): three TSC values, then mode, then impl. */
#define PURGATORY_STAMPS_NR_TSC        3
#define PURGATORY_STAMPS_TSC_DIGITS    16 /* lowercase hex, most significant first */
#define PURGATORY_STAMPS_SEPARATOR     ','
#define PURGATORY_STAMPS_MODE_POS      ((PURGATORY_STAMPS_TSC_DIGITS + 1) * PURGATORY_STAMPS_NR_TSC)
#define PURGATORY_STAMPS_IMPL_POS      (PURGATORY_STAMPS_MODE_POS + 2)
#define PURGATORY_STAMPS_MODE_VERIFIED 'v'
#define PURGATORY_STAMPS_MODE_FAST     'f'
#define PURGATORY_STAMPS_MODE_PANIC    'p' /* a crash image: always verified */
#define PURGATORY_STAMPS_IMPL_SHANI    's'
#define PURGATORY_STAMPS_IMPL_AVX2     'a'
#define PURGATORY_STAMPS_IMPL_GENERIC  'g'
#define PURGATORY_STAMPS_IMPL_SSE2     'x' /* the xmm-schedule assembly */
#define PURGATORY_STAMPS_IMPL_NONE     '-' /* fast mode: nothing hashed */
/* The letter of each Sha256Impl (sha256.h), in the enum's order: an array initializer. */
#define PURGATORY_STAMPS_IMPL_OF_SHA256                                         \
	{                                                                       \
		PURGATORY_STAMPS_IMPL_GENERIC, PURGATORY_STAMPS_IMPL_AVX2,      \
		        PURGATORY_STAMPS_IMPL_SHANI, PURGATORY_STAMPS_IMPL_SSE2 \
	}

/*
 * One segment as purgatory checks it: [addr, addr + filesz) is what was loaded
 * from the file, cut into chunks of chunk_size bytes (the last one shorter),
 * each with its own SHA-256 in chunk_sha256[first_chunk ...]; [addr + filesz,
 * addr + memsz) is the zero-filled rest (the kernel's init_size beyond the
 * file, page rounding), which purgatory checks for zeros instead of hashing.
 */
struct purgatory_segment {
	uint64_t addr;   /* physical address */
	uint64_t filesz; /* bytes hashed, in chunks */
	uint64_t memsz;  /* >= filesz; the rest must be zero */
	uint32_t first_chunk;
	uint32_t nr_chunks; /* ceil(filesz / chunk_size), 1 when filesz is 0 */
};

struct purgatory_stamps {
	uint64_t tsc_entry;    /* first instruction of purgatory's C code */
	uint64_t tsc_verified; /* after the digests were checked (== entry in fast mode) */
	uint64_t tsc_jump;     /* just before the jump to the kernel */
};

struct purgatory_params {
	uint64_t magic;       /* PURGATORY_ABI_MAGIC */
	uint32_t abi_version; /* PURGATORY_ABI_VERSION */
	uint32_t size;        /* sizeof(struct purgatory_params) */

	/* Entry state for the new kernel's 64-bit entry point. */
	uint64_t entry_rip; /* kernel load address + 0x200 */
	uint64_t entry_rsi; /* physical address of boot_params (the zero page) */

	uint32_t mode;  /* PURGATORY_MODE_* */
	uint32_t flags; /* PURGATORY_FLAG_* */

	/* Where the stamps field (after PURGATORY_STAMPS_KEY) sits in the cmdline
	 * segment; 0 when the command line carries no placeholder. */
	uint64_t stamps_addr;
	uint32_t stamps_len; /* PURGATORY_STAMPS_FIELD_LEN */

	uint16_t console_port; /* 0: no serial console */
	uint16_t nr_segments;

	/* Written by purgatory as it runs (also readable from a crash dump). */
	struct purgatory_stamps stamps;
	uint32_t sha256_impl; /* Sha256Impl purgatory picked */
	/* Sha256Impl + 1: the implementation the loader timed fastest on the
	 * staged bytes (loader_sha256_pick()), used when the CPU supports it;
	 * 0: purgatory measures one itself (sha256_mb_calibrate()). */
	uint32_t sha256_impl_request;

	uint64_t chunk_size;   /* a multiple of 64, >= PURGATORY_CHUNK_SIZE_MIN */
	uint32_t nr_chunks;    /* chunk digests used, over all segments */
	uint32_t sha256_lanes; /* written by purgatory: lanes its implementation ran */

	struct purgatory_segment segments[PURGATORY_MAX_SEGMENTS];
	uint8_t chunk_sha256[PURGATORY_MAX_CHUNKS][32];
};

_Static_assert(sizeof(struct purgatory_segment) == 32, "purgatory_segment layout");
_Static_assert(sizeof(struct purgatory_stamps) == 24, "purgatory_stamps layout");
_Static_assert(offsetof(struct purgatory_params, entry_rip) == 16, "entry_rip offset");
_Static_assert(offsetof(struct purgatory_params, entry_rsi) == 24, "entry_rsi offset");
_Static_assert(offsetof(struct purgatory_params, mode) == 32, "mode offset");
_Static_assert(offsetof(struct purgatory_params, stamps_addr) == 40, "stamps_addr offset");
_Static_assert(offsetof(struct purgatory_params, console_port) == 52, "console_port offset");
_Static_assert(offsetof(struct purgatory_params, stamps) == 56, "stamps offset");
_Static_assert(offsetof(struct purgatory_params, sha256_impl) == 80, "sha256_impl offset");
_Static_assert(offsetof(struct purgatory_params, sha256_impl_request) == 84,
               "sha256_impl_request offset");
_Static_assert(offsetof(struct purgatory_params, chunk_size) == 88, "chunk_size offset");
_Static_assert(offsetof(struct purgatory_params, nr_chunks) == 96, "nr_chunks offset");
_Static_assert(offsetof(struct purgatory_params, segments) == 104, "segments offset");
_Static_assert(offsetof(struct purgatory_params, chunk_sha256) == 104 + 32 * PURGATORY_MAX_SEGMENTS,
               "chunk_sha256 offset");
_Static_assert(sizeof(struct purgatory_params) ==
                       104 + 32 * PURGATORY_MAX_SEGMENTS + 32 * PURGATORY_MAX_CHUNKS,
               "purgatory_params size");
_Static_assert(PURGATORY_CHUNK_SIZE_MIN % 64 == 0, "chunks are whole SHA-256 blocks");
_Static_assert(sizeof(PURGATORY_STAMPS_TEMPLATE) - 1 == PURGATORY_STAMPS_FIELD_LEN,
               "stamps template length");
_Static_assert(PURGATORY_STAMPS_IMPL_POS + 1 == PURGATORY_STAMPS_FIELD_LEN, "stamps layout");
_Static_assert(offsetof(struct purgatory_params, entry_rip) == PURGATORY_PARAMS_ENTRY_RIP,
               "entry.S offset of entry_rip");
_Static_assert(offsetof(struct purgatory_params, entry_rsi) == PURGATORY_PARAMS_ENTRY_RSI,
               "entry.S offset of entry_rsi");
#endif /* __ASSEMBLER__ */
