/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Report schema 2 (common/report-schema.c, docs/report.md): real schema-1 reports (the fuzz
 * seeds, from the lab and the integration tests) mapped onto schema 2 validate against
 * docs/report.schema.json and carry its fields, typed; a schema-1 report still prints
 * through upgradectl's printer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "json-util.h"
#include "macros.h"
#include "report-html.h"
#include "report-print.h"
#include "report-schema.h"

static const ReportIdentity identity = {
	.machine_id = "0123456789abcdef0123456789abcdef",
	.version = "9.8",
	.written_usec = 1796000000000000,
};

static json_object *fixture(const char *name) {
	_cleanup_free_ char *path = NULL, *data = NULL;
	json_object *o;

	assert_true(asprintf(&path, "%s/%s", REPORT_FIXTURES, name) > 0);
	assert_int_equal(read_file_full(path, 1 << 22, &data, NULL), 0);
	o = json_tokener_parse(data);
	assert_non_null(o);
	return o;
}

static json_object *get(json_object *o, const char *k) {
	json_object *v = NULL;

	assert_true(json_object_object_get_ex(o, k, &v));
	return v;
}

static void validate(json_object *o) {
	char path[] = "/tmp/test-report-schema.XXXXXX";
	_cleanup_free_ char *cmd = NULL;
	const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write_all(fd, text, strlen(text)), 0);
	close(fd);
	assert_true(asprintf(&cmd, "python3 '%s' '%s' '%s'", VALIDATE_REPORT, REPORT_SCHEMA, path) >
	            0);
	assert_int_equal(system(cmd), 0);
	unlink(path);
}

static void test_report_iso_round_trip(void **state) {
	char buf[32];
	uint64_t usec = 0;

	assert_string_equal(report_iso_format(1796000000123456, buf),
	                    "2026-11-30T00:53:20.123456Z");
	assert_int_equal(report_iso_parse(buf, &usec), 0);
	assert_int_equal(usec, 1796000000123456);
	assert_int_equal(report_iso_parse("2026-11-30T00:53:20.5Z", &usec), 0);
	assert_int_equal(usec, 1796000000500000);
	assert_int_equal(report_iso_parse("2026-11-30T00:53:20", &usec), -EINVAL);
	assert_int_equal(report_iso_parse("2026-11-30T00:53:20.1Zx", &usec), -EINVAL);
	assert_int_equal(report_iso_parse(NULL, &usec), -EINVAL);
}

static void test_report_machine_id(void **state) {
	char root[] = "/tmp/test-report-machine-id.XXXXXX", path[96];
	_cleanup_free_ char *id = NULL;

	assert_non_null(mkdtemp(root));
	assert_int_equal(report_read_machine_id(root, &id), -ENOENT);
	snprintf(path, sizeof(path), "%s/etc/machine-id", root);
	assert_int_equal(write_file_atomic(path, "not an id\n", 10, 0644), -ENOENT);
	snprintf(path, sizeof(path), "%s/etc", root);
	assert_int_equal(mkdir_p(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/etc/machine-id", root);
	assert_int_equal(write_file_atomic(path, "not an id\n", 10, 0644), 0);
	assert_int_equal(report_read_machine_id(root, &id), -EBADMSG);
	assert_int_equal(write_file_atomic(path, "0123456789abcdef0123456789abcdef\n", 33, 0644),
	                 0);
	assert_int_equal(report_read_machine_id(root, &id), 0);
	assert_string_equal(id, "0123456789abcdef0123456789abcdef");
	unlink(path);
	snprintf(path, sizeof(path), "%s/etc", root);
	rmdir(path);
	rmdir(root);
}

/* Every VM has one downtime object, with a source from the documented rule. */
static void assert_one_downtime_each(json_object *o, const char *want_source) {
	json_object *vms = get(o, "vms");

	assert_true(json_object_array_length(vms) > 0);
	for (size_t i = 0; i < json_object_array_length(vms); i++) {
		json_object *d = get(json_object_array_get_idx(vms, i), "downtime");

		assert_true(json_object_is_type(get(d, "ns"), json_type_int));
		assert_string_equal(json_object_get_string(get(d, "source")), want_source);
		assert_true(json_object_get_boolean(get(d, "estimated")));
	}
	assert_false(json_object_object_get_ex(o, "vm_downtime", NULL));
	assert_string_equal(json_object_get_string(json_object_array_get_idx(
	                            get(get(o, "totals"), "vm_downtime_sources"), 0)),
	                    want_source);
	assert_int_equal(json_object_array_length(get(get(o, "totals"), "vm_downtime_sources")), 1);
}

/* The lab's measured report: identity, ISO times, the probe's downtime folded into vms[],
 * the handoff's reasons as objects, microseconds gone. */
static void test_report_upgrade_lab(void **state) {
	_cleanup_json_ json_object *o = fixture("seed-lab-measured.json");
	json_object *r, *vm;
	uint64_t usec;

	assert_int_equal(report_upgrade(o, &identity), 0);
	validate(o);
	assert_int_equal(json_object_get_int(get(o, "schema")), 2);
	assert_string_equal(json_object_get_string(get(get(o, "host"), "machine_id")),
	                    identity.machine_id);
	assert_string_equal(json_object_get_string(get(get(o, "daemon"), "version")), "9.8");
	/* first stamp (staged) and the terminal one (completed) */
	assert_int_equal(report_iso_parse(json_object_get_string(get(o, "started_at")), &usec), 0);
	assert_int_equal(usec, 1795997794337017);
	assert_int_equal(report_iso_parse(json_object_get_string(get(o, "finished_at")), &usec), 0);
	assert_true(usec > 1795997794337017 && usec != identity.written_usec);
	assert_one_downtime_each(o, "mixed");
	vm = json_object_array_get_idx(get(o, "vms"), 1);
	assert_string_equal(json_object_get_string(get(vm, "name")), "lab-counter-1");
	assert_int_equal(json_object_get_int64(get(get(vm, "downtime"), "ns")), 140980413230);
	assert_int_equal(json_object_get_int64(get(get(o, "totals"), "max_vm_downtime_ns")),
	                 140980413230);
	assert_false(json_object_object_get_ex(vm, "save_time", NULL));
	assert_true(json_object_is_type(get(vm, "paused_at"), json_type_string));
	r = json_object_array_get_idx(get(get(o, "handoff"), "reasons"), 0);
	assert_string_equal(json_object_get_string(get(r, "code")), "fast-not-allowed");
	assert_string_equal(json_object_get_string(get(r, "severity")), "blocking");
	assert_string_equal(json_object_get_string(get(r, "text")),
	                    "Fast handoff is not allowed on this host ([Handoff] AllowFast=no)");
	/* a second pass changes nothing */
	assert_int_equal(report_upgrade(o, &identity), 0);
	validate(o);
}

/* No cross-kexec estimate (a rollback; a run without the probe's figures): libvirt's wall
 * clock is the one downtime, said so; a reader without identity says null. */
static void test_report_upgrade_wallclock(void **state) {
	static const char *const seeds[] = { "seed-failed-rollback.json", "seed-clock-sync.json",
		                             "seed-success-two-vms.json",
		                             "seed-lab-critical-path.json" };

	for (size_t i = 0; i < ELEMENTSOF(seeds); i++) {
		_cleanup_json_ json_object *o = fixture(seeds[i]);

		assert_int_equal(report_upgrade(o, NULL), 0);
		assert_null(get(get(o, "host"), "machine_id"));
		assert_null(get(get(o, "daemon"), "version"));
		assert_one_downtime_each(o, i < 3 ? "libvirt-wallclock" : "probe");
		/* what a reader maps in memory is schema 2 but for the daemon's identity */
		json_object_object_add(get(o, "host"), "machine_id",
		                       json_object_new_string(identity.machine_id));
		json_object_object_add(get(o, "daemon"), "version", json_object_new_string("1"));
		validate(o);
	}
}

static void test_report_upgrade_refuses(void **state) {
	_cleanup_json_ json_object *a = json_tokener_parse("{\"schema\":3}");
	_cleanup_json_ json_object *b = json_tokener_parse("[1]");
	_cleanup_json_ json_object *c = json_tokener_parse("{\"schema\":\"1\"}");

	assert_int_equal(report_upgrade(a, NULL), -EPROTONOSUPPORT);
	assert_int_equal(report_upgrade(b, NULL), -EBADMSG);
	assert_int_equal(report_upgrade(c, NULL), -EBADMSG);
}

/* upgradectl report's text (report_print) or HTML (report_html) of a report. */
static char *render(json_object *o, void (*fn)(json_object *report, FILE *f)) {
	char *text = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);

	assert_non_null(f);
	fn(o, f);
	fclose(f);
	return text;
}

/* upgradectl report of a schema-1 file: mapped, then printed with schema 2's figures. */
static void test_report_schema1_prints(void **state) {
	_cleanup_json_ json_object *o = fixture("seed-lab-measured.json");
	_cleanup_free_ char *text = NULL;

	assert_int_equal(report_upgrade(o, NULL), 0);
	text = render(o, report_print);
	assert_non_null(strstr(text, "Started: 2026-11-30T00:16:34.337017Z"));
	assert_non_null(strstr(text, "(report schema 2)"));
	assert_non_null(strstr(text, "Why: blocking: fast-not-allowed: Fast handoff"));
	assert_non_null(strstr(text, "VM downtime: lab-counter-2 138.040 s +- 1.000 s (mixed)"));
	assert_non_null(strstr(text, "Init started: "));
}

/* The schema-2 seeds are the schema-1 ones as the daemon writes them now: upgradectl prints
 * both the same (text and HTML), but for the identity only the new daemon records. */
static void test_report_both_schemas_print_alike(void **state) {
	static const char *const seeds[] = { "lab-measured", "failed-rollback", "lab-critical-path",
		                             "clock-sync" };

	for (size_t i = 0; i < ELEMENTSOF(seeds); i++) {
		_cleanup_free_ char *n1 = NULL, *n2 = NULL, *t1 = NULL, *t2 = NULL, *h1 = NULL,
		                    *h2 = NULL, *anon = NULL;
		_cleanup_json_ json_object *one = NULL, *two = NULL;

		assert_true(asprintf(&n1, "seed-%s.json", seeds[i]) > 0);
		assert_true(asprintf(&n2, "seed2-%s.json", seeds[i]) > 0);
		one = fixture(n1);
		two = fixture(n2);
		validate(two);
		assert_int_equal(report_upgrade(two, NULL), 0); /* schema 2: unchanged */
		assert_int_equal(report_upgrade(one, NULL), 0);
		anon = render(one, report_print);
		assert_non_null(strstr(anon, "(machine n/a)"));
		assert_non_null(strstr(anon, "Daemon: n/a (report schema 2)"));
		/* With the identity schema 1 never recorded, the two are one report. */
		json_object_object_add(get(one, "host"), "machine_id",
		                       json_object_get(get(get(two, "host"), "machine_id")));
		json_object_object_add(get(one, "daemon"), "version",
		                       json_object_get(get(get(two, "daemon"), "version")));
		t1 = render(one, report_print);
		t2 = render(two, report_print);
		assert_non_null(strstr(t2, "(machine 5c0bd6a1e2f34b7c8d9e0f1a2b3c4d5e)"));
		assert_string_equal(t1, t2);
		h1 = render(one, report_html);
		h2 = render(two, report_html);
		assert_non_null(strstr(h2, "machine 5c0bd6a1e2f34b7c8d9e0f1a2b3c4d5e"));
		assert_string_equal(h1, h2);
	}
}

/* purgatory.relocation, when the old kernel's shutdown dump gave it: valid, printed with
 * its uncertainty, and drawn on the purgatory row; "n/a" without it. */
static void test_report_relocation_prints(void **state) {
	_cleanup_json_ json_object *o = fixture("seed2-lab-measured.json");
	_cleanup_free_ char *before = NULL, *text = NULL, *html = NULL;
	json_object *rel = json_object_new_object();

	before = render(o, report_print);
	assert_non_null(strstr(before, "Kexec relocation: n/a"));
	json_object_object_add(rel, "ns", json_object_new_int64(152300000));
	json_object_object_add(rel, "uncertainty_ns", json_object_new_int64(480000));
	json_object_object_add(rel, "start_ns", json_object_new_int64(15644952174));
	json_object_object_add(rel, "entry_ns", json_object_new_int64(15797252174));
	json_object_object_add(rel, "estimated", json_object_new_boolean(true));
	json_object_object_add(rel, "source",
	                       json_object_new_string("/sys/fs/pstore/dmesg-ramoops-0"));
	json_object_object_add(rel, "reason", json_object_new_string("the TSC is not invariant"));
	json_object_object_add(get(o, "purgatory"), "relocation", rel);
	validate(o);
	text = render(o, report_print);
	assert_non_null(strstr(text, "Kexec relocation: 152.300 ms +- 0.480 ms (estimated)"));
	html = render(o, report_html);
	assert_non_null(strstr(html, "relocation 152.3 ms (estimated)"));
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_report_iso_round_trip),
		cmocka_unit_test(test_report_machine_id),
		cmocka_unit_test(test_report_upgrade_lab),
		cmocka_unit_test(test_report_upgrade_wallclock),
		cmocka_unit_test(test_report_upgrade_refuses),
		cmocka_unit_test(test_report_schema1_prints),
		cmocka_unit_test(test_report_both_schemas_print_alike),
		cmocka_unit_test(test_report_relocation_prints),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
