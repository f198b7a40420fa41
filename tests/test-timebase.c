/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>
#include <string.h>

#include "macros.h"
#include "timebase.h"

#define MS  INT64_C(1000000)
#define SEC INT64_C(1000000000)

/* A 2 GHz invariant TSC; the reboot request at old monotonic 100 s, realtime
 * 1.7e9 s; the new kernel's daemon starts 5 s later with its monotonic at 2 s. */
static TimebaseInput invariant_input(void) {
	const uint64_t khz = 2000000, tsc0 = UINT64_C(1000000000000);
	TimebaseInput in = {
		.old_reboot = { .tsc = tsc0,
		                .realtime_ns = UINT64_C(1700000000) * SEC,
		                .monotonic_ns = 100 * SEC,
		                .skew_ns = 100 },
		.new_start = { .tsc = tsc0 + 5 * UINT64_C(2000000000),
		               .realtime_ns = UINT64_C(1700000005) * SEC,
		               .monotonic_ns = 2 * SEC,
		               .skew_ns = 100 },
		.cpu = { .constant_tsc = true,
		         .nonstop_tsc = true,
		         .tsc_khz = khz,
		         .tsc_khz_ppm = 100,
		         .tsc_khz_source = "refined-calibration" },
		.stamps = { .entry = tsc0 + 2 * UINT64_C(1000000000),    /* 1 s */
		            .verified = tsc0 + 2 * UINT64_C(1300000000), /* 1.3 s */
		            .jump = tsc0 + 2 * UINT64_C(1310000000) },   /* 1.31 s */
	};
	return in;
}

/* The lab: TCG, no constant_tsc/nonstop_tsc, the kernel marked the TSC unstable. */
static TimebaseInput lab_input(void) {
	TimebaseInput in = invariant_input();

	in.cpu.constant_tsc = false;
	in.cpu.nonstop_tsc = false;
	in.cpu.tsc_unstable = true;
	return in;
}

static const char *phase_name(struct json_object *phases, size_t i) {
	struct json_object *p = json_object_array_get_idx(phases, i), *n;

	assert_non_null(p);
	assert_true(json_object_object_get_ex(p, "name", &n));
	return json_object_get_string(n);
}

static int64_t phase_field(struct json_object *phases, size_t i, const char *field) {
	struct json_object *p = json_object_array_get_idx(phases, i), *n;

	assert_true(json_object_object_get_ex(p, field, &n));
	return json_object_get_int64(n);
}

static void test_timebase_invariant_tsc(void **state) {
	TimebaseInput in = invariant_input();
	struct json_object *j, *v, *phases;
	Timebase tb;

	assert_int_equal(timebase_compute(&in, &tb), 0);
	assert_int_equal(tb.kind, TIMEBASE_TSC);
	assert_int_equal(tb.flags, 0);
	assert_int_equal(tb.tsc_gap_ns, 5 * SEC);
	assert_int_equal(tb.new_origin_ns, 3 * SEC);
	/* 100 ppm of 5 s = 500 us, + both sampling skews + 1 us rounding */
	assert_int_equal(tb.uncertainty_ns, 500000 + 200 + 1000);
	assert_true(tb.stamps_trusted);
	assert_int_equal(tb.stamp_ns[0], 1 * SEC);
	assert_int_equal(tb.stamp_ns[1], 1300 * MS);
	assert_int_equal(tb.stamp_ns[2], 1310 * MS);

	assert_int_equal(timebase_old_to_axis(&in, 99 * SEC), -1 * SEC);
	assert_int_equal(timebase_new_to_axis(&tb, 2 * SEC + 250 * MS), 5250 * MS);

	assert_int_equal(timebase_to_json(&tb, &in, &j), 0);
	assert_true(json_object_object_get_ex(j, "timebase", &v));
	assert_string_equal(json_object_get_string(v), "tsc");
	assert_true(json_object_object_get_ex(j, "phases", &phases));
	assert_int_equal(json_object_array_length(phases), 5);
	assert_string_equal(phase_name(phases, 0), "shutdown");
	assert_int_equal(phase_field(phases, 0, "duration_ns"), 1 * SEC);
	assert_string_equal(phase_name(phases, 1), "verify");
	assert_int_equal(phase_field(phases, 1, "duration_ns"), 300 * MS);
	assert_string_equal(phase_name(phases, 2), "purgatory");
	assert_int_equal(phase_field(phases, 2, "duration_ns"), 10 * MS);
	assert_string_equal(phase_name(phases, 3), "early-boot");
	assert_int_equal(phase_field(phases, 3, "end_ns"), 3 * SEC);
	assert_string_equal(phase_name(phases, 4), "boot-to-daemon");
	assert_int_equal(phase_field(phases, 4, "end_ns"), 5 * SEC);
	json_object_put(j);
}

static void test_timebase_lab_falls_back_to_realtime(void **state) {
	TimebaseInput in = lab_input();
	struct json_object *j, *v, *phases, *stamps;
	Timebase tb;

	assert_int_equal(timebase_compute(&in, &tb), 0);
	assert_int_equal(tb.kind, TIMEBASE_REALTIME);
	assert_true(tb.flags & TIMEBASE_TSC_NOT_INVARIANT);
	assert_true(tb.flags & TIMEBASE_TSC_UNSTABLE);
	assert_true(tb.flags & TIMEBASE_STAMPS_UNTRUSTED);
	assert_false(tb.stamps_trusted);
	assert_int_equal(tb.new_origin_ns, 3 * SEC);
	/* RTC second granularity at the new kernel's boot, plus the sampling skews */
	assert_true(tb.uncertainty_ns >= (uint64_t)SEC);
	assert_int_equal(tb.uncertainty_ns, SEC + 200);
	/* the stamps are still reported, converted, for the record */
	assert_int_equal(tb.stamp_ns[0], 1 * SEC);

	assert_int_equal(timebase_to_json(&tb, &in, &j), 0);
	assert_true(json_object_object_get_ex(j, "timebase", &v));
	assert_string_equal(json_object_get_string(v), "realtime");
	assert_true(json_object_object_get_ex(j, "phases", &phases));
	assert_int_equal(json_object_array_length(phases), 2);
	assert_string_equal(phase_name(phases, 0), "handoff");
	assert_true(json_object_object_get_ex(j, "stamps", &stamps));
	assert_true(json_object_object_get_ex(stamps, "trusted", &v));
	assert_false(json_object_get_boolean(v));
	assert_true(json_object_object_get_ex(stamps, "entry_tsc", &v));
	assert_true(json_object_object_get_ex(j, "flags", &v));
	assert_true(json_object_array_length(v) >= 3);
	json_object_put(j);
}

static void test_timebase_unstable_tsc_is_not_used(void **state) {
	TimebaseInput in = invariant_input();
	Timebase tb;

	in.cpu.tsc_unstable = true; /* invariant flags, but the kernel distrusts it */
	assert_int_equal(timebase_compute(&in, &tb), 0);
	assert_int_equal(tb.kind, TIMEBASE_REALTIME);
	assert_int_equal(tb.flags & TIMEBASE_TSC_UNSTABLE, TIMEBASE_TSC_UNSTABLE);
	assert_false(tb.flags & TIMEBASE_TSC_NOT_INVARIANT);
}

static void test_timebase_tsc_reset(void **state) {
	TimebaseInput in = invariant_input();
	Timebase tb;

	/* the new kernel reads a TSC far below the old one: reset, not a wrap */
	in.new_start.tsc = 12345678;
	assert_int_equal(timebase_compute(&in, &tb), 0);
	assert_int_equal(tb.kind, TIMEBASE_REALTIME);
	assert_true(tb.flags & TIMEBASE_TSC_RESET);
	assert_int_equal(tb.tsc_gap_ns, INT64_MIN);
	assert_int_equal(tb.new_origin_ns, 3 * SEC);

	/* a TSC that advanced less than the new kernel has been up: reset too */
	in = invariant_input();
	in.new_start.tsc = in.old_reboot.tsc + UINT64_C(2000000000); /* 1 s, but up 2 s */
	assert_int_equal(timebase_compute(&in, &tb), 0);
	assert_int_equal(tb.kind, TIMEBASE_REALTIME);
	assert_true(tb.flags & TIMEBASE_TSC_RESET);
}

static void test_timebase_tsc_wrap(void **state) {
	TimebaseInput in = invariant_input();
	const uint64_t tsc0 = UINT64_MAX - UINT64_C(999999999); /* 0.5 s before 2^64 */
	Timebase tb;

	in.old_reboot.tsc = tsc0;
	in.new_start.tsc = tsc0 + 5 * UINT64_C(2000000000); /* wraps */
	in.stamps = (TimebaseStamps){ .entry = tsc0 + UINT64_C(2000000000) };
	assert_true(in.new_start.tsc < in.old_reboot.tsc);
	assert_int_equal(timebase_compute(&in, &tb), 0);
	assert_int_equal(tb.kind, TIMEBASE_TSC);
	assert_true(tb.flags & TIMEBASE_TSC_WRAPPED);
	assert_int_equal(tb.tsc_gap_ns, 5 * SEC);
	assert_int_equal(tb.new_origin_ns, 3 * SEC);
	assert_int_equal(tb.stamp_ns[0], 1 * SEC);
	assert_true(tb.stamps_trusted);
}

static void test_timebase_missing_stamps(void **state) {
	TimebaseInput in = invariant_input();
	struct json_object *j, *phases;
	Timebase tb;

	in.stamps = (TimebaseStamps){};
	assert_int_equal(timebase_compute(&in, &tb), 0);
	assert_int_equal(tb.kind, TIMEBASE_TSC);
	assert_int_equal(tb.flags, TIMEBASE_STAMPS_MISSING);
	assert_false(tb.stamps_trusted);
	assert_int_equal(tb.stamp_ns[0], TIMEBASE_STAMP_ABSENT);
	assert_int_equal(timebase_to_json(&tb, &in, &j), 0);
	assert_true(json_object_object_get_ex(j, "phases", &phases));
	assert_string_equal(phase_name(phases, 0), "handoff");
	assert_int_equal(phase_field(phases, 0, "end_ns"), 3 * SEC);
	json_object_put(j);

	/* fast handoff: no "verified" stamp; entry -> jump is the purgatory phase */
	in = invariant_input();
	in.stamps.verified = 0;
	assert_int_equal(timebase_compute(&in, &tb), 0);
	assert_true(tb.stamps_trusted);
	assert_int_equal(timebase_to_json(&tb, &in, &j), 0);
	assert_true(json_object_object_get_ex(j, "phases", &phases));
	assert_int_equal(json_object_array_length(phases), 4);
	assert_string_equal(phase_name(phases, 1), "purgatory");
	assert_int_equal(phase_field(phases, 1, "duration_ns"), 310 * MS);
	json_object_put(j);
}

static void test_timebase_disordered_stamps(void **state) {
	TimebaseInput in = invariant_input();
	Timebase tb;

	in.stamps.jump = in.stamps.entry - 1000; /* jump before entry */
	assert_int_equal(timebase_compute(&in, &tb), 0);
	assert_int_equal(tb.kind, TIMEBASE_TSC);
	assert_true(tb.flags & TIMEBASE_STAMPS_DISORDERED);
	assert_false(tb.stamps_trusted);

	/* a stamp after the new kernel's clock started cannot be purgatory's */
	in = invariant_input();
	in.stamps.jump = in.new_start.tsc;
	assert_int_equal(timebase_compute(&in, &tb), 0);
	assert_true(tb.flags & TIMEBASE_STAMPS_DISORDERED);

	/* a stamp before the reboot request (TSC behind tsc0) */
	in = invariant_input();
	in.stamps.entry = in.old_reboot.tsc - 10;
	assert_int_equal(timebase_compute(&in, &tb), 0);
	assert_true(tb.flags & TIMEBASE_STAMPS_DISORDERED);
	assert_false(tb.stamps_trusted);
}

static void test_timebase_realtime_backwards(void **state) {
	TimebaseInput in = lab_input();
	struct json_object *j, *phases, *v;
	Timebase tb;

	/* the new kernel's realtime is 10 s before the reboot request */
	in.new_start.realtime_ns = in.old_reboot.realtime_ns - 10 * SEC;
	assert_int_equal(timebase_compute(&in, &tb), 0);
	assert_int_equal(tb.kind, TIMEBASE_NONE);
	assert_true(tb.flags & TIMEBASE_REALTIME_BACKWARDS);
	assert_int_equal(tb.realtime_gap_ns, -10 * SEC);
	assert_int_equal(timebase_to_json(&tb, &in, &j), 0);
	assert_true(json_object_object_get_ex(j, "phases", &phases));
	assert_int_equal(json_object_array_length(phases), 0);
	assert_false(json_object_object_get_ex(j, "new_origin_ns", &v));
	json_object_put(j);
}

static void test_timebase_realtime_clamped(void **state) {
	TimebaseInput in = lab_input();
	Timebase tb;

	/* realtime says the new kernel started 0.4 s *before* the request: within
	 * the 1 s uncertainty, so the interval is cut at 0 and re-centred */
	in.new_start.realtime_ns = in.old_reboot.realtime_ns + 1600 * MS;
	assert_int_equal(timebase_compute(&in, &tb), 0);
	assert_int_equal(tb.kind, TIMEBASE_REALTIME);
	assert_true(tb.new_origin_ns >= 0);
	assert_true(tb.new_origin_ns - (int64_t)tb.uncertainty_ns >= 0);
	assert_int_equal(tb.new_origin_ns + (int64_t)tb.uncertainty_ns, -400 * MS + SEC + 200);
}

static void test_timebase_realtime_stepped(void **state) {
	TimebaseInput in = lab_input();
	Timebase tb;

	/* 60 s earlier realtime - monotonic was 3 s larger: an NTP step backwards */
	in.old_earlier = (TimebaseSample){ .realtime_ns = in.old_reboot.realtime_ns - 57 * SEC,
		                           .monotonic_ns = in.old_reboot.monotonic_ns - 60 * SEC };
	assert_int_equal(timebase_compute(&in, &tb), 0);
	assert_true(tb.flags & TIMEBASE_REALTIME_STEPPED);
	assert_int_equal(tb.kind, TIMEBASE_REALTIME);
	/* widened by the 3 s step: [3 s - 4 s, 3 s + 4 s], cut at 0 */
	assert_int_equal(tb.new_origin_ns + (int64_t)tb.uncertainty_ns, 7 * SEC + 200);
	assert_int_equal(tb.new_origin_ns - (int64_t)tb.uncertainty_ns, 0);

	/* slewing (no step) is not flagged */
	in = lab_input();
	in.old_earlier = (TimebaseSample){ .realtime_ns = in.old_reboot.realtime_ns - 60 * SEC,
		                           .monotonic_ns = in.old_reboot.monotonic_ns - 60 * SEC };
	assert_int_equal(timebase_compute(&in, &tb), 0);
	assert_false(tb.flags & TIMEBASE_REALTIME_STEPPED);
}

static void test_timebase_tsc_beats_stepped_realtime(void **state) {
	TimebaseInput in = invariant_input();
	Timebase tb;

	in.new_start.realtime_ns += 30 * SEC; /* NTP stepped the new kernel's clock */
	assert_int_equal(timebase_compute(&in, &tb), 0);
	assert_int_equal(tb.kind, TIMEBASE_TSC);
	assert_true(tb.flags & TIMEBASE_REALTIME_DISAGREES);
	assert_int_equal(tb.new_origin_ns, 3 * SEC);
}

static void test_timebase_missing_inputs(void **state) {
	TimebaseInput in = invariant_input();
	Timebase tb = { .kind = TIMEBASE_TSC, .new_origin_ns = 42 };

	in.new_start = (TimebaseSample){};
	assert_int_equal(timebase_compute(&in, &tb), -EINVAL);
	assert_int_equal(tb.new_origin_ns, 42); /* untouched on failure */
	in = invariant_input();
	in.old_reboot.realtime_ns = 0;
	assert_int_equal(timebase_compute(&in, &tb), -EINVAL);

	/* no TSC in the handoff record (e.g. another architecture) */
	in = invariant_input();
	in.old_reboot.tsc = 0;
	assert_int_equal(timebase_compute(&in, &tb), 0);
	assert_int_equal(tb.kind, TIMEBASE_REALTIME);
	assert_true(tb.flags & TIMEBASE_TSC_MISSING);
	assert_true(tb.flags & TIMEBASE_STAMPS_UNTRUSTED);

	/* frequency unknown */
	in = invariant_input();
	in.cpu.tsc_khz = 0;
	assert_int_equal(timebase_compute(&in, &tb), 0);
	assert_int_equal(tb.kind, TIMEBASE_REALTIME);
	assert_true(tb.flags & TIMEBASE_TSC_NO_FREQUENCY);
}

static void test_timebase_downtime(void **state) {
	TimebaseInput in = invariant_input();
	int64_t d = 42;
	Timebase tb;

	assert_int_equal(timebase_compute(&in, &tb), 0);
	/* last ran 0.5 s before the reboot request (old monotonic 99.5 s), first ran at
	 * the new kernel's monotonic 2.5 s = axis 5.5 s: 6 s of downtime */
	assert_int_equal(timebase_downtime(&tb, &in, 99500 * MS, 2500 * MS, &d), 0);
	assert_int_equal(d, 6 * SEC);

	/* not observed */
	assert_int_equal(timebase_downtime(&tb, &in, 0, 2500 * MS, &d), -EINVAL);
	assert_int_equal(timebase_downtime(&tb, &in, 99500 * MS, 0, &d), -EINVAL);
	/* impossible: the VM ran on the new kernel before it stopped on the old one */
	assert_int_equal(timebase_downtime(&tb, &in, 110 * SEC, 1 * MS, &d), -ERANGE);
	assert_int_equal(d, 6 * SEC); /* untouched on failure */

	/* the lab: same figure, +-1 s */
	in = lab_input();
	assert_int_equal(timebase_compute(&in, &tb), 0);
	assert_int_equal(timebase_downtime(&tb, &in, 99500 * MS, 2500 * MS, &d), 0);
	assert_int_equal(d, 6 * SEC);
	assert_true(tb.uncertainty_ns >= (uint64_t)SEC);

	/* no common axis: no cross-kexec figure */
	in.new_start.realtime_ns = in.old_reboot.realtime_ns - 10 * SEC;
	assert_int_equal(timebase_compute(&in, &tb), 0);
	assert_int_equal(timebase_downtime(&tb, &in, 99500 * MS, 2500 * MS, &d), -EDOM);
}

static void test_timebase_names(void **state) {
	assert_string_equal(timebase_kind_to_string(TIMEBASE_REALTIME), "realtime");
	assert_null(timebase_kind_to_string(_TIMEBASE_KIND_MAX));
	assert_string_equal(timebase_flag_to_string(TIMEBASE_TSC_WRAPPED), "tsc-wrapped");
	assert_string_equal(timebase_flag_to_string(TIMEBASE_STAMPS_DISORDERED),
	                    "stamps-disordered");
	assert_null(timebase_flag_to_string(3));
	assert_null(timebase_flag_to_string(0));
}

static const char cpuinfo_epyc[] =
        "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu MHz\t\t: 2300.000\n"
        "flags\t\t: fpu vme de pse tsc msr pae constant_tsc rep_good nopl nonstop_tsc cpuid "
        "avx2\n\nprocessor\t: 1\nflags\t\t: fpu\n";
static const char cpuinfo_tcg[] = "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr pae "
                                  "constant_tsc_not nonstop_tscx avx2\n";

static const char kmsg_host[] =
        "[    0.000053] tsc: Detected 2300.000 MHz processor\n"
        "[    0.215681] clocksource: tsc-early: mask: 0xffffffffffffffff\n"
        "[    0.284874] clocksource: Switched to clocksource kvm-clock\n"
        "[    0.369551] clocksource: Switched to clocksource tsc-early\n"
        "[    1.401000] tsc: Refined TSC clocksource calibration: 2294.687 MHz\n"
        "[    1.402000] clocksource: Switched to clocksource tsc\n";
static const char kmsg_lab[] =
        "6,120,1000,-;tsc: Fast TSC calibration using PIT\n"
        "6,121,1001,-;tsc: Detected 3792.874 MHz processor\n"
        "4,300,900000,-;tsc: Marking TSC unstable due to check_tsc_sync_source failed\n"
        "6,301,900100,-;clocksource: Switched to clocksource hpet\n";

static void test_timebase_cpu_parse(void **state) {
	TimebaseCpu c;

	assert_int_equal(timebase_cpu_parse(cpuinfo_epyc, kmsg_host, &c), 0);
	assert_true(c.constant_tsc);
	assert_true(c.nonstop_tsc);
	assert_false(c.tsc_unstable);
	assert_int_equal(c.tsc_khz, 2294687);
	assert_int_equal(c.tsc_khz_ppm, 100);
	assert_string_equal(c.tsc_khz_source, "refined-calibration");

	assert_int_equal(timebase_cpu_parse(cpuinfo_tcg, kmsg_lab, &c), 0);
	assert_false(c.constant_tsc);
	assert_false(c.nonstop_tsc);
	assert_true(c.tsc_unstable);
	assert_int_equal(c.tsc_khz, 3792874);
	assert_int_equal(c.tsc_khz_ppm, 500);
	assert_string_equal(c.tsc_khz_source, "detected");

	/* only the clocksource line: not tsc means distrusted */
	assert_int_equal(
	        timebase_cpu_parse(NULL, "clocksource: Switched to clocksource hpet\n", &c), 0);
	assert_true(c.tsc_unstable);
	assert_int_equal(c.tsc_khz, 0);

	/* garbage frequencies are ignored */
	assert_int_equal(timebase_cpu_parse(NULL,
	                                    "tsc: Detected lots of MHz processor\n"
	                                    "tsc: Detected 12.5MHz\n",
	                                    &c),
	                 0);
	assert_int_equal(c.tsc_khz, 0);
	assert_int_equal(timebase_cpu_parse(NULL, NULL, NULL), -EINVAL);
}

static void test_timebase_stamps_from_cmdline(void **state) {
	TimebaseStamps st = { .entry = 7 };

	assert_int_equal(
	        timebase_stamps_from_cmdline(
	                "BOOT_IMAGE=/vmlinuz root=/dev/vda1 upgraded.stamps=00000000000003e8,"
	                "00000000000007d0,0000000000000bb8 quiet\n",
	                &st),
	        0);
	assert_int_equal(st.entry, 1000);
	assert_int_equal(st.verified, 2000);
	assert_int_equal(st.jump, 3000);

	/* fast handoff: no verification stamp; 0x prefix; at the end of the line */
	assert_int_equal(
	        timebase_stamps_from_cmdline("ro upgraded.stamps=0xFFFFFFFFFFFFFFFF,,0x10", &st),
	        0);
	assert_int_equal(st.entry, UINT64_MAX);
	assert_int_equal(st.verified, 0);
	assert_int_equal(st.jump, 16);

	/* the untouched placeholder: all absent */
	assert_int_equal(
	        timebase_stamps_from_cmdline(
	                "upgraded.stamps=0000000000000000,0000000000000000,0000000000000000", &st),
	        0);
	assert_int_equal(st.entry, 0);
	assert_int_equal(st.jump, 0);

	/* purgatory's real field (purgatory/purgatory-abi.h): mode and implementation
	 * letters after the three TSC values; its untouched template */
	assert_int_equal(
	        timebase_stamps_from_cmdline("ro upgraded.stamps=00000000000003e8,00000000000007d0,"
	                                     "0000000000000bb8,v,s console=ttyS0",
	                                     &st),
	        0);
	assert_int_equal(st.verified, 2000);
	assert_int_equal(st.mode, 'v');
	assert_int_equal(st.impl, 's');
	assert_int_equal(timebase_stamps_from_cmdline("upgraded.stamps=0000000000000000,"
	                                              "0000000000000000,0000000000000000,-,-",
	                                              &st),
	                 0);
	assert_int_equal(st.entry, 0);
	assert_int_equal(st.mode, '-');

	/* absent, or only as part of another word */
	st.entry = 7;
	assert_int_equal(timebase_stamps_from_cmdline("ro quiet", &st), -ENOENT);
	assert_int_equal(timebase_stamps_from_cmdline("xupgraded.stamps=1,2,3", &st), -ENOENT);
	/* malformed: *ret untouched */
	assert_int_equal(timebase_stamps_from_cmdline("upgraded.stamps=12g4", &st), -EBADMSG);
	assert_int_equal(timebase_stamps_from_cmdline("upgraded.stamps=1,2,3,4", &st), -EBADMSG);
	assert_int_equal(timebase_stamps_from_cmdline("upgraded.stamps=1,2,3,v", &st), -EBADMSG);
	assert_int_equal(timebase_stamps_from_cmdline("upgraded.stamps=1,2,3,x,s", &st), -EBADMSG);
	assert_int_equal(timebase_stamps_from_cmdline("upgraded.stamps=1,2,3,v,s9", &st), -EBADMSG);
	assert_int_equal(timebase_stamps_from_cmdline("upgraded.stamps=11111111111111111", &st),
	                 -EBADMSG);
	assert_int_equal(timebase_stamps_from_cmdline("upgraded.stamps=1;2", &st), -EBADMSG);
	assert_int_equal(st.entry, 7);
	assert_int_equal(timebase_stamps_from_cmdline(NULL, &st), -EINVAL);
}

static void test_timebase_sample_now(void **state) {
	TimebaseSample a, b;

	assert_int_equal(timebase_sample_now(&a), 0);
	assert_int_equal(timebase_sample_now(&b), 0);
	assert_true(a.monotonic_ns > 0 && a.realtime_ns > a.monotonic_ns);
	assert_true(b.monotonic_ns >= a.monotonic_ns);
#if defined(__x86_64__)
	assert_true(a.tsc != 0 && b.tsc > a.tsc);
#endif
	/* generous: valgrind slows every clock read */
	assert_true(a.skew_ns < 50 * MS);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_timebase_invariant_tsc),
		cmocka_unit_test(test_timebase_lab_falls_back_to_realtime),
		cmocka_unit_test(test_timebase_unstable_tsc_is_not_used),
		cmocka_unit_test(test_timebase_tsc_reset),
		cmocka_unit_test(test_timebase_tsc_wrap),
		cmocka_unit_test(test_timebase_missing_stamps),
		cmocka_unit_test(test_timebase_disordered_stamps),
		cmocka_unit_test(test_timebase_realtime_backwards),
		cmocka_unit_test(test_timebase_realtime_clamped),
		cmocka_unit_test(test_timebase_realtime_stepped),
		cmocka_unit_test(test_timebase_tsc_beats_stepped_realtime),
		cmocka_unit_test(test_timebase_missing_inputs),
		cmocka_unit_test(test_timebase_downtime),
		cmocka_unit_test(test_timebase_names),
		cmocka_unit_test(test_timebase_cpu_parse),
		cmocka_unit_test(test_timebase_stamps_from_cmdline),
		cmocka_unit_test(test_timebase_sample_now),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
