/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <sys/stat.h>

#include "fileio.h"
#include "json-util.h"
#include "macros.h"
#include "metrics.h"

static const char *const idle_describe =
        "{\"State\":\"idle\",\"RunningKernel\":\"6.1.0-57-cloud-amd64\","
        "\"Architecture\":\"x86_64\","
        "\"Backend\":{\"Name\":\"kexec_load\",\"Usable\":true},"
        "\"Updates\":[{\"id\":\"dd23816e586f7479\",\"state\":\"failed\"},"
        "{\"id\":\"0123456789abcdef\",\"state\":\"done\"}]}";

static const char *const staged_describe =
        "{\"State\":\"staged\",\"RunningKernel\":\"6.1.0-47-cloud-amd64\","
        "\"Backend\":{\"Name\":\"kexec_load\",\"Usable\":false},"
        "\"Updates\":[{\"id\":\"00000000000000aa\",\"state\":\"staged\","
        "\"kernel_version\":\"6.1.0-57-cloud-amd64\",\"kernel\":{\"path\":\"/boot/vm\\\"x\"},"
        "\"phases\":[{\"name\":\"staged\",\"realtime_usec\":1795998095544964}]}]}";

static json_object *fixture(const char *name) {
	_cleanup_free_ char *path = NULL, *data = NULL;

	assert_true(asprintf(&path, "%s/%s", REPORT_FIXTURES, name) > 0);
	assert_int_equal(read_file_full(path, 1 << 20, &data, NULL), 0);
	return json_tokener_parse(data);
}

static char *format(const char *describe, json_object *report) {
	_cleanup_(json_object_putp) json_object *d = json_tokener_parse(describe);
	char *text = NULL;

	assert_non_null(d);
	assert_int_equal(metrics_format(d, report, "1.2", &text), 0);
	assert_non_null(text);
	return text;
}

/* Every sample's family has "# HELP" and "# TYPE" lines before it, each family once. */
static void assert_families_declared(const char *text) {
	_cleanup_free_ char *copy = strdup(text);
	char *save = NULL, declared[64][96];
	size_t n = 0;

	for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char name[96];
		bool found = false;

		if (sscanf(l, "# TYPE %95s gauge", name) == 1) {
			for (size_t i = 0; i < n; i++)
				assert_string_not_equal(declared[i], name);
			assert_true(n < 64);
			strcpy(declared[n++], name);
			continue;
		}
		if (l[0] == '#')
			continue;
		assert_int_equal(sscanf(l, "%95[a-z_]", name), 1);
		for (size_t i = 0; i < n; i++)
			found = found || streq(declared[i], name);
		assert_true(found);
	}
}

static void test_metrics_lab_report(void **state) {
	_cleanup_(json_object_putp) json_object *r = fixture("seed-lab-measured.json");
	_cleanup_free_ char *t = format(idle_describe, r);

	assert_families_declared(t);
	assert_non_null(strstr(t, "upgraded_state{state=\"idle\"} 1\n"));
	assert_non_null(strstr(t, "upgraded_state{state=\"staged\"} 0\n"));
	assert_non_null(strstr(t, "upgraded_info{version=\"1.2\",running_kernel=\"6.1.0-57-cloud-"
	                          "amd64\",backend=\"kexec_load\",architecture=\"x86_64\"} 1\n"));
	assert_non_null(strstr(t, "upgraded_backend_usable 1\n"));
	assert_non_null(strstr(t, "upgraded_update_records{state=\"failed\"} 1\n"));
	assert_non_null(strstr(t, "upgraded_update_records{state=\"done\"} 1\n"));
	/* Nothing staged: no staged kernel series. */
	assert_null(strstr(t, "upgraded_staged_kernel_info"));
	assert_non_null(strstr(t, "upgraded_last_update_success 1\n"));
	assert_non_null(strstr(t, ",result=\"success\","));
	assert_non_null(strstr(t, "upgraded_last_update_handoff_mode{mode=\"verified\"} 1\n"));
	assert_non_null(strstr(t, "upgraded_last_update_handoff_mode{mode=\"fast\"} 0\n"));
	/* ns -> exact decimal seconds */
	assert_non_null(strstr(t, "upgraded_last_update_host_blackout_seconds 101.75001728\n"));
	assert_non_null(strstr(t, "upgraded_last_update_max_vm_downtime_seconds 140.98041323\n"));
	assert_non_null(
	        strstr(t, "upgraded_last_update_median_vm_downtime_seconds 139.51019695\n"));
	assert_non_null(strstr(t, "upgraded_last_update_uncertainty_seconds 1.00000616\n"));
	assert_non_null(strstr(t, "upgraded_last_update_vm_downtime_seconds{vm=\"lab-counter-1\","
	                          "source=\"mixed\"} 140.98041323\n"));
	assert_non_null(strstr(t, "upgraded_last_update_vm_downtime_seconds{vm=\"lab-counter-2\","
	                          "source=\"mixed\"} 138.03998067\n"));
	assert_non_null(strstr(t, "upgraded_last_update_purgatory_verify_seconds 3.533417695\n"));
	assert_non_null(strstr(t, "upgraded_last_update_purgatory_verified_bytes 29501955\n"));
	assert_non_null(strstr(t, "upgraded_last_update_vms 2\n"));
	/* started_at: the first stamp (staged) */
	assert_non_null(
	        strstr(t, "upgraded_last_update_start_timestamp_seconds 1795997794.337017\n"));
	assert_non_null(strstr(t, "upgraded_last_update_finish_timestamp_seconds 17959979"));
}

/* A report in schema 1 (an older daemon's) and the same in schema 2 make the same text. */
static void test_metrics_schema1_and_2_alike(void **state) {
	static const char *const seeds[] = { "lab-measured", "failed-rollback", "lab-critical-path",
		                             "clock-sync" };

	for (size_t i = 0; i < ELEMENTSOF(seeds); i++) {
		_cleanup_free_ char *n1 = NULL, *n2 = NULL, *t1 = NULL, *t2 = NULL;
		_cleanup_(json_object_putp) json_object *one = NULL, *two = NULL;

		assert_true(asprintf(&n1, "seed-%s.json", seeds[i]) > 0);
		assert_true(asprintf(&n2, "seed2-%s.json", seeds[i]) > 0);
		one = fixture(n1);
		two = fixture(n2);
		t1 = format(idle_describe, one);
		t2 = format(idle_describe, two);
		assert_non_null(strstr(t2, "upgraded_last_update_info{"));
		assert_string_equal(t1, t2);
	}
}

/* A failed update measured nothing across a kexec: its null figures have no sample at all
 * (never 0); the VMs' downtime is libvirt's wall clock (rolled back on the old kernel). */
static void test_metrics_failed_report_leaves_out_nulls(void **state) {
	_cleanup_(json_object_putp) json_object *r = fixture("seed-failed-rollback.json");
	_cleanup_free_ char *t = format(idle_describe, r);

	assert_families_declared(t);
	assert_non_null(strstr(t, "upgraded_last_update_success 0\n"));
	assert_non_null(strstr(t, ",result=\"failed\","));
	assert_null(strstr(t, "host_blackout"));
	assert_non_null(strstr(t, "upgraded_last_update_max_vm_downtime_seconds 2.020031\n"));
	assert_non_null(strstr(t, "upgraded_last_update_median_vm_downtime_seconds 1.816542\n"));
	assert_non_null(strstr(t, "upgraded_last_update_vm_downtime_seconds{vm=\"vm-b\","
	                          "source=\"libvirt-wallclock\"} 2.020031\n"));
	assert_null(strstr(t, "purgatory_verify_seconds"));
	assert_non_null(strstr(t, "upgraded_last_update_purgatory_verified_bytes 68096\n"));
	/* staged 1795998095544964 us (the first stamp), failed 1795998098272129 us */
	assert_non_null(
	        strstr(t, "upgraded_last_update_start_timestamp_seconds 1795998095.544964\n"));
	assert_non_null(
	        strstr(t, "upgraded_last_update_finish_timestamp_seconds 1795998098.272129\n"));
}

/* A staged update: its kernel as labels (escaped), the daemon's state, no report yet. */
static void test_metrics_staged_no_report(void **state) {
	_cleanup_free_ char *t = format(staged_describe, NULL);

	assert_families_declared(t);
	assert_non_null(strstr(t, "upgraded_state{state=\"staged\"} 1\n"));
	assert_non_null(strstr(t, "upgraded_state{state=\"idle\"} 0\n"));
	assert_non_null(strstr(t, "upgraded_backend_usable 0\n"));
	assert_non_null(strstr(t, "upgraded_staged_kernel_info{id=\"00000000000000aa\",version=\"6."
	                          "1.0-57-cloud-amd64\",path=\"/boot/vm\\\"x\"} 1\n"));
	assert_non_null(strstr(t, "upgraded_staged_timestamp_seconds 1795998095.544964\n"));
	assert_null(strstr(t, "upgraded_last_update"));
}

/* Schema 2: the ISO times, each VM's one downtime inside vms[]; label values escape \, "
 * and line feeds. */
static void test_metrics_iso_times_and_escaping(void **state) {
	_cleanup_(json_object_putp) json_object *r = json_tokener_parse(
	        "{\"schema\":2,\"id\":\"a\\\\b\",\"result\":\"success\",\"started_at\":"
	        "\"2026-12-01T15:04:47.5Z\",\"finished_at\":\"2026-12-01T15:05:00Z\",\"stamps\":"
	        "[{\"name\":\"commit-requested\",\"at\":\"2026-12-01T15:04:48Z\"}],\"vms\":[{"
	        "\"name\":\"x\\ny\",\"downtime\":{\"ns\":-1500000,\"source\":\"marks\"}}],"
	        "\"totals\":{\"host_blackout_ns\":1000000000}}");
	_cleanup_free_ char *t = format(idle_describe, r);

	assert_families_declared(t);
	assert_non_null(strstr(t, "id=\"a\\\\b\""));
	assert_non_null(strstr(t, "upgraded_last_update_start_timestamp_seconds 1796137487.5\n"));
	assert_non_null(strstr(t, "upgraded_last_update_finish_timestamp_seconds 1796137500\n"));
	assert_non_null(strstr(t, "{vm=\"x\\ny\",source=\"marks\"} -0.0015\n"));
	assert_non_null(strstr(t, "upgraded_last_update_host_blackout_seconds 1\n"));
}

/* Whatever JSON the documents hold (wrong types, not objects), the text is made. */
static void test_metrics_odd_shapes(void **state) {
	_cleanup_(json_object_putp) json_object *r = json_tokener_parse(
	        "{\"schema\":1,\"totals\":[1],\"vm_downtime\":{\"x\":1},\"vms\":7,"
	        "\"stamps\":[3,{\"name\":7}],\"purgatory\":\"x\"}");
	_cleanup_free_ char *t1 = format("[1,2]", r), *t2 = NULL;

	assert_families_declared(t1);
	assert_int_equal(metrics_format(NULL, NULL, NULL, &t2), 0);
	assert_families_declared(t2);
	assert_non_null(strstr(t2, "upgraded_state{state=\"idle\"} 1\n"));
}

static void test_metrics_write(void **state) {
	char dir[] = "/tmp/test-metrics.XXXXXX", path[64], missing[80];
	_cleanup_free_ char *data = NULL;
	struct dirent *de;
	size_t n = 0;
	DIR *d;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/" METRICS_FILE_NAME, dir);
	assert_int_equal(metrics_write(dir, "a 1\n"), 0);
	assert_int_equal(metrics_refresh(dir, idle_describe, "not json", "1"), 0);
	assert_int_equal(read_file_full(path, 4096, &data, NULL), 0);
	assert_non_null(strstr(data, "upgraded_state{state=\"idle\"} 1\n"));
	assert_null(strstr(data, "upgraded_last_update"));
	/* Only the file itself: no temporary left behind. */
	assert_non_null(d = opendir(dir));
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	assert_int_equal(n, 1);
	/* node_exporter not installed: its directory is not created. */
	snprintf(missing, sizeof(missing), "%s/none", dir);
	assert_int_equal(metrics_write(missing, "a 1\n"), -ENOENT);
	assert_int_equal(metrics_write(path, "a 1\n"), -ENOTDIR);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_metrics_lab_report),
		cmocka_unit_test(test_metrics_schema1_and_2_alike),
		cmocka_unit_test(test_metrics_failed_report_leaves_out_nulls),
		cmocka_unit_test(test_metrics_staged_no_report),
		cmocka_unit_test(test_metrics_iso_times_and_escaping),
		cmocka_unit_test(test_metrics_odd_shapes),
		cmocka_unit_test(test_metrics_write),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
