/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The contract between the loader and purgatory: ONE struct, filled in by the
 * loader at stage time inside the purgatory segment (at PURGATORY_PARAMS_OFFSET
 * from the start of the blob) and read by purgatory between the kernels. The
 * same struct on x86_64 and arm64: the entry fields have a name per
 * architecture (anonymous unions), the console and the reset say which kind
 * they are, and the stamps' counter is the TSC on x86_64 and the generic
 * timer's virtual count (CNTVCT_EL0) on arm64.
 * Fixed-width types and explicit padding only, so both sides (and any future
 * 32-bit tool reading a dump) agree byte for byte; the asserts below pin it.
 *
 * Bump PURGATORY_ABI_VERSION on any change: purgatory refuses (resets) when the
 * magic or version differ, rather than boot with a misread contract.
 */

/* The blob starts with a jump over the parameters (entry at offset 0), on
 * both architectures. */
#define PURGATORY_PARAMS_OFFSET 0x40

/* Purgatory's own stack (in the blob): the AVX2 multi-buffer path keeps the
 * schedules of 16 lanes on it (about 14 KiB deep at most, -fstack-usage). */
#define PURGATORY_STACK_SIZE 32768

/* entry.S reads the entry registers at these offsets (asserted below):
 * x86_64 rip and rsi, arm64 the kernel's entry and x0. */
#define PURGATORY_PARAMS_ENTRY_RIP 16
#define PURGATORY_PARAMS_ENTRY_RSI 24
#define PURGATORY_PARAMS_ENTRY_PC  PURGATORY_PARAMS_ENTRY_RIP
#define PURGATORY_PARAMS_ENTRY_X0  PURGATORY_PARAMS_ENTRY_RSI
/* arm64: purgatory_params.flags, read by entry (asserted below). */
#define PURGATORY_PARAMS_FLAGS     36

#ifndef __ASSEMBLER__
#include <stddef.h>
#include <stdint.h>

#define PURGATORY_ABI_MAGIC   UINT64_C(0x3147525055504755) /* "UGPUPRG1" little-endian */
#define PURGATORY_ABI_VERSION 4

/* kernel, initrd, boot_params + cmdline (x86_64) or the DTB (arm64), and room
 * to spare. */
#define PURGATORY_MAX_SEGMENTS   16
/* Chunk digests over all segments; the loader picks the chunk size so that
 * the payload fits (a power of two from PURGATORY_CHUNK_SIZE_MIN up). */
#define PURGATORY_MAX_CHUNKS     512
#define PURGATORY_CHUNK_SIZE_MIN (UINT64_C(256) << 10)
/* arm64: the CPUs that may hash at once (the boot CPU among them); a machine
 * with more hashes on the first PURGATORY_MAX_CPUS its DT lists. */
#define PURGATORY_MAX_CPUS       64

/* Verified: hash every listed segment before jumping. Fast: do not. */
#define PURGATORY_MODE_FAST     0
#define PURGATORY_MODE_VERIFIED 1

/* A crash (panic) image: the loader always sets PURGATORY_MODE_VERIFIED too,
 * and purgatory refuses to run a panic image in fast mode. */
#define PURGATORY_FLAG_PANIC   (UINT32_C(1) << 0)
/* Measurements only (`make bench`): arm64 purgatory verifies with the MMU and
 * the caches off, as kexec-tools' does, so the MMU's gain is measured. The
 * digests are checked all the same. The loader never sets it. */
#define PURGATORY_FLAG_MMU_OFF (UINT32_C(1) << 1)
#define PURGATORY_FLAGS_KNOWN  (PURGATORY_FLAG_PANIC | PURGATORY_FLAG_MMU_OFF)

/* x86_64: the I/O port of the 16550 serial console for the mismatch
 * message (console_kind PURGATORY_CONSOLE_PORT); 0: none. */
#define PURGATORY_CONSOLE_COM1 0x3f8

/* console_kind: which UART the mismatch message goes to. */
#define PURGATORY_CONSOLE_PORT  0 /* x86_64: a 16550 at console_port (0: none); arm64: none */
#define PURGATORY_CONSOLE_PL011 1 /* arm64: an ARM PL011 at the MMIO address console_base */
#define PURGATORY_CONSOLE_NS16550_32 \
	2                             /* a 16550 at console_base, registers 4 bytes apart,
                                         accessed 32 bits wide (DT reg-shift 2, reg-io-width 4) */
#define PURGATORY_CONSOLE_NS16550_8 3 /* a 16550 at console_base, registers 1 byte apart */

/* reset_method: how purgatory resets the machine after a refusal. */
#define PURGATORY_RESET_ARCH \
	0                          /* x86_64: keyboard controller, 0xcf9, triple fault;
                                      arm64: PSCI, SMC at EL2, HVC at EL1 */
#define PURGATORY_RESET_PSCI_SMC 1 /* arm64: PSCI SYSTEM_RESET by SMC (DT /psci method "smc") */
#define PURGATORY_RESET_PSCI_HVC 2 /* arm64: PSCI SYSTEM_RESET by HVC (DT /psci method "hvc") */

/* psci_conduit (arm64, since version 4): how purgatory calls PSCI 0.2's
 * CPU_ON, CPU_OFF and AFFINITY_INFO to hash on the other CPUs (DT /psci with
 * compatible "arm,psci-0.2" or later and its method). NONE: one CPU. At EL2,
 * SMC whatever it says (an HVC would trap to purgatory itself). */
#define PURGATORY_PSCI_NONE 0
#define PURGATORY_PSCI_SMC  1
#define PURGATORY_PSCI_HVC  2

/* arch_state, written by arm64 purgatory as it runs (readable in a crash dump). */
#define PURGATORY_ARCH_STATE_EL_MASK 0x3u      /* the exception level it was entered at */
#define PURGATORY_ARCH_STATE_E2H     (1u << 2) /* entered at EL2 with HCR_EL2.E2H set (VHE) */
#define PURGATORY_ARCH_STATE_MMU     (1u << 3) /* verified with the MMU and caches on */
#define PURGATORY_ARCH_STATE_NO_MMU \
	(1u << 4) /* the map did not fit or 4 KiB pages are missing:
                                                    verified with the MMU off */
#define PURGATORY_ARCH_STATE_SMP_LATE \
	(1u << 5) /* a secondary CPU did not finish a chunk it claimed in time:
                     the boot CPU hashed it again itself */

/*
 * The cross-kexec stamps. The loader puts
 *   upgraded.stamps=<PURGATORY_STAMPS_FIELD_LEN characters of template>
 * in the new kernel's command line and records where the field starts;
 * purgatory overwrites the field (never the key, never beyond it) with
 *   EEEEEEEEEEEEEEEE,VVVVVVVVVVVVVVVV,JJJJJJJJJJJJJJJJ,M,I
 * the counter at entry, after verification, just before the jump (16 hex
 * digits each), the mode ('v' verified, 'f' fast, 'p' panic) and the SHA-256
 * implementation ('s' SHA-NI 2 lanes, 'a' AVX2 8 lanes, 'g' generic 1 lane,
 * 'c' ARMv8 SHA-2 instructions 1 lane, '-' none in fast mode).
 *
 * x86_64: the counter is the TSC; its rate comes from the booted kernel.
 * arm64: the command line is the DTB's /chosen/bootargs (the loader records
 * the field's physical address inside the DTB segment), the counter is
 * CNTVCT_EL0, and the field is PURGATORY_STAMPS_FIELD_LEN_ARM64 long: the x86
 * layout, then ",FFFFFFFF,CC,LL": CNTFRQ_EL0 in Hz (8 hex digits), the CPUs
 * that hashed (2 hex digits: 0 in fast mode, 1 when the boot CPU hashed
 * alone) and the secondary CPUs purgatory started that were not off yet when
 * it entered the kernel (2 hex digits, normally 0: the new kernel lacks
 * them), so a reader parses the first PURGATORY_STAMPS_FIELD_LEN characters
 * the same way on both.
 * Why CNTVCT_EL0: EL1 and EL2 can both read it (CNTPCT_EL0 may trap at EL1
 * under a hypervisor), it is what the next kernel's clocksource and
 * sched_clock read when it runs at EL1, and at EL2 Linux zeroes CNTVOFF_EL2,
 * so there it equals the physical count a VHE kernel reads; user space reads
 * it too (CNTKCTL_EL1.EL0VCTEN), so the daemon can put "now" on the same scale.
 */
#define PURGATORY_STAMPS_KEY             "upgraded.stamps="
#define PURGATORY_STAMPS_FIELD_LEN       54
#define PURGATORY_STAMPS_TEMPLATE        "0000000000000000,0000000000000000,0000000000000000,-,-"
#define PURGATORY_STAMPS_FIELD_LEN_ARM64 69
#define PURGATORY_STAMPS_TEMPLATE_ARM64  PURGATORY_STAMPS_TEMPLATE ",00000000,00,00"
#define PURGATORY_STAMPS_FREQ_POS        (PURGATORY_STAMPS_FIELD_LEN + 1)
#define PURGATORY_STAMPS_FREQ_DIGITS     8 /* CNTFRQ_EL0 in Hz, lowercase hex */
#define PURGATORY_STAMPS_CPUS_DIGITS     2 /* CPUs that hashed, then those left on: lowercase hex */
#define PURGATORY_STAMPS_CPUS_POS        (PURGATORY_STAMPS_FREQ_POS + 9)
#define PURGATORY_STAMPS_LEFT_ON_POS     (PURGATORY_STAMPS_CPUS_POS + 3)
/* The field this architecture's purgatory writes. */
#if defined(__aarch64__)
#define PURGATORY_STAMPS_FIELD_LEN_NATIVE PURGATORY_STAMPS_FIELD_LEN_ARM64
#define PURGATORY_STAMPS_TEMPLATE_NATIVE  PURGATORY_STAMPS_TEMPLATE_ARM64
#else
#define PURGATORY_STAMPS_FIELD_LEN_NATIVE PURGATORY_STAMPS_FIELD_LEN
#define PURGATORY_STAMPS_TEMPLATE_NATIVE  PURGATORY_STAMPS_TEMPLATE
#endif
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
#define PURGATORY_STAMPS_IMPL_ARMV8_CE 'c' /* the ARMv8 SHA-2 instructions (sha256h...) */
#define PURGATORY_STAMPS_IMPL_NONE     '-' /* fast mode: nothing hashed */
/* The letter of each Sha256Impl (sha256.h), in the enum's order: an array initializer. */
#define PURGATORY_STAMPS_IMPL_OF_SHA256                                          \
	{                                                                        \
		PURGATORY_STAMPS_IMPL_GENERIC, PURGATORY_STAMPS_IMPL_AVX2,       \
		        PURGATORY_STAMPS_IMPL_SHANI, PURGATORY_STAMPS_IMPL_SSE2, \
		        PURGATORY_STAMPS_IMPL_ARMV8_CE                           \
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

/* Counter values: the TSC on x86_64, CNTVCT_EL0 on arm64. */
struct purgatory_stamps {
	uint64_t tsc_entry;    /* first instruction of purgatory's C code */
	uint64_t tsc_verified; /* after the digests were checked (== entry in fast mode) */
	uint64_t tsc_jump;     /* just before the jump to the kernel */
};

struct purgatory_params {
	uint64_t magic;       /* PURGATORY_ABI_MAGIC */
	uint32_t abi_version; /* PURGATORY_ABI_VERSION */
	uint32_t size;        /* sizeof(struct purgatory_params) */

	/* Entry state for the new kernel. */
	union {
		uint64_t entry_rip; /* x86_64: kernel load address + 0x200 */
		uint64_t entry_pc;  /* arm64: the Image's load address (its first byte) */
	};
	union {
		uint64_t entry_rsi; /* x86_64: physical address of boot_params (the zero page) */
		uint64_t entry_x0;  /* arm64: physical address of the DTB; x1..x3 are 0 */
	};

	uint32_t mode;  /* PURGATORY_MODE_* */
	uint32_t flags; /* PURGATORY_FLAG_* */

	/* Where the stamps field (after PURGATORY_STAMPS_KEY) sits in the cmdline
	 * segment; 0 when the command line carries no placeholder. */
	uint64_t stamps_addr;
	uint32_t stamps_len; /* PURGATORY_STAMPS_FIELD_LEN */

	uint16_t console_port; /* x86_64, PURGATORY_CONSOLE_PORT: 0 no serial console */
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

	/* Since version 3: what x86's fixed ports and CPU state do not say. */
	uint64_t console_base; /* the UART's MMIO physical address (kinds other than PORT) */
	uint32_t console_kind; /* PURGATORY_CONSOLE_* */
	uint32_t reset_method; /* PURGATORY_RESET_* */
	uint32_t counter_freq; /* written by arm64 purgatory: CNTFRQ_EL0 (Hz); 0 on x86_64 */
	uint32_t arch_state;   /* written by arm64 purgatory: PURGATORY_ARCH_STATE_* */

	struct purgatory_segment segments[PURGATORY_MAX_SEGMENTS];
	uint8_t chunk_sha256[PURGATORY_MAX_CHUNKS][32];

	/* Since version 4 (arm64): hashing on every CPU (docs/purgatory.md). */
	uint32_t psci_conduit; /* PURGATORY_PSCI_* */
	uint32_t nr_cpus;      /* cpu_mpidr[] entries, the boot CPU's among them */
	uint32_t cpus_hashed;  /* written: CPUs that hashed a chunk (0 in fast mode) */
	uint32_t cpus_left_on; /* written: secondaries started and not off at the jump */
	uint64_t cpu_mpidr[PURGATORY_MAX_CPUS]; /* MPIDR affinity (Aff3..Aff0) of each CPU */
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
_Static_assert(offsetof(struct purgatory_params, sha256_lanes) == 100, "sha256_lanes offset");
_Static_assert(offsetof(struct purgatory_params, console_base) == 104, "console_base offset");
_Static_assert(offsetof(struct purgatory_params, console_kind) == 112, "console_kind offset");
_Static_assert(offsetof(struct purgatory_params, reset_method) == 116, "reset_method offset");
_Static_assert(offsetof(struct purgatory_params, counter_freq) == 120, "counter_freq offset");
_Static_assert(offsetof(struct purgatory_params, arch_state) == 124, "arch_state offset");
_Static_assert(offsetof(struct purgatory_params, segments) == 128, "segments offset");
_Static_assert(offsetof(struct purgatory_params, chunk_sha256) == 128 + 32 * PURGATORY_MAX_SEGMENTS,
               "chunk_sha256 offset");
#define PURGATORY_PARAMS_V4_OFFSET (128 + 32 * PURGATORY_MAX_SEGMENTS + 32 * PURGATORY_MAX_CHUNKS)
_Static_assert(offsetof(struct purgatory_params, psci_conduit) == PURGATORY_PARAMS_V4_OFFSET,
               "psci_conduit offset");
_Static_assert(offsetof(struct purgatory_params, cpu_mpidr) == PURGATORY_PARAMS_V4_OFFSET + 16,
               "cpu_mpidr offset");
_Static_assert(sizeof(struct purgatory_params) ==
                       PURGATORY_PARAMS_V4_OFFSET + 16 + 8 * PURGATORY_MAX_CPUS,
               "purgatory_params size");
_Static_assert(offsetof(struct purgatory_params, entry_pc) == PURGATORY_PARAMS_ENTRY_PC,
               "arm64 entry offset of entry_pc");
_Static_assert(offsetof(struct purgatory_params, entry_x0) == PURGATORY_PARAMS_ENTRY_X0,
               "arm64 entry offset of entry_x0");
_Static_assert(offsetof(struct purgatory_params, flags) == PURGATORY_PARAMS_FLAGS,
               "arm64 entry offset of flags");
_Static_assert(PURGATORY_CHUNK_SIZE_MIN % 64 == 0, "chunks are whole SHA-256 blocks");
_Static_assert(sizeof(PURGATORY_STAMPS_TEMPLATE) - 1 == PURGATORY_STAMPS_FIELD_LEN,
               "stamps template length");
_Static_assert(PURGATORY_STAMPS_IMPL_POS + 1 == PURGATORY_STAMPS_FIELD_LEN, "stamps layout");
_Static_assert(sizeof(PURGATORY_STAMPS_TEMPLATE_ARM64) - 1 == PURGATORY_STAMPS_FIELD_LEN_ARM64,
               "arm64 stamps template length");
_Static_assert(PURGATORY_STAMPS_CPUS_POS ==
                       PURGATORY_STAMPS_FREQ_POS + PURGATORY_STAMPS_FREQ_DIGITS + 1,
               "arm64 stamps: CPUs after the frequency");
_Static_assert(PURGATORY_STAMPS_LEFT_ON_POS ==
                       PURGATORY_STAMPS_CPUS_POS + PURGATORY_STAMPS_CPUS_DIGITS + 1,
               "arm64 stamps: CPUs left on last");
_Static_assert(PURGATORY_STAMPS_LEFT_ON_POS + PURGATORY_STAMPS_CPUS_DIGITS ==
                       PURGATORY_STAMPS_FIELD_LEN_ARM64,
               "arm64 stamps layout");
_Static_assert(PURGATORY_MAX_CPUS < 256, "CPU counts fit the stamps' two digits");
_Static_assert(offsetof(struct purgatory_params, entry_rip) == PURGATORY_PARAMS_ENTRY_RIP,
               "entry.S offset of entry_rip");
_Static_assert(offsetof(struct purgatory_params, entry_rsi) == PURGATORY_PARAMS_ENTRY_RSI,
               "entry.S offset of entry_rsi");
#endif /* __ASSEMBLER__ */
