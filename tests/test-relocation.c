/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The relocation slice: the old kernel's shutdown dump (pstore) parsed for the
 * daemon's reboot-request mark and "Starting new kernel", and the slice to
 * purgatory's entry stamp computed on the report's axis with its uncertainty.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "macros.h"
#include "relocation.h"

#define US  INT64_C(1000)
#define MS  INT64_C(1000000)
#define SEC INT64_C(1000000000)
#define ID  "0123456789abcdef"

/* A ramoops shutdown record as the new kernel shows it (the lab's, shortened). */
static const char dump[] = "Shutdown#1 Part1\n"
                           "<6>[   95.000001] systemd-shutdown[1]: Syncing filesystems\n"
                           "<5>[   96.100000] upgraded: reboot-request update=" ID "\n"
                           "<6>[   97.000000] systemd-shutdown[1]: Rebooting with kexec.\n"
                           "<5>[   98.350000] kexec_core: Starting new kernel\n";

static void test_relocation_parse_dump(void **state) {
	RelocationLog log = {};

	(void)state;
	assert_int_equal(relocation_log_parse(dump, strlen(dump), ID, &log), 0);
	assert_int_equal(log.mark_us, 96100000);
	assert_int_equal(log.start_us, 98350000);
}

/* Caller ids, CRLF, no priority, the prefix-less kernel line, no final newline; an
 * earlier handoff's start before the last mark is not this one's. */
static void test_relocation_parse_variants(void **state) {
	static const char t[] = "[   10.000000] Starting new kernel\r\n"
	                        "[   20.000000][    T1] upgraded: reboot-request update=" ID "\r\n"
	                        "[   20.500000][    T1] Starting new kernel\r\n"
	                        "[   30.000000][  T812] upgraded: reboot-request update=" ID "\r\n"
	                        "<5>[   31.250000][    C0] Starting new kernel";
	RelocationLog log = {};

	(void)state;
	assert_int_equal(relocation_log_parse(t, strlen(t), ID, &log), 0);
	assert_int_equal(log.mark_us, 30000000);
	assert_int_equal(log.start_us, 31250000);
}

/* Another update's mark, a mark without a start after it, malformed times, lines
 * that only resemble ours: nothing found, and *ret untouched. */
static void test_relocation_parse_refusals(void **state) {
	static const char *const bad[] = {
		"<5>[   96.100000] upgraded: reboot-request update=fedcba9876543210\n"
		"<5>[   98.350000] kexec_core: Starting new kernel\n",
		"<5>[   96.100000] upgraded: reboot-request update=" ID "\n",
		"<5>[   98.350000] kexec_core: Starting new kernel\n"
		"<5>[   99.000000] upgraded: reboot-request update=" ID "\n",
		"<5>[   96.1000000] upgraded: reboot-request update=" ID "\n"
		"<5>[   98.350000] kexec_core: Starting new kernel\n",
		"<5>[   96.100000 upgraded: reboot-request update=" ID "\n"
		"<5>[   98.350000] kexec_core: Starting new kernel\n",
		"<5   96.100000] upgraded: reboot-request update=" ID "\n",
		"<5>[   96.100000] upgraded: reboot-request update=" ID "x\n"
		"<5>[   98.350000] kexec_core: Starting new kernel\n",
		"<5>[   96.100000] upgraded: reboot-request update=" ID "\n"
		"<5>[   98.350000] kexec_core: Starting new kernel now\n",
		"<5>[1234567890123.000000] upgraded: reboot-request update=" ID "\n"
		"<5>[1234567890123.000001] kexec_core: Starting new kernel\n",
		"",
	};
	RelocationLog log = { .mark_us = 7, .start_us = 8 };

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		assert_int_equal(relocation_log_parse(bad[i], strlen(bad[i]), ID, &log), -ENOENT);
		assert_int_equal(log.mark_us, 7);
		assert_int_equal(log.start_us, 8);
	}
	assert_int_equal(relocation_log_parse(dump, strlen(dump), NULL, &log), -EINVAL);
	assert_int_equal(relocation_log_parse(dump, strlen(dump), "", &log), -EINVAL);
	assert_int_equal(relocation_log_parse(NULL, 0, ID, &log), -ENOENT);
}

/* A 2 GHz invariant TSC; the reboot request at TSC tsc0, the mark written 40 us after
 * it; "Starting new kernel" 2.25 s after the mark; purgatory entered at 2.4 s. */
static TimebaseInput input(void) {
	const uint64_t tsc0 = UINT64_C(1000000000000);

	return (TimebaseInput){
		.old_reboot = { .tsc = tsc0, .monotonic_ns = 100 * SEC, .skew_ns = 100 },
		.cpu = { .constant_tsc = true,
		         .nonstop_tsc = true,
		         .tsc_khz = 2000000,
		         .tsc_khz_ppm = 100 },
		.stamps = { .entry = tsc0 + UINT64_C(4800000000), .mode = 'v', .impl = 'x' },
	};
}

static void test_relocation_compute(void **state) {
	const RelocationLog log = { .mark_us = 96100000, .start_us = 98350000 };
	TimebaseInput in = input();
	Relocation r = {};
	const char *why = "unset";
	uint64_t expect_u;

	(void)state;
	assert_int_equal(
	        relocation_compute(&log, &in.old_reboot, 100 * SEC + 40 * US, &in, &r, &why), 0);
	assert_null(why);
	assert_false(r.estimated);
	assert_int_equal(r.entry_ns, 2400 * MS);
	assert_int_equal(r.start_ns, 2250 * MS + 20 * US);
	assert_int_equal(r.ns, 150 * MS - 20 * US);
	/* Half the mark's latency, two printk truncations, the sample's width, and
	 * 100 ppm of the two intervals (2.4 s + 2.25 s). */
	expect_u = 20 * US + 2 * US + 100 + (2400 * MS + 2250 * MS) / 10000;
	assert_int_equal(r.uncertainty_ns, expect_u);

	/* An emulated TSC: the same figure, an estimate, and why. */
	in.cpu.tsc_unstable = true;
	assert_int_equal(
	        relocation_compute(&log, &in.old_reboot, 100 * SEC + 40 * US, &in, &r, &why), 0);
	assert_true(r.estimated);
	assert_non_null(why);
	assert_non_null(strstr(why, "not invariant"));
	in.cpu.tsc_unstable = false;
	in.cpu.nonstop_tsc = false;
	assert_int_equal(
	        relocation_compute(&log, &in.old_reboot, 100 * SEC + 40 * US, &in, &r, &why), 0);
	assert_true(r.estimated);
}

/* Each missing input is named, and so is an order no handoff can have; *ret stays. */
static void test_relocation_compute_refusals(void **state) {
	const RelocationLog log = { .mark_us = 96100000, .start_us = 98350000 };
	const RelocationLog backwards = { .mark_us = 98350000, .start_us = 96100000 };
	const RelocationLog late = { .mark_us = 96100000, .start_us = 99000000 };
	const uint64_t written = 100 * SEC + 40 * US;
	TimebaseInput in;
	Relocation r = { .ns = 42 };
	const char *why;

	(void)state;
	in = input();
	in.stamps.entry = 0;
	assert_int_equal(relocation_compute(&log, &in.old_reboot, written, &in, &r, &why),
	                 -ENODATA);
	assert_non_null(strstr(why, "entry stamp"));
	in = input();
	in.old_reboot.tsc = 0;
	assert_int_equal(relocation_compute(&log, &in.old_reboot, written, &in, &r, &why),
	                 -ENODATA);
	in = input();
	in.cpu.tsc_khz = 0;
	assert_int_equal(relocation_compute(&log, &in.old_reboot, written, &in, &r, &why),
	                 -ENODATA);
	in = input();
	assert_int_equal(relocation_compute(&log, &in.old_reboot, 0, &in, &r, &why), -ENODATA);
	assert_int_equal(relocation_compute(&log, &in.old_reboot, 99 * SEC, &in, &r, &why),
	                 -ENODATA);
	assert_int_equal(relocation_compute(&backwards, &in.old_reboot, written, &in, &r, &why),
	                 -ERANGE);
	/* "Starting new kernel" 2.9 s after the mark, purgatory entered at 2.4 s. */
	assert_int_equal(relocation_compute(&late, &in.old_reboot, written, &in, &r, &why),
	                 -ERANGE);
	assert_non_null(strstr(why, "precedes"));
	/* The entry stamp before the reboot request (a TSC that went backwards). */
	in.stamps.entry = in.old_reboot.tsc - 1;
	assert_int_equal(relocation_compute(&log, &in.old_reboot, written, &in, &r, &why), -ERANGE);
	assert_int_equal(r.ns, 42);
}

static void test_relocation_json(void **state) {
	const Relocation r = { .start_ns = 2250 * MS,
		               .entry_ns = 2400 * MS,
		               .ns = 150 * MS,
		               .uncertainty_ns = 500 * US,
		               .estimated = true };
	json_object *o = NULL, *v;

	(void)state;
	assert_int_equal(relocation_to_json(&r, "/sys/fs/pstore/dmesg-ramoops-0", "why", &o), 0);
	assert_true(json_object_object_get_ex(o, "ns", &v));
	assert_int_equal(json_object_get_int64(v), 150 * MS);
	assert_true(json_object_object_get_ex(o, "estimated", &v));
	assert_true(json_object_get_boolean(v));
	assert_true(json_object_object_get_ex(o, "source", &v));
	assert_string_equal(json_object_get_string(v), "/sys/fs/pstore/dmesg-ramoops-0");
	assert_true(json_object_object_get_ex(o, "reason", &v));
	assert_string_equal(json_object_get_string(v), "why");
	json_object_put(o);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_relocation_parse_dump),
		cmocka_unit_test(test_relocation_parse_variants),
		cmocka_unit_test(test_relocation_parse_refusals),
		cmocka_unit_test(test_relocation_compute),
		cmocka_unit_test(test_relocation_compute_refusals),
		cmocka_unit_test(test_relocation_json),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
