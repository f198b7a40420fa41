/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * One time axis across a kexec.
 *
 * CLOCK_MONOTONIC restarts with the new kernel and its CLOCK_REALTIME starts
 * from the RTC, so neither clock alone spans the handoff. The axis used in
 * reports is "ns since the reboot request" (the old kernel's sample in the
 * handoff record is t = 0). Old-kernel moments map to it by their
 * CLOCK_MONOTONIC difference to that sample; new-kernel moments by adding the
 * "new origin": where the new kernel's CLOCK_MONOTONIC zero lies on the axis.
 *
 * The new origin comes from the TSC when it is invariant (constant_tsc +
 * nonstop_tsc, not marked unstable, frequency known, no reset seen), else from
 * CLOCK_REALTIME with a much wider uncertainty (see docs/measurement.md).
 *
 * Pure functions except timebase_sample_now().
 */

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

/* The three clocks read together; tsc == 0 means "no TSC reading". */
typedef struct TimebaseSample {
	uint64_t tsc;
	uint64_t realtime_ns;
	uint64_t monotonic_ns;
	uint64_t skew_ns; /* how long reading the three took (an uncertainty) */
} TimebaseSample;

/* What the kernel says about its TSC. */
typedef struct TimebaseCpu {
	bool constant_tsc;
	bool nonstop_tsc;
	bool tsc_unstable;          /* "Marking TSC unstable", or the clocksource is not tsc */
	uint64_t tsc_khz;           /* 0: unknown */
	uint32_t tsc_khz_ppm;       /* frequency uncertainty; 0: TIMEBASE_DEFAULT_TSC_PPM */
	const char *tsc_khz_source; /* "refined-calibration", "detected", ... (static string) */
} TimebaseCpu;

/* Purgatory's TSC stamps (0: absent). */
typedef struct TimebaseStamps {
	uint64_t entry;
	uint64_t verified;
	uint64_t jump;
	char mode; /* 'v' verified, 'f' fast, 'p' panic; 0: not written */
	char impl; /* 's' SHA-NI, 'a' AVX2, 'x' SSE2, 'g' generic, '-' none (fast); 0: not written */
} TimebaseStamps;

typedef struct TimebaseInput {
	TimebaseSample old_reboot; /* old kernel, at the reboot request (handoff record) */
	TimebaseSample
	        old_earlier;      /* optional (all 0): an earlier old-kernel sample, to see steps */
	TimebaseSample new_start; /* new kernel, at daemon start */
	TimebaseCpu cpu;          /* as seen by the new kernel */
	TimebaseStamps stamps;
	uint64_t realtime_uncertainty_ns; /* 0: TIMEBASE_DEFAULT_REALTIME_UNCERTAINTY_NS */
} TimebaseInput;

#define TIMEBASE_DEFAULT_TSC_PPM                 100
#define TIMEBASE_DEFAULT_REALTIME_UNCERTAINTY_NS UINT64_C(1000000000)
#define TIMEBASE_MAX_HANDOFF_NS                  (UINT64_C(86400) * UINT64_C(1000000000))
#define TIMEBASE_STEP_THRESHOLD_NS               UINT64_C(10000000)

typedef enum TimebaseKind {
	TIMEBASE_TSC,      /* "tsc" */
	TIMEBASE_REALTIME, /* "realtime" */
	TIMEBASE_NONE,     /* "none": the kernels cannot be put on one axis */
	_TIMEBASE_KIND_MAX,
} TimebaseKind;

/* Why the result is what it is; several may apply. */
enum {
	TIMEBASE_TSC_NOT_INVARIANT = 1u << 0,  /* "tsc-not-invariant" */
	TIMEBASE_TSC_UNSTABLE = 1u << 1,       /* "tsc-unstable" */
	TIMEBASE_TSC_NO_FREQUENCY = 1u << 2,   /* "tsc-no-frequency" */
	TIMEBASE_TSC_MISSING = 1u << 3,        /* "tsc-missing" */
	TIMEBASE_TSC_RESET = 1u << 4,          /* "tsc-reset": went backwards, not a wrap */
	TIMEBASE_TSC_WRAPPED = 1u << 5,        /* "tsc-wrapped": crossed 2^64, still usable */
	TIMEBASE_REALTIME_BACKWARDS = 1u << 6, /* "realtime-backwards" */
	TIMEBASE_REALTIME_STEPPED = 1u << 7,   /* "realtime-stepped" (between old samples) */
	TIMEBASE_REALTIME_DISAGREES = 1u << 8, /* "realtime-disagrees" with the TSC */
	TIMEBASE_STAMPS_MISSING = 1u << 9,     /* "stamps-missing" */
	TIMEBASE_STAMPS_UNTRUSTED = 1u << 10,  /* "stamps-untrusted": TSC not usable as timebase */
	TIMEBASE_STAMPS_DISORDERED = 1u << 11, /* "stamps-disordered" */
	_TIMEBASE_FLAG_COUNT = 12,
};

#define TIMEBASE_STAMP_ABSENT INT64_MIN

typedef struct Timebase {
	TimebaseKind kind;
	unsigned flags;
	int64_t new_origin_ns;   /* new kernel's CLOCK_MONOTONIC 0 on the axis */
	uint64_t uncertainty_ns; /* +- on every cross-kexec figure */
	int64_t tsc_gap_ns;      /* new_start - old_reboot by TSC (INT64_MIN: n/a) */
	int64_t realtime_gap_ns; /* new_start - old_reboot by CLOCK_REALTIME */
	bool stamps_trusted;
	int64_t stamp_ns[3]; /* entry, verified, jump on the axis (or TIMEBASE_STAMP_ABSENT) */
} Timebase;

const char *timebase_kind_to_string(TimebaseKind k);
const char *timebase_flag_to_string(unsigned flag);

/* -EINVAL when the samples needed are missing (no new_start or old_reboot). */
int timebase_compute(const TimebaseInput *in, Timebase *ret);

/*
 * ns from TSC value `from` to `to` at khz. The difference is taken modulo 2^64, so a
 * counter that crossed 2^64 still gives the right interval (*ret_wrapped, may be
 * NULL). A result longer than any handoff means the counter went backwards instead
 * (reset, or a hypervisor jump): -ERANGE; -EINVAL without a frequency.
 */
int timebase_tsc_interval_ns(uint64_t from, uint64_t to, uint64_t khz, int64_t *ret_ns,
                             bool *ret_wrapped);

/* Axis positions (ns since the reboot request). */
int64_t timebase_old_to_axis(const TimebaseInput *in, uint64_t old_monotonic_ns);
int64_t timebase_new_to_axis(const Timebase *tb, uint64_t new_monotonic_ns);

/* A VM's downtime across the kexec: from old_monotonic_ns (old kernel: the probe's
 * vcpu_last_ran, else the pause mark) to new_monotonic_ns (new kernel: the probe's
 * vcpu_first_ran, else the resume mark). Its uncertainty is tb->uncertainty_ns.
 * -EINVAL when either moment is 0 (not observed); -EDOM with timebase "none";
 * -ERANGE when the result is negative beyond the uncertainty (inconsistent input). */
int timebase_downtime(const Timebase *tb, const TimebaseInput *in, uint64_t old_monotonic_ns,
                      uint64_t new_monotonic_ns, int64_t *ret_ns);

/* {"timebase","uncertainty_ns","new_origin_ns","flags":[...],"tsc_gap_ns",
 *  "realtime_gap_ns","stamps":{...},"phases":[...]} */
int timebase_to_json(const Timebase *tb, const TimebaseInput *in, struct json_object **ret);

/* Reads "flags" of /proc/cpuinfo and the TSC lines of kmsg (either may be NULL). */
int timebase_cpu_parse(const char *cpuinfo, const char *kmsg, TimebaseCpu *ret);

/* Finds purgatory's "upgraded.stamps=E,V,J,M,I" in a kernel command line, in the
 * one format purgatory/purgatory-abi.h defines (PURGATORY_STAMPS_*): three TSC
 * values of exactly 16 lowercase hex digits (entry, after verification, before
 * the jump), the mode ('v', 'f', 'p') and the SHA-256 implementation ('s', 'a',
 * 'x', 'g', '-' for none in fast mode). An all-zero TSC is an absent stamp; the
 * loader's untouched placeholder gives 0 with every stamp absent and mode 0.
 * -ENOENT without the parameter, -EBADMSG when it is malformed (*ret untouched). */
int timebase_stamps_from_cmdline(const char *cmdline, TimebaseStamps *ret);

/* "verified", "fast", "panic"; NULL for anything else. */
const char *timebase_stamps_mode_to_string(char mode);
/* "sha-ni", "avx2", "sse2", "generic", "none"; NULL for anything else. */
const char *timebase_stamps_impl_to_string(char impl);

/* The report's purgatory section: {"mode","implementation","verified_bytes",
 * "verify_ns","verify_time"}. verify_ns is (V - E) TSC ticks at cpu->tsc_khz, null
 * without both stamps or a frequency; verify_time says "measured" (invariant TSC
 * of known rate), "estimated" (the rate is uncertain: no constant/nonstop TSC,
 * or marked unstable, as under QEMU TCG) or "unknown". verified_bytes is what
 * the loader listed for purgatory to hash (0 in fast mode). */
int timebase_purgatory_to_json(const TimebaseStamps *st, const TimebaseCpu *cpu,
                               uint64_t verified_bytes, struct json_object **ret);

/* Reads TSC, CLOCK_REALTIME and CLOCK_MONOTONIC together (not pure). */
int timebase_sample_now(TimebaseSample *ret);
