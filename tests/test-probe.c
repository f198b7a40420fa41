/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "fileio.h"
#include "macros.h"
#include "probe-loader.h"

static void test_probe_parse_vcpu_comm_accepts_qemu_names(void **state) {
	unsigned idx = 99;

	assert_true(probe_parse_vcpu_comm("CPU 0/KVM", &idx));
	assert_int_equal(idx, 0);
	assert_true(probe_parse_vcpu_comm("CPU 13/TCG\n", &idx));
	assert_int_equal(idx, 13);
	assert_true(probe_parse_vcpu_comm("CPU 7/KVM", NULL));
}

static void test_probe_parse_vcpu_comm_rejects_others(void **state) {
	unsigned idx = 99;

	assert_false(probe_parse_vcpu_comm(NULL, &idx));
	assert_false(probe_parse_vcpu_comm("", &idx));
	assert_false(probe_parse_vcpu_comm("qemu-system-x86", &idx));
	assert_false(probe_parse_vcpu_comm("CPU /KVM", &idx));
	assert_false(probe_parse_vcpu_comm("CPU -1/KVM", &idx));
	assert_false(probe_parse_vcpu_comm("CPU 1/KVMX", &idx));
	assert_false(probe_parse_vcpu_comm("CPU 1/HVF", &idx));
	assert_false(probe_parse_vcpu_comm("CPU 99999999999/KVM", &idx));
	assert_false(probe_parse_vcpu_comm("IO mon_iothread", &idx));
	assert_int_equal(idx, 99); /* untouched on failure */
}

static void write_comm(const char *root, const char *tid, const char *comm) {
	_cleanup_free_ char *dir = NULL, *path = NULL;

	assert_true(asprintf(&dir, "%s/4242/task/%s", root, tid) > 0);
	assert_int_equal(mkdir_p(dir, 0755), 0);
	assert_true(asprintf(&path, "%s/comm", dir) > 0);
	assert_int_equal(write_file_atomic(path, comm, strlen(comm), 0644), 0);
}

static int cmp_pid(const void *a, const void *b) {
	return *(const pid_t *)a - *(const pid_t *)b;
}

static void test_probe_find_vcpu_threads_fake_proc(void **state) {
	char root[] = "/tmp/test-probe.XXXXXX";
	_cleanup_free_ pid_t *tids = NULL;
	_cleanup_free_ char *cmd = NULL;
	size_t n = 0;

	assert_non_null(mkdtemp(root));
	write_comm(root, "4242", "qemu-system-x86\n");
	write_comm(root, "4243", "qemu-system-x86\n");
	write_comm(root, "4250", "CPU 1/TCG\n");
	write_comm(root, "4249", "CPU 0/TCG\n");
	write_comm(root, "4251", "IO mon_iothread\n");
	write_comm(root, "notanumber", "CPU 3/TCG\n");

	assert_int_equal(probe_find_vcpu_threads(root, 4242, &tids, &n), 0);
	assert_int_equal(n, 2);
	qsort(tids, n, sizeof(pid_t), cmp_pid);
	assert_int_equal(tids[0], 4249);
	assert_int_equal(tids[1], 4250);

	/* A QEMU that is gone is an error by name, not an empty success. */
	assert_int_equal(probe_find_vcpu_threads(root, 999999, &tids, &n), -ENOENT);
	assert_int_equal(probe_find_vcpu_threads(root, 0, &tids, &n), -EINVAL);

	assert_true(asprintf(&cmd, "rm -rf '%s'", root) > 0);
	assert_int_equal(system(cmd), 0);
}

static void test_probe_names(void **state) {
	assert_string_equal(probe_unavailable_to_string(PROBE_NO_PRIVILEGE), "no-privilege");
	assert_string_equal(probe_unavailable_to_string(PROBE_NO_BTF), "no-btf");
	assert_null(probe_unavailable_to_string(_PROBE_UNAVAILABLE_MAX));
	assert_string_equal(probe_mark_to_string(PROBE_MARK_REBOOT_REQUEST), "reboot-request");
	assert_null(probe_mark_to_string(-1));
}

/* Disabled by configuration: no bpf() at all, so this runs unprivileged. */
static void test_probe_disabled_records_marks(void **state) {
	ProbeOptions o = { .disabled = true };
	_cleanup_(probe_closep) Probe *p = NULL;
	struct json_object *j = NULL, *v = NULL;
	ProbeVmResult r;
	uint32_t vm;

	assert_int_equal(probe_open(&o, &p), 0);
	assert_int_equal(probe_unavailable(p, NULL), PROBE_DISABLED);
	assert_int_equal(probe_add_vm(p, "web1", &vm), 0);
	assert_int_equal(probe_mark_at(p, vm, PROBE_MARK_PAUSE, 1000), 0);
	assert_int_equal(probe_mark_at(p, PROBE_HOST, PROBE_MARK_REBOOT_REQUEST, 2000), 0);
	assert_int_equal(probe_mark_at(p, 7, PROBE_MARK_PAUSE, 1), -EINVAL);
	assert_int_equal(probe_mark_at(p, vm, _PROBE_MARK_MAX, 1), -EINVAL);
	assert_int_equal(probe_track_tid(p, vm, 1), -EOPNOTSUPP);
	assert_int_equal(probe_track_tid(p, 5, 1), -EINVAL);
	assert_int_equal(probe_result(p, vm, &r), 0);
	assert_false(r.available);
	assert_int_equal(r.marks[PROBE_MARK_PAUSE], 1000);
	assert_int_equal(probe_result(p, 3, &r), -EINVAL);

	assert_int_equal(probe_to_json(p, &j), 0);
	assert_true(json_object_object_get_ex(j, "reason", &v));
	assert_string_equal(json_object_get_string(v), "disabled");
	assert_true(json_object_object_get_ex(j, "missing", &v));
	assert_int_equal(json_object_array_length(v), 2);
	assert_true(json_object_object_get_ex(j, "marks_ns", &v));
	assert_true(json_object_object_get_ex(v, "reboot-request", &v));
	assert_int_equal(json_object_get_uint64(v), 2000);
	json_object_put(j);
}

static void test_probe_vm_result_json_round_trip(void **state) {
	ProbeVmResult r = {
		.available = true, .n_threads = 2, .n_exited = 2, .window_ns = 1000,
		.last_ran_ns = 1500, .last_out_ns = 9000, .run_ns = 77,
		.marks = { [PROBE_MARK_PAUSE] = 1600, [PROBE_MARK_SAVE_COMPLETE] = 8000 },
	}, back = { .n_threads = 99 };
	struct json_object *j = NULL, *v;

	assert_int_equal(probe_vm_result_to_json(&r, "web1", &j), 0);
	assert_true(json_object_object_get_ex(j, "name", &v));
	assert_string_equal(json_object_get_string(v), "web1");
	assert_false(json_object_object_get_ex(j, "vcpu_first_ran_ns", &v)); /* not observed */
	assert_int_equal(probe_vm_result_from_json(j, &back), 0);
	assert_memory_equal(&r, &back, sizeof(r));
	json_object_put(j);

	/* through text, as in the handoff record */
	assert_int_equal(probe_vm_result_to_json(&r, NULL, &j), 0);
	struct json_object *parsed = json_tokener_parse(json_object_to_json_string(j));
	memset(&back, 0, sizeof(back));
	assert_int_equal(probe_vm_result_from_json(parsed, &back), 0);
	assert_memory_equal(&r, &back, sizeof(r));
	json_object_put(parsed);
	json_object_put(j);
}

static void test_probe_vm_result_json_rejects_bad(void **state) {
	static const char *const bad[] = {
		"[]",
		"{}",
		"{\"available\":1}",
		"{\"available\":true,\"threads\":\"2\"}",
		"{\"available\":true,\"threads\":-1}",
		"{\"available\":true,\"threads\":1,\"exited\":2}",
		"{\"available\":true,\"threads\":100000}",
		"{\"available\":true,\"vcpu_last_ran_ns\":1.5}",
		"{\"available\":true,\"marks_ns\":[]}",
		"{\"available\":true,\"marks_ns\":{\"pause\":\"x\"}}",
	};
	ProbeVmResult r = { .n_threads = 42 };

	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		struct json_object *j = json_tokener_parse(bad[i]);

		assert_non_null(j);
		assert_int_equal(probe_vm_result_from_json(j, &r), -EBADMSG);
		assert_int_equal(r.n_threads, 42);
		json_object_put(j);
	}
	assert_int_equal(probe_vm_result_from_json(NULL, &r), -EINVAL);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_probe_parse_vcpu_comm_accepts_qemu_names),
		cmocka_unit_test(test_probe_parse_vcpu_comm_rejects_others),
		cmocka_unit_test(test_probe_find_vcpu_threads_fake_proc),
		cmocka_unit_test(test_probe_names),
		cmocka_unit_test(test_probe_disabled_records_marks),
		cmocka_unit_test(test_probe_vm_result_json_round_trip),
		cmocka_unit_test(test_probe_vm_result_json_rejects_bad),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
