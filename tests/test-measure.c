/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The measurement wiring (daemon/measure/measure.c) and the report it fills, against a
 * temporary root with fake /proc/cpuinfo, /proc/cmdline and /dev/kmsg files and
 * scripted clock samples: TSC timebase, realtime fallback, purgatory stamps
 * present and missing, the probe unavailable. Every report is validated against
 * docs/report.schema.json. Also the journal entry's fields (captured, never sent); the
 * VM API's marks are test-measure-vm.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <unistd.h>

#include "context-private.h" /* the tests look inside the state machine */
#include "daemon-test-util.h"
#include "json-util.h"
#include "measure.h"
#include "path-util.h"
#include "report.h"
#include "string-util.h"

/* The measurement's step, as measure_attach() plugged it in. */
#define MEASURE_STEP(c) (&(c)->steps[CONTEXT_STEP_MEASURE])

#define OLD_BOOT "0000000000000000000000000000000a"
#define NEW_BOOT "0000000000000000000000000000000b"
#define S        UINT64_C(1000000000)

void measure_set_sample_func(Measure *m, int (*f)(TimebaseSample *ret));
int measure_kmsg_format(const char *event, const char *id, char *buf, size_t size);

/* Scripted clocks: a 2 GHz TSC counting from the old kernel's boot (TSC = 2 x the old
 * kernel's CLOCK_MONOTONIC); the reboot request (t = 0) is at old monotonic 110 s, the
 * handoff record was written 100 ms before it; the new kernel's CLOCK_MONOTONIC zero
 * is at t = 3 s and the daemon starts at new monotonic 5 s (t = 8 s). */
static const TimebaseSample samples[] = {
	/* commit */
	{ .tsc = 2 * 100 * S, .realtime_ns = 1000 * S, .monotonic_ns = 100 * S, .skew_ns = 50 },
	/* handoff record */
	{ .tsc = 2 * (110 * S - S / 10),
	  .realtime_ns = 1010 * S - S / 10,
	  .monotonic_ns = 110 * S - S / 10,
	  .skew_ns = 50 },
	/* reboot request */
	{ .tsc = 2 * 110 * S, .realtime_ns = 1010 * S, .monotonic_ns = 110 * S, .skew_ns = 50 },
	/* daemon start on the new kernel (the panic test: the crash kernel's reboot request) */
	{ .tsc = 2 * 118 * S, .realtime_ns = 1018 * S, .monotonic_ns = 5 * S, .skew_ns = 50 },
	/* the panic test only: daemon start on the staged kernel after the second kexec */
	{ .tsc = 2 * 125 * S, .realtime_ns = 1025 * S, .monotonic_ns = 5 * S, .skew_ns = 50 },
};
static size_t n_sampled;

static int fake_sample(TimebaseSample *ret) {
	assert_true(n_sampled < ELEMENTSOF(samples));
	*ret = samples[n_sampled++];
	return 0;
}

typedef struct World {
	char *root;
	const char *cpuflags;
	const char *cmdline;
	bool kmsg;
	bool request_lost;         /* the "handoff-requested" write did not reach the disk */
	const char *booted_kernel; /* the old kernel came back: the update failed */
	/* The old kernel's probe saw web1's vCPU threads: how many, and when the last one
	 * stopped (old CLOCK_MONOTONIC; 0: never). The probe itself is disabled in these
	 * tests, so its figures are put into the handoff record as the real one would. */
	bool old_probe_ran;
	unsigned old_threads;
	uint64_t old_last_ran_ns;
	bool panic; /* the old kernel crashed; the crash kernel requested the kexec */
	/* The reboot-request mark reached the kernel log this long after the sample (ns;
	 * 0: no mark). The tests' /dev/kmsg is a plain file, which the daemon never writes
	 * to, so the record gets the moment the real write would have given it. */
	uint64_t mark_latency_ns;
	/* The restore's connection opened at this new CLOCK_MONOTONIC (ns; 0: no stamp). */
	uint64_t libvirt_answered_ns;
	json_object *record; /* the measurement record as the new kernel read it */
} World;

static void put(const char *root, const char *rel, const char *text) {
	_cleanup_free_ char *p = NULL, *d = NULL;

	assert_true(asprintf(&p, "%s%s", root, rel) > 0);
	d = strdup(p);
	*strrchr(d, '/') = 0;
	assert_int_equal(mkdir_p(d, 0755), 0);
	assert_int_equal(write_file_atomic(p, text, strlen(text), 0644), 0);
}

static const char kmsg[] = "6,0,0,-;Linux version 6.1.0-57-cloud-amd64\n"
                           "6,1,1000,-;tsc: Refined TSC clocksource calibration: 2000.000 MHz\n"
                           "6,2,1200,-;clocksource: Switched to clocksource tsc\n"
                           "6,3,301200,-;ACPI: stall ended here\n"
                           "6,4,400000,-;Run /sbin/init as init process\n";

/* The report as written (schema 2: report_finish() on a copy; the tests read the assembled
 * layout) holds to docs/report.schema.json. */
static void validate(const char *root, json_object *assembled) {
	_cleanup_free_ char *path = NULL, *cmd = NULL;
	_cleanup_json_ json_object *o = NULL;
	const char *text;

	assert_int_equal(json_object_deep_copy(assembled, &o, NULL), 0);
	assert_int_equal(report_finish(o, root), 0);
	text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);

	assert_true(asprintf(&path, "%s/report.json", root) > 0);
	assert_int_equal(write_file_atomic(path, text, strlen(text), 0644), 0);
	assert_true(asprintf(&cmd, "python3 '%s' '%s' '%s'", VALIDATE_REPORT, REPORT_SCHEMA, path) >
	            0);
	assert_int_equal(system(cmd), 0);
}

static json_object *jget(json_object *o, const char *a, const char *b) {
	json_object *v = NULL;

	assert_true(json_object_object_get_ex(o, a, &v));
	if (b)
		assert_true(json_object_object_get_ex(v, b, &v));
	return v;
}

static bool has_missing(json_object *o, const char *figure, const char *reason_part) {
	json_object *a = jget(o, "missing", NULL);

	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *m = json_object_array_get_idx(a, i);
		if (streq(json_object_get_string(jget(m, "figure", NULL)), figure) &&
		    (!reason_part ||
		     strstr(json_object_get_string(jget(m, "reason", NULL)), reason_part)))
			return true;
	}
	return false;
}

static void set_stamp(Update *u, const char *name, const char *boot, uint64_t mono_ns) {
	assert_int_equal(update_add_stamp(u, name, false, boot), 0);
	u->stamps[u->n_stamps - 1].monotonic_usec = mono_ns / 1000;
}

/* Runs one update through both kernels' measurement; returns its report. */
static json_object *run_update(World *w) {
	_cleanup_(context_freep) Context *c = NULL;
	_cleanup_(measure_freep) Measure *m = NULL;
	json_object *o = NULL;
	Update *u;
	uint32_t vm = 0;

	if (w->cpuflags)
		put(w->root, "/proc/cpuinfo", w->cpuflags);
	put(w->root, "/proc/cmdline", w->cmdline ?: "root=/dev/vda1 ro\n");
	if (w->kmsg)
		put(w->root, "/dev/kmsg", kmsg);
	n_sampled = 0;

	assert_int_equal(context_new(w->root, &kexec_backend_record, &c), 0);
	u = update_new("0123456789abcdef");
	assert_non_null(u);
	c->updates = calloc(1, sizeof(Update *));
	c->updates[0] = u;
	c->n_updates = 1;
	assert_int_equal(update_set_string(&u->kernel.path, "/boot/vmlinuz-new"), 0);
	memset(u->kernel.sha256, 'a', 64);
	u->kernel.size = 1000;
	assert_int_equal(update_set_string(&u->kernel_version, "6.1.0-57-cloud-amd64"), 0);
	assert_int_equal(update_set_string(&u->backend, "record"), 0);
	u->handoff = HANDOFF_MODE_VERIFIED;
	assert_int_equal(update_set_string(&u->handoff_reason, "planned update;blocking: x: y"), 0);
	assert_int_equal(update_set_string(&u->cmdline, "root=/dev/vda1 ro"), 0);

	/* Old kernel: commit, one VM paused at t = -5 s, handoff. */
	memcpy(c->boot_id, OLD_BOOT, 33);
	assert_int_equal(
	        measure_new(&(MeasureOptions){ .root = w->root, .probe_disabled = true }, &m), 0);
	measure_set_sample_func(m, fake_sample);
	assert_int_equal(measure_attach(m, c), 0);
	set_stamp(u, "commit-requested", OLD_BOOT, 100 * S);
	assert_string_equal(MEASURE_STEP(c)->vt->hooks[HOOK_PRE_HANDOFF].key, "measure-open");
	assert_int_equal(MEASURE_STEP(c)->vt->hooks[HOOK_PRE_HANDOFF].func(
	                         c, u, MEASURE_STEP(c)->userdata, NULL),
	                 0);
	assert_int_equal(measure_mark(m, "web1", PROBE_MARK_PAUSE), 0);
	assert_int_equal(probe_mark_at(measure_probe(m), vm, PROBE_MARK_PAUSE, 105 * S), 0);
	assert_int_equal(update_set_string(&u->handoff_boot_id, OLD_BOOT), 0);
	MEASURE_STEP(c)->vt->handoff_prepare(c, u, MEASURE_STEP(c)->userdata);
	if (w->old_probe_ran) {
		json_object *vms, *v;
		assert_true(json_object_object_get_ex(jget(u->measure, "old_probe", NULL), "vms",
		                                      &vms));
		v = json_object_array_get_idx(vms, 0);
		json_object_object_add(v, "available", json_object_new_boolean(true));
		json_object_object_add(v, "threads", json_object_new_int(w->old_threads));
		if (w->old_last_ran_ns)
			json_object_object_add(v, "vcpu_last_ran_ns",
			                       json_object_new_uint64(w->old_last_ran_ns));
	}
	if (w->request_lost)
		n_sampled++;
	else
		MEASURE_STEP(c)->vt->handoff_request(c, u, MEASURE_STEP(c)->userdata);
	if (w->panic) {
		/* The crash kernel: the old figures set aside, its own reboot request. */
		MEASURE_STEP(c)->vt->panic_takeover(c, u, MEASURE_STEP(c)->userdata);
		MEASURE_STEP(c)->vt->handoff_request(c, u, MEASURE_STEP(c)->userdata);
	}
	if (w->mark_latency_ns)
		json_object_object_add(u->measure, "request_mark_written_ns",
		                       json_object_new_uint64(110 * S + w->mark_latency_ns));
	u->state = UPDATE_COMMITTING;
	m = measure_free(m);

	/* The record travels through JSON, as on disk. */
	{
		json_object *j = NULL;
		Update *copy = NULL;
		assert_int_equal(update_to_json(u, &j), 0);
		assert_int_equal(update_from_json(j, &copy), 0);
		json_object_put(j);
		update_free(u);
		c->updates[0] = u = copy;
	}
	json_object_put(w->record);
	w->record = json_object_get(u->measure);

	/* New kernel: daemon start at t = 8 s, resume at new monotonic 6 s (t = 9 s). */
	memcpy(c->boot_id, NEW_BOOT, 33);
	assert_int_equal(
	        measure_new(&(MeasureOptions){ .root = w->root, .probe_disabled = true }, &m), 0);
	measure_set_sample_func(m, fake_sample);
	c->steps[CONTEXT_STEP_MEASURE] =
	        (ContextStep){}; /* the new kernel's daemon plugs its own */
	assert_int_equal(measure_attach(m, c), 0);
	assert_int_equal(measure_daemon_start(m, c), 1);
	assert_int_equal(measure_mark(m, "web1", PROBE_MARK_RESUME), 0);
	assert_int_equal(probe_mark_at(measure_probe(m), vm, PROBE_MARK_RESUME, 6 * S), 0);
	set_stamp(u, "booted", NEW_BOOT, 5 * S);
	if (w->libvirt_answered_ns)
		set_stamp(u, "libvirt-answered", NEW_BOOT, w->libvirt_answered_ns);
	set_stamp(u, "completed", NEW_BOOT, 7 * S);
	u->state = UPDATE_DONE;
	if (w->booted_kernel) {
		assert_int_equal(update_set_string(&u->booted_kernel, w->booted_kernel), 0);
		assert_int_equal(update_set_string(&u->error, "booted the old kernel"), 0);
		u->state = UPDATE_FAILED;
	}

	assert_int_equal(report_build(u, true, &o), 0);
	assert_int_equal(MEASURE_STEP(c)->vt->report_extend(c, u, o, MEASURE_STEP(c)->userdata), 0);
	validate(w->root, o);
	return o;
}

static int setup(void **state) {
	World *w = calloc(1, sizeof(World));
	w->root = test_mkroot();
	assert_non_null(w->root);
	*state = w;
	return 0;
}

static int teardown(void **state) {
	World *w = *state;
	test_rmroot(w->root);
	json_object_put(w->record);
	free(w);
	return 0;
}

static void test_measure_tsc_timebase(void **state) {
	World *w = *state;
	json_object *o;

	w->cpuflags = "flags\t\t: fpu tsc constant_tsc nonstop_tsc\n";
	w->kmsg = true;
	o = run_update(w);
	assert_string_equal(json_object_get_string(jget(o, "timebase", "timebase")), "tsc");
	assert_int_equal(json_object_get_int64(jget(o, "totals", "host_blackout_ns")), 8 * S);
	/* 8 s at 100 ppm + skews + 1 us */
	assert_true(json_object_get_int64(jget(o, "totals", "uncertainty_ns")) < 1000000);
	assert_int_equal(json_object_get_int64(jget(o, "totals", "max_vm_downtime_ns")), 14 * S);
	assert_int_equal(json_object_get_int64(jget(o, "totals", "median_vm_downtime_ns")), 14 * S);
	assert_string_equal(json_object_get_string(
	                            jget(json_object_array_get_idx(jget(o, "vm_downtime", NULL), 0),
	                                 "downtime_source", NULL)),
	                    "marks");
	/* web1 on the report's axis: paused at old 105 s (t = -5 s), resumed at new 6 s
	 * (t = 3 s + 6 s) */
	assert_int_equal(json_object_get_int64(
	                         jget(json_object_array_get_idx(jget(o, "vm_downtime", NULL), 0),
	                              "stopped_ns", NULL)),
	                 -5 * (int64_t)S);
	assert_int_equal(json_object_get_int64(
	                         jget(json_object_array_get_idx(jget(o, "vm_downtime", NULL), 0),
	                              "running_ns", NULL)),
	                 9 * S);
	assert_string_equal(json_object_get_string(jget(o, "phase_axis", NULL)), "reboot-request");
	assert_string_equal(
	        json_object_get_string(json_object_array_get_idx(jget(o, "handoff", "reasons"), 1)),
	        "blocking: x: y");
	/* phases: pre-handoff -10 s -> 0, handoff 0 -> 3 s, boot-to-daemon 3 -> 8 s,
	 * post-boot 8 -> 10 s */
	assert_int_equal(json_object_array_length(jget(o, "phases", NULL)), 4);
	assert_int_equal(
	        json_object_get_int64(jget(json_object_array_get_idx(jget(o, "phases", NULL), 0),
	                                   "start_ns", NULL)),
	        -10 * (int64_t)S);
	assert_int_equal(
	        json_object_get_int64(jget(json_object_array_get_idx(jget(o, "phases", NULL), 3),
	                                   "duration_ns", NULL)),
	        2 * S);
	assert_int_equal(json_object_get_int64(jget(o, "boot", "init_us")), 400000);
	/* kexec_file-style handoff: no stamps, the verify time is missing with the reason */
	assert_true(json_object_is_type(jget(o, "purgatory", "verify_ns"), json_type_null));
	assert_true(has_missing(o, "purgatory_verify", "upgraded.stamps="));
	json_object_put(o);
}

/* Returns phase i of o's phases, checking its name. */
static json_object *phase_at(json_object *o, size_t i, const char *name) {
	json_object *p = json_object_array_get_idx(jget(o, "phases", NULL), i);

	assert_non_null(p);
	assert_string_equal(json_object_get_string(jget(p, "name", NULL)), name);
	return p;
}

static void test_measure_libvirt_wait(void **state) {
	World *w = *state;
	json_object *o, *p;

	/* Daemon start at t = 8 s (new 5 s), libvirt answered at new 6.5 s (t = 9.5 s),
	 * completed at new 7 s (t = 10 s): the wait is a phase of its own. */
	w->cpuflags = "flags\t\t: fpu tsc constant_tsc nonstop_tsc\n";
	w->kmsg = true;
	w->libvirt_answered_ns = 6 * S + S / 2;
	o = run_update(w);
	assert_int_equal(json_object_array_length(jget(o, "phases", NULL)), 5);
	p = phase_at(o, 3, "libvirt-wait");
	assert_int_equal(json_object_get_int64(jget(p, "start_ns", NULL)), 8 * (int64_t)S);
	assert_int_equal(json_object_get_int64(jget(p, "duration_ns", NULL)), 3 * (int64_t)S / 2);
	assert_string_equal(json_object_get_string(jget(p, "kernel", NULL)), "new");
	p = phase_at(o, 4, "post-boot");
	assert_int_equal(json_object_get_int64(jget(p, "start_ns", NULL)), 9 * S + S / 2);
	assert_int_equal(json_object_get_int64(jget(p, "end_ns", NULL)), 10 * (int64_t)S);
	json_object_put(o);

	/* A stamp before the daemon's start (a clock that cannot be) splits nothing. */
	w->libvirt_answered_ns = 4 * S;
	o = run_update(w);
	assert_int_equal(json_object_array_length(jget(o, "phases", NULL)), 4);
	p = phase_at(o, 3, "post-boot");
	assert_int_equal(json_object_get_int64(jget(p, "start_ns", NULL)), 8 * (int64_t)S);
	json_object_put(o);
}

static void test_measure_request_sample_lost(void **state) {
	World *w = *state;
	json_object *o;

	/* t = 0 falls back to the handoff record's sample, 100 ms earlier */
	w->cpuflags = "flags\t\t: fpu tsc constant_tsc nonstop_tsc\n";
	w->kmsg = true;
	w->request_lost = true;
	o = run_update(w);
	assert_int_equal(json_object_get_int64(jget(o, "totals", "host_blackout_ns")),
	                 8 * S + S / 10);
	assert_int_equal(json_object_get_int64(jget(o, "totals", "max_vm_downtime_ns")), 14 * S);
	json_object_put(o);
}

static void test_measure_realtime_fallback(void **state) {
	World *w = *state;
	json_object *o;

	w->cpuflags = "flags\t\t: fpu tsc\n"; /* no invariant TSC: the lab under TCG */
	w->kmsg = true;
	o = run_update(w);
	assert_string_equal(json_object_get_string(jget(o, "timebase", "timebase")), "realtime");
	assert_true(json_object_get_int64(jget(o, "totals", "uncertainty_ns")) >= (int64_t)S);
	assert_int_equal(json_object_get_int64(jget(o, "totals", "host_blackout_ns")), 8 * S);
	json_object_put(o);
}

static void test_measure_stamps_present(void **state) {
	World *w = *state;
	_cleanup_free_ char *cmdline = NULL;
	json_object *o;

	/* entry at t = 1 s, verified at 1.3 s, jump at 1.31 s (TSC = 220e9 + 2 * t) */
	assert_true(asprintf(&cmdline,
	                     "root=/dev/vda1 upgraded.stamps=%016" PRIx64 ",%016" PRIx64
	                     ",%016" PRIx64 ",v,a\n",
	                     220 * S + 2 * S, 220 * S + 2600000000, 220 * S + 2620000000) > 0);
	w->cpuflags = "flags\t\t: fpu tsc constant_tsc nonstop_tsc\n";
	w->cmdline = cmdline;
	w->kmsg = true;
	o = run_update(w);
	assert_int_equal(json_object_get_int64(jget(o, "purgatory", "verify_ns")), 300000000);
	assert_string_equal(json_object_get_string(jget(o, "purgatory", "impl")), "avx2");
	assert_false(json_object_get_boolean(jget(o, "purgatory", "verify_estimated")));
	assert_false(has_missing(o, "purgatory_verify", NULL));
	json_object_put(o);
}

/* The old kernel's shutdown dump in pstore (as systemd-pstore leaves it): its
 * "Starting new kernel" 0.5 s after the daemon's mark, purgatory entered at t = 1 s,
 * the mark 40 us after the sample: the relocation slice is 0.5 s - 20 us. Without the
 * dump, and without stamps, the report says why it has none. */
static void test_measure_relocation(void **state) {
	static const char dump[] = "Shutdown#1 Part1\n"
	                           "<5>[  500.000000] upgraded: reboot-request update="
	                           "0123456789abcdef\n"
	                           "<6>[  500.200000] systemd-shutdown[1]: Rebooting with kexec.\n"
	                           "<5>[  500.500000] kexec_core: Starting new kernel\n";
	World *w = *state;
	_cleanup_free_ char *cmdline = NULL, *dir = NULL;
	json_object *o, *rel;

	assert_true(asprintf(&cmdline,
	                     "root=/dev/vda1 upgraded.stamps=%016" PRIx64 ",%016" PRIx64
	                     ",%016" PRIx64 ",v,x\n",
	                     220 * S + 2 * S, 220 * S + 2600000000, 220 * S + 2620000000) > 0);
	w->cpuflags = "flags\t\t: fpu tsc constant_tsc nonstop_tsc\n";
	w->cmdline = cmdline;
	w->kmsg = true;
	w->mark_latency_ns = 40000;

	o = run_update(w);
	assert_true(has_missing(o, "relocation", "pstore"));
	assert_false(json_object_object_get_ex(jget(o, "purgatory", NULL), "relocation", NULL));
	json_object_put(o);

	put(w->root, "/var/lib/systemd/pstore/1700000000/dmesg.txt", dump);
	o = run_update(w);
	rel = jget(o, "purgatory", "relocation");
	assert_int_equal(json_object_get_int64(jget(rel, "ns", NULL)), S / 2 - 20000);
	assert_int_equal(json_object_get_int64(jget(rel, "start_ns", NULL)), S / 2 + 20000);
	assert_int_equal(json_object_get_int64(jget(rel, "entry_ns", NULL)), S);
	assert_false(json_object_get_boolean(jget(rel, "estimated", NULL)));
	assert_string_equal(json_object_get_string(jget(rel, "source", NULL)),
	                    "/var/lib/systemd/pstore/1700000000/dmesg.txt");
	assert_true(json_object_is_type(jget(rel, "reason", NULL), json_type_null));
	assert_false(has_missing(o, "relocation", NULL));
	assert_string_equal(json_object_get_string(jget(o, "purgatory", "impl")), "sse2");
	/* On trusted stamps the breakdown has it: shutdown ends where it starts. */
	{
		json_object *ph = jget(o, "phases", NULL), *a = NULL, *b = NULL;

		for (size_t i = 0; i + 1 < json_object_array_length(ph); i++)
			if (streq(json_object_get_string(
			                  jget(json_object_array_get_idx(ph, i), "name", NULL)),
			          "shutdown")) {
				a = json_object_array_get_idx(ph, i);
				b = json_object_array_get_idx(ph, i + 1);
			}
		assert_non_null(a);
		assert_string_equal(json_object_get_string(jget(b, "name", NULL)), "relocation");
		assert_int_equal(json_object_get_int64(jget(a, "start_ns", NULL)), 0);
		assert_int_equal(json_object_get_int64(jget(a, "end_ns", NULL)), S / 2 + 20000);
		assert_int_equal(json_object_get_int64(jget(b, "start_ns", NULL)), S / 2 + 20000);
		assert_int_equal(json_object_get_int64(jget(b, "end_ns", NULL)), S);
		assert_int_equal(json_object_get_int64(jget(b, "duration_ns", NULL)),
		                 S / 2 - 20000);
		assert_string_equal(json_object_get_string(
		                            jget(json_object_array_get_idx(ph, 0), "name", NULL)),
		                    "pre-handoff");
	}
	json_object_put(o);

	/* Still in /sys/fs/pstore (systemd-pstore ran before ramoops registered), and the
	 * archived copy gone. */
	assert_true(asprintf(&dir, "rm -rf '%s/var/lib/systemd/pstore'", w->root) > 0);
	assert_int_equal(system(dir), 0);
	put(w->root, "/sys/fs/pstore/dmesg-ramoops-0", dump);
	o = run_update(w);
	rel = jget(o, "purgatory", "relocation");
	assert_string_equal(json_object_get_string(jget(rel, "source", NULL)),
	                    "/sys/fs/pstore/dmesg-ramoops-0");
	json_object_put(o);

	/* No stamps (kexec_file_load's purgatory): nothing to measure against. */
	w->cmdline = NULL;
	o = run_update(w);
	assert_true(has_missing(o, "relocation", "entry stamp"));
	json_object_put(o);

	/* No mark moment in the record (an older daemon's record). */
	w->cmdline = cmdline;
	w->mark_latency_ns = 0;
	o = run_update(w);
	assert_true(has_missing(o, "relocation", "mark"));
	json_object_put(o);
}

static void test_measure_refused_handoff(void **state) {
	World *w = *state;
	json_object *o;

	/* Purgatory refused the staged kernel and reset: the old kernel runs, its
	 * command line has no stamps, and the report says why instead of blaming
	 * the backend. */
	w->cpuflags = "flags\t\t: fpu tsc\n";
	w->booted_kernel = "6.1.0-47-cloud-amd64";
	o = run_update(w);
	assert_string_equal(json_object_get_string(jget(o, "result", NULL)), "failed");
	assert_true(json_object_is_type(jget(o, "purgatory", "verify_ns"), json_type_null));
	assert_true(has_missing(o, "purgatory_verify",
	                        "the staged kernel did not boot (running 6.1.0-47-cloud-amd64)"));
	assert_false(has_missing(o, "purgatory_verify", "upgraded.stamps="));
	json_object_put(o);
}

static void test_measure_probe_unavailable_and_no_kmsg(void **state) {
	World *w = *state;
	json_object *o;

	w->cpuflags = NULL; /* no /proc/cpuinfo at all */
	w->kmsg = false;
	o = run_update(w);
	assert_false(json_object_get_boolean(jget(jget(o, "probe", "old"), "available", NULL)));
	assert_true(has_missing(o, "vcpu_last_ran", "disabled"));
	assert_true(has_missing(o, "vcpu_first_ran", "disabled"));
	assert_true(has_missing(o, "boot_analysis", "/dev/kmsg"));
	assert_true(json_object_is_type(jget(o, "boot", NULL), json_type_null));
	json_object_put(o);
}

static json_object *vm_downtime0(json_object *o, const char *key) {
	return jget(json_object_array_get_idx(jget(o, "vm_downtime", NULL), 0), key, NULL);
}

static void test_measure_vm_downtime_sources(void **state) {
	World *w = *state;
	json_object *o;

	/* The old probe saw the last vCPU run at 104 s (t = -6 s), the new one was not
	 * running: old end from the probe, new end from the resume mark. */
	w->cpuflags = "flags\t\t: fpu tsc constant_tsc nonstop_tsc\n";
	w->kmsg = true;
	w->old_probe_ran = true;
	w->old_threads = 1;
	w->old_last_ran_ns = 104 * S;
	o = run_update(w);
	assert_string_equal(json_object_get_string(vm_downtime0(o, "downtime_source")), "mixed");
	assert_int_equal(json_object_get_int64(vm_downtime0(o, "stopped_ns")), -6 * (int64_t)S);
	assert_int_equal(json_object_get_int64(vm_downtime0(o, "downtime_ns")), 15 * S);
	assert_false(has_missing(o, "vcpu_last_ran", "web1:"));
	json_object_put(o);

	/* Tracked, but its threads were never seen stopping: the pause mark stands in and
	 * the report says why. */
	w->old_last_ran_ns = 0;
	o = run_update(w);
	assert_string_equal(json_object_get_string(vm_downtime0(o, "downtime_source")), "marks");
	assert_int_equal(json_object_get_int64(vm_downtime0(o, "downtime_ns")), 14 * S);
	assert_true(has_missing(o, "vcpu_last_ran", "web1: its vCPUs never stopped"));
	json_object_put(o);

	/* No vCPU thread found at all (no QEMU pid file, other driver). */
	w->old_threads = 0;
	o = run_update(w);
	assert_string_equal(json_object_get_string(vm_downtime0(o, "downtime_source")), "marks");
	assert_true(has_missing(o, "vcpu_last_ran", "web1: no vCPU thread was tracked"));
	json_object_put(o);
}

static char **captured;
static int capture(const struct iovec *iov, int n) {
	for (int i = 0; i < n; i++) {
		_cleanup_free_ char *s = strndup(iov[i].iov_base, iov[i].iov_len);
		assert_int_equal(strv_extend(&captured, s), 0);
	}
	return 0;
}

static bool captured_has(const char *field) {
	STRV_FOREACH (f, captured)
		if (streq(*f, field))
			return true;
	return false;
}

static void test_measure_journal_fields(void **state) {
	World *w = *state;
	json_object *o;

	w->cpuflags = "flags\t\t: fpu tsc constant_tsc nonstop_tsc\n";
	w->kmsg = true;
	o = run_update(w);
	report_journal_sender = capture;
	assert_int_equal(report_journal(o, "/var/lib/upgraded/reports/0123456789abcdef.json"), 0);
	assert_true(captured_has("MESSAGE_ID=" REPORT_MESSAGE_ID));
	assert_true(captured_has("UPGRADED_ID=0123456789abcdef"));
	assert_true(captured_has("UPGRADED_RESULT=success"));
	assert_true(captured_has("UPGRADED_BLACKOUT_USEC=8000000"));
	assert_true(captured_has("UPGRADED_MAX_VM_DOWNTIME_USEC=14000000"));
	assert_true(captured_has("UPGRADED_TIMEBASE=tsc"));
	assert_true(captured_has("UPGRADED_MODE=verified"));
	strv_free(captured);
	captured = NULL;
	json_object_put(o);
}

static void test_measure_report_without_measurement(void **state) {
	World *w = *state;
	_cleanup_(update_freep) Update *u = update_new("0123456789abcdef");
	json_object *o = NULL;

	assert_int_equal(update_set_string(&u->kernel.path, "/boot/vmlinuz-new"), 0);
	memset(u->kernel.sha256, 'b', 64);
	u->kernel.size = 1;
	assert_int_equal(update_set_string(&u->kernel_version, "6.1.0-57-cloud-amd64"), 0);
	assert_int_equal(update_set_string(&u->backend, "kexec_file"), 0);
	assert_int_equal(update_set_string(&u->cmdline, ""), 0);
	assert_int_equal(update_add_stamp(u, "failed", false, OLD_BOOT), 0);
	u->state = UPDATE_FAILED;
	assert_int_equal(update_set_string(&u->error, "x"), 0);
	assert_int_equal(report_build(u, false, &o), 0);
	validate(w->root, o);
	assert_true(has_missing(o, "measurement", NULL));
	/* a journal entry without figures leaves them out instead of inventing them */
	report_journal_sender = capture;
	assert_int_equal(report_journal(o, "/x.json"), 0);
	STRV_FOREACH (f, captured)
		assert_null(strstr(*f, "UPGRADED_BLACKOUT_USEC"));
	assert_true(captured_has("PRIORITY=3"));
	strv_free(captured);
	captured = NULL;
	/* What purgatory hashes: the staged files, nothing in fast mode. */
	assert_int_equal(json_object_get_int64(jget(o, "purgatory", "bytes")), 1);
	json_object_put(o);
	u->handoff = HANDOFF_MODE_FAST;
	assert_int_equal(report_build(u, false, &o), 0);
	validate(w->root, o);
	assert_int_equal(json_object_get_int64(jget(o, "purgatory", "bytes")), 0);
	json_object_put(o);
}

/* The panic path: the old kernel's samples and probe figures stay in the record
 * under crashed_kernel, off the second kexec's axis; the report says why the
 * old probe figures are missing. */
static void test_measure_panic_takeover(void **state) {
	World *w = *state;
	json_object *o, *old, *v;

	w->panic = true;
	o = run_update(w);
	assert_true(json_object_object_get_ex(w->record, "crashed_kernel", &old));
	assert_true(json_object_object_get_ex(old, "request_sample", &v));
	assert_true(json_object_object_get_ex(old, "reboot_sample", &v));
	assert_true(json_object_object_get_ex(old, "commit_sample", &v));
	assert_false(json_object_object_get_ex(w->record, "reboot_sample", &v));
	assert_false(json_object_object_get_ex(w->record, "old_probe", &v));
	/* The crash kernel's request is the axis' t = 0. */
	assert_true(json_object_object_get_ex(w->record, "request_sample", &v));
	assert_true(has_missing(o, "probe_old", "crashed"));
	json_object_put(o);
}

static void test_measure_kmsg_marks(void **state) {
	World *w = *state;
	_cleanup_free_ char *path = NULL, *after = NULL;
	char line[128];
	json_object *o;

	assert_int_equal(
	        measure_kmsg_format("reboot-request", "0123456789abcdef", line, sizeof(line)),
	        (int)strlen("<5>upgraded: reboot-request update=0123456789abcdef\n"));
	assert_string_equal(line, "<5>upgraded: reboot-request update=0123456789abcdef\n");
	assert_true(measure_kmsg_format("daemon-start", NULL, line, sizeof(line)) > 0);
	assert_string_equal(line, "<5>upgraded: daemon-start update=-\n");
	assert_int_equal(measure_kmsg_format("daemon-start", "x", line, 10), -ENOBUFS);
	assert_int_equal(measure_kmsg_format(NULL, "x", line, sizeof(line)), -EINVAL);

	/* The marks go to the kernel's log device only: a test root's fake /dev/kmsg (a
	 * regular file) is read for the boot analysis and left as it was. */
	w->cpuflags = "flags\t\t: fpu tsc constant_tsc nonstop_tsc\n";
	w->kmsg = true;
	o = run_update(w);
	assert_true(asprintf(&path, "%s/dev/kmsg", w->root) > 0);
	assert_int_equal(read_file_full(path, 1 << 20, &after, NULL), 0);
	assert_string_equal(after, kmsg);
	json_object_put(o);
}

static void test_measure_report_gate(void **state) {
	World *w = *state;
	_cleanup_free_ char *path = NULL;

	/* Every test root's reports are validated when it is removed: the gate itself
	 * must catch a report that violates the schema. */
	assert_int_equal(test_validate_reports(w->root), 0);
	put(w->root, "/var/lib/upgraded/reports/0123456789abcdef.json", "{\"schema\": 2}\n");
	assert_int_not_equal(test_validate_reports(w->root), 0);
	put(w->root, "/var/lib/upgraded/reports/0123456789abcdef.json", "{}\n");
	assert_int_not_equal(test_validate_reports(w->root), 0);
	assert_true(asprintf(&path, "%s/var/lib/upgraded/reports/0123456789abcdef.json", w->root) >
	            0);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(test_validate_reports(w->root), 0);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_measure_tsc_timebase, setup, teardown),
		cmocka_unit_test_setup_teardown(test_measure_libvirt_wait, setup, teardown),
		cmocka_unit_test_setup_teardown(test_measure_request_sample_lost, setup, teardown),
		cmocka_unit_test_setup_teardown(test_measure_realtime_fallback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_measure_stamps_present, setup, teardown),
		cmocka_unit_test_setup_teardown(test_measure_relocation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_measure_refused_handoff, setup, teardown),
		cmocka_unit_test_setup_teardown(test_measure_probe_unavailable_and_no_kmsg, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_measure_journal_fields, setup, teardown),
		cmocka_unit_test_setup_teardown(test_measure_report_without_measurement, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_measure_vm_downtime_sources, setup, teardown),
		cmocka_unit_test_setup_teardown(test_measure_kmsg_marks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_measure_report_gate, setup, teardown),
		cmocka_unit_test_setup_teardown(test_measure_panic_takeover, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
