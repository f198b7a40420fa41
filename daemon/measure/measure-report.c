/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The measured sections of a downtime report (measure_report_extend()): the probe of
 * both kernels, the one time axis across the kexec, the phases, the VMs' downtimes,
 * purgatory and the new kernel's boot. See measure.h and docs/report.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bootlog.h"
#include "fileio.h"
#include "log.h"
#include "macros.h"
#include "measure-internal.h"
#include "path-util.h"
#include "string-util.h"

void measure_add_missing(json_object *missing, const char *figure, const char *fmt, ...) {
	_cleanup_free_ char *why = NULL;
	json_object *o;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&why, fmt, ap) < 0)
		why = NULL;
	va_end(ap);
	o = json_object_new_object();
	json_object_object_add(o, "figure", json_object_new_string(figure));
	json_object_object_add(o, "reason", json_object_new_string(why ?: "out of memory"));
	json_object_array_add(missing, o);
}

static json_object *phase_new(const char *name, int64_t start, int64_t end, bool estimated,
                              const char *kernel) {
	json_object *o = json_object_new_object();

	json_object_object_add(o, "name", json_object_new_string(name));
	json_object_object_add(o, "start_ns", json_object_new_int64(start));
	json_object_object_add(o, "end_ns", json_object_new_int64(end));
	json_object_object_add(o, "duration_ns", json_object_new_int64(end - start));
	json_object_object_add(o, "kernel", json_object_new_string(kernel));
	json_object_object_add(o, "estimated", json_object_new_boolean(estimated));
	return o;
}

/* The last stamp called name taken in boot boot_id, as CLOCK_MONOTONIC ns (0: none). */
static uint64_t stamp_ns(const Update *u, const char *name, const char *boot_id) {
	for (size_t i = u->n_stamps; i > 0; i--) {
		const UpdateStamp *s = &u->stamps[i - 1];
		if (streq(s->name, name) && boot_id && streq(s->boot_id, boot_id))
			return s->monotonic_usec * 1000;
	}
	return 0;
}

static int cmp_i64(const void *a, const void *b) {
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* Waits (bounded, on the ring buffer's fd, not a sleep loop) until every resumed VM's
 * vCPUs ran once, so first_ran is known when the report is written. */
static void measure_wait_first_runs(Measure *m) {
	struct timespec t0;
	int fd;

	if (!m->probe || (fd = probe_fd(m->probe)) < 0)
		return;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct timespec now;
		bool pending = false;
		long waited;

		(void)probe_consume(m->probe);
		for (size_t i = 0; i < m->n_vms; i++) {
			ProbeVmResult r;
			if (probe_result(m->probe, m->vms[i].index, &r) >= 0 &&
			    r.marks[PROBE_MARK_RESUME] && r.n_threads > 0 && !r.first_ran_ns)
				pending = true;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		waited = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
		if (!pending || waited >= MEASURE_FIRST_RUN_WAIT_MS)
			return;
		(void)poll(&(struct pollfd){ .fd = fd, .events = POLLIN }, 1,
		           (int)(MEASURE_FIRST_RUN_WAIT_MS - waited));
	}
}

static bool measure_on_new_kernel(Measure *m, Context *c, const Update *u) {
	return m->started && u->handoff_boot_id && !streq(u->handoff_boot_id, context_boot_id(c));
}

/* Finds a VM's probe figures by name in a probe fragment. */
static bool fragment_vm(json_object *frag, const char *name, ProbeVmResult *ret) {
	json_object *vms = measure_get_obj(frag, "vms"), *n;

	if (!vms || !json_object_is_type(vms, json_type_array))
		return false;
	for (size_t i = 0; i < json_object_array_length(vms); i++) {
		json_object *v = json_object_array_get_idx(vms, i);
		if (json_object_object_get_ex(v, "name", &n) &&
		    streq_ptr(json_object_get_string(n), name))
			return probe_vm_result_from_json(v, ret) >= 0;
	}
	return false;
}

/* Why a VM's vCPU moment is missing although the probe ran on that kernel; NULL when
 * it is there (or the probe did not run: the probe-wide reason is listed already). */
static const char *vcpu_gap(const ProbeVmResult *r, bool first_run) {
	if (!r->available)
		return NULL;
	if (r->n_threads == 0)
		return "no vCPU thread was tracked (QEMU's pid or its \"CPU n/...\" threads not "
		       "found)";
	if (first_run ? r->first_ran_ns == 0 : r->last_ran_ns == 0)
		return first_run ? "its vCPUs did not run within the wait after the resume"
		                 : "its vCPUs never stopped after the window opened";
	return NULL;
}

static json_object *axis_or_null(bool have, int64_t ns) {
	return have ? json_object_new_int64(ns) : NULL;
}

static void measure_vm_downtimes(const Timebase *tb, const TimebaseInput *in,
                                 json_object *old_probe, json_object *new_probe,
                                 json_object *report, json_object *missing) {
	json_object *out = json_object_new_array(), *vms = measure_get_obj(old_probe, "vms"),
	            *totals;
	int64_t *d = NULL;
	size_t n = 0;

	for (size_t i = 0;
	     vms && json_object_is_type(vms, json_type_array) && i < json_object_array_length(vms);
	     i++) {
		json_object *v = json_object_array_get_idx(vms, i), *name, *o;
		ProbeVmResult old = {}, new = {};
		uint64_t a, b;
		const char *src_a, *src_b, *vm;
		int64_t ns;
		int r;

		if (!json_object_object_get_ex(v, "name", &name))
			continue;
		vm = json_object_get_string(name);
		(void)probe_vm_result_from_json(v, &old);
		(void)fragment_vm(new_probe, vm, &new);

		a = old.available && old.last_ran_ns ? old.last_ran_ns
		                                     : old.marks[PROBE_MARK_PAUSE];
		src_a = old.available && old.last_ran_ns ? "probe" : "marks";
		b = new.available &&new.first_ran_ns ? new.first_ran_ns
		                                     : new.marks[PROBE_MARK_RESUME];
		src_b = new.available &&new.first_ran_ns ? "probe" : "marks";

		if (vcpu_gap(&old, false))
			measure_add_missing(missing, "vcpu_last_ran", "%s: %s", vm,
			                    vcpu_gap(&old, false));
		if (new_probe && vcpu_gap(&new, true))
			measure_add_missing(missing, "vcpu_first_ran", "%s: %s", vm,
			                    vcpu_gap(&new, true));

		o = json_object_new_object();
		json_object_object_add(o, "name", json_object_new_string(vm));
		/* Both ends on the report's axis: the old one exact (one clock with t = 0),
		 * the new one as estimated as the timebase. */
		json_object_object_add(o, "stopped_ns",
		                       axis_or_null(a != 0 && in->old_reboot.monotonic_ns != 0,
		                                    timebase_old_to_axis(in, a)));
		json_object_object_add(o, "running_ns",
		                       axis_or_null(b != 0 && tb->kind != TIMEBASE_NONE,
		                                    timebase_new_to_axis(tb, b)));
		r = timebase_downtime(tb, in, a, b, &ns);
		if (r < 0) {
			json_object_object_add(o, "downtime_ns", NULL);
			measure_add_missing(
			        missing, "vm_downtime", "%s: %s", vm,
			        r == -EINVAL ? "pause or resume moment not observed"
			        : r == -EDOM ? "no common timebase"
			                     : "inconsistent moments (resumed before paused)");
		} else {
			int64_t *nd = realloc(d, (n + 1) * sizeof(*d));
			if (nd) {
				d = nd;
				d[n++] = ns;
			}
			json_object_object_add(o, "downtime_ns", json_object_new_int64(ns));
		}
		json_object_object_add(o, "uncertainty_ns",
		                       json_object_new_uint64(tb->uncertainty_ns));
		json_object_object_add(o, "estimated", json_object_new_boolean(true));
		json_object_object_add(
		        o, "downtime_source",
		        json_object_new_string(streq(src_a, src_b) ? src_a : "mixed"));
		json_object_array_add(out, o);
	}
	json_object_object_add(report, "vm_downtime", out);

	totals = measure_get_obj(report, "totals");
	if (totals && n > 0) {
		qsort(d, n, sizeof(*d), cmp_i64);
		json_object_object_add(totals, "max_vm_downtime_ns",
		                       json_object_new_int64(d[n - 1]));
		json_object_object_add(
		        totals, "median_vm_downtime_ns",
		        json_object_new_int64(n % 2 ? d[n / 2] : (d[n / 2 - 1] + d[n / 2]) / 2));
	} else if (totals)
		measure_add_missing(missing, "vm_downtime_totals", "%s",
		                    vms && json_object_array_length(vms) > 0
		                            ? "no VM downtime could be computed"
		                            : "no VM was tracked during the update");
	free(d);
}

/* The probe's figures of both kernels into report.probe; what is missing into missing.
 * *ret_old / *ret_new: the old and new kernel's probe JSON (borrowed from report). */
static void report_probe(Measure *m, Context *c, Update *u, json_object *report,
                         json_object *missing, json_object **ret_old, json_object **ret_new) {
	json_object *old_probe = measure_get_obj(u->measure, "old_probe"), *new_probe = NULL, *o;

	if (m->probe) {
		if (measure_on_new_kernel(m, c, u))
			measure_wait_first_runs(m);
		(void)probe_consume(m->probe);
		(void)probe_to_json(m->probe, &new_probe);
	}
	o = json_object_new_object();
	if (measure_on_new_kernel(m, c, u)) {
		json_object_object_add(o, "old", old_probe ? json_object_get(old_probe) : NULL);
		json_object_object_add(o, "new", new_probe);
	} else {
		/* Still on the old kernel (the commit failed): this probe is the old one. */
		json_object_object_add(o, "old", new_probe);
		json_object_object_add(o, "new", NULL);
		old_probe = new_probe;
		new_probe = NULL;
	}
	json_object_object_add(report, "probe", o);
	if (!old_probe)
		measure_add_missing(
		        missing, "probe_old", "%s",
		        measure_get_obj(u->measure, "crashed_kernel")
		                ? "the old kernel crashed (panic path): its figures are not on "
		                  "the axis of the kexec out of the crash kernel"
		        : u->measure ? "the handoff record carries no probe figures"
		                     : "the old kernel recorded no measurement");
	else if (!json_object_get_boolean(measure_get_obj(old_probe, "available")))
		measure_add_missing(missing, "vcpu_last_ran",
		                    "probe unavailable on the old kernel: %s (%s)",
		                    json_object_get_string(measure_get_obj(old_probe, "reason")),
		                    json_object_get_string(measure_get_obj(old_probe, "detail")));
	if (measure_on_new_kernel(m, c, u)) {
		if (!new_probe)
			measure_add_missing(missing, "probe_new", "%s", "the probe was not opened");
		else if (!json_object_get_boolean(measure_get_obj(new_probe, "available")))
			measure_add_missing(
			        missing, "vcpu_first_ran",
			        "probe unavailable on the new kernel: %s (%s)",
			        json_object_get_string(measure_get_obj(new_probe, "reason")),
			        json_object_get_string(measure_get_obj(new_probe, "detail")));
	}
	*ret_old = old_probe;
	*ret_new = new_probe;
}

/* The new kernel's side of the timebase input: its CPU, purgatory's stamps on its
 * command line, and its kernel log (*ret_kmsg, kept for the boot analysis). */
static void report_read_new_kernel(Measure *m, TimebaseInput *in, json_object *missing,
                                   char **ret_kmsg, size_t *ret_kmsg_size) {
	_cleanup_free_ char *cpuinfo = NULL, *cmdline = NULL;
	int r;

	in->new_start = m->start;
	(void)measure_root_file(m, "/proc/cpuinfo", &cpuinfo, NULL);
	r = measure_root_file(m, "/dev/kmsg", ret_kmsg, ret_kmsg_size);
	if (r < 0)
		measure_add_missing(missing, "boot_analysis", "cannot read /dev/kmsg: %s",
		                    strerror(-r));
	(void)timebase_cpu_parse(cpuinfo, *ret_kmsg, &in->cpu);
	r = measure_root_file(m, "/proc/cmdline", &cmdline, NULL);
	if (r >= 0) {
		r = timebase_stamps_from_cmdline(cmdline, &in->stamps);
		if (r == -EBADMSG)
			measure_add_missing(missing, "purgatory_stamps", "%s",
			                    "upgraded.stamps= on /proc/cmdline is malformed");
	}
}

/* Computes the one axis across the kexec into tb and report.timebase; true when the
 * two kernels could be put on it. */
static bool report_timebase(const TimebaseInput *in, bool have_reboot, Timebase *tb,
                            json_object *report, json_object *missing) {
	int tbr = have_reboot ? timebase_compute(in, tb) : -ENODATA;

	if (tbr >= 0) {
		json_object *t = NULL;
		if (timebase_to_json(tb, in, &t) >= 0)
			json_object_object_add(report, "timebase", t);
	}
	if (!have_reboot)
		measure_add_missing(missing, "timebase", "%s",
		                    "the handoff record has no reboot-request clock sample");
	else if (tbr < 0)
		measure_add_missing(missing, "timebase", "%s", "clock samples unusable");
	else if (tb->kind == TIMEBASE_NONE)
		measure_add_missing(missing, "timebase", "%s",
		                    "the kernels cannot be ordered (realtime went backwards)");
	else
		return true;
	return false;
}

/* Daemon start -> update completed on the new kernel. When the restore stamped the moment
 * libvirt answered (after the daemon's start), the time up to it is a phase of its own: the
 * daemon's setup up to its first libvirt call, and what libvirtd still did after its
 * READY=1 (its QEMU driver's start). */
static void report_post_boot(const Update *u, const Context *c, const Timebase *tb, int64_t start,
                             uint64_t done, json_object *phases) {
	uint64_t answered = stamp_ns(u, "libvirt-answered", context_boot_id(c));
	int64_t at = answered ? timebase_new_to_axis(tb, answered) : start;

	if (answered && at > start && answered <= done) {
		json_object_array_add(phases, phase_new("libvirt-wait", start, at, true, "new"));
		start = at;
	}
	json_object_array_add(
	        phases, phase_new("post-boot", start, timebase_new_to_axis(tb, done), true, "new"));
}

/* The phases on the reboot-request axis and the host's blackout (have_tb), or what is
 * missing without a common timebase. */
static void report_phases(Measure *m, Context *c, Update *u, const TimebaseInput *in, Timebase *tb,
                          bool have_tb, uint64_t commit_ns, json_object *report,
                          json_object *phases, json_object *missing) {
	json_object *totals = measure_get_obj(report, "totals");

	if (have_tb) {
		json_object *tp = measure_get_obj(measure_get_obj(report, "timebase"), "phases");
		uint64_t done = stamp_ns(u, "completed", context_boot_id(c));
		int64_t start = timebase_new_to_axis(tb, m->start.monotonic_ns);

		json_object_object_add(report, "phase_axis",
		                       json_object_new_string("reboot-request"));
		if (commit_ns && commit_ns <= in->old_reboot.monotonic_ns)
			json_object_array_add(phases, phase_new("pre-handoff",
			                                        timebase_old_to_axis(in, commit_ns),
			                                        0, false, "old"));
		for (size_t i = 0; tp && i < json_object_array_length(tp); i++) {
			json_object *p = json_object_array_get_idx(tp, i);
			json_object *x =
			        phase_new(json_object_get_string(measure_get_obj(p, "name")),
			                  json_object_get_int64(measure_get_obj(p, "start_ns")),
			                  json_object_get_int64(measure_get_obj(p, "end_ns")), true,
			                  "handoff");
			json_object_array_add(phases, x);
		}
		if (done)
			report_post_boot(u, c, tb, start, done, phases);
		json_object_object_add(totals, "host_blackout_ns", json_object_new_int64(start));
		json_object_object_add(totals, "uncertainty_ns",
		                       json_object_new_uint64(tb->uncertainty_ns));
		json_object_object_add(totals, "timebase",
		                       json_object_new_string(timebase_kind_to_string(tb->kind)));
	} else {
		measure_add_missing(missing, "host_blackout", "%s", "no common timebase");
		tb->kind = TIMEBASE_NONE; /* a zeroed Timebase would read as "tsc" */
	}
}

/* Purgatory: its implementation and verification time from its stamps. */
static void report_purgatory(const Update *u, const TimebaseInput *in, const Timebase *tb,
                             bool have_tb, json_object *report, json_object *missing) {
	json_object *purg = measure_get_obj(report, "purgatory");

	if (!purg)
		return;
	if (in->stamps.impl) {
		const char *impl = timebase_stamps_impl_to_string(in->stamps.impl);

		if (impl && in->stamps.mode != '-') /* '-': the template, purgatory never ran */
			json_object_object_add(purg, "impl", json_object_new_string(impl));
	}
	if (have_tb && tb->stamp_ns[0] != TIMEBASE_STAMP_ABSENT &&
	    tb->stamp_ns[1] != TIMEBASE_STAMP_ABSENT) {
		json_object_object_add(purg, "verify_ns",
		                       json_object_new_int64(tb->stamp_ns[1] - tb->stamp_ns[0]));
		json_object_object_add(purg, "verify_estimated",
		                       json_object_new_boolean(!tb->stamps_trusted));
		json_object_object_add(purg, "reason", NULL);
	} else if (u->booted_kernel && !streq_ptr(u->booted_kernel, u->kernel_version))
		/* Purgatory refused the image (and reset) or the handoff never
		 * reached it: the kernel running now was not started by it. */
		measure_add_missing(
		        missing, "purgatory_verify",
		        "the staged kernel did not boot (running %s): nothing was stamped",
		        u->booted_kernel);
	else
		measure_add_missing(
		        missing, "purgatory_verify", "%s",
		        in->stamps.entry || in->stamps.verified
		                ? "purgatory stamps incomplete or not on a usable timebase"
		                : "no upgraded.stamps= on /proc/cmdline (the kernel's own "
		                  "purgatory, e.g. kexec_file_load, stamps nothing)");
}

/* Adds the measured sections to a report being built (defaults from report_build()
 * are replaced section by section). */
int measure_report_extend(Context *c, Update *u, json_object *report, void *userdata) {
	Measure *m = userdata;
	_cleanup_free_ char *kmsg = NULL;
	json_object *missing = json_object_new_array(), *phases = json_object_new_array();
	json_object *old_probe = NULL, *new_probe = NULL;
	TimebaseInput in = {};
	Timebase tb = {};
	bool have_reboot, have_tb;
	uint64_t commit_ns;
	size_t kmsg_size = 0;

	if (!missing || !phases)
		return -ENOMEM;
	have_reboot = measure_sample_from_json(measure_get_obj(u->measure, "request_sample"),
	                                       &in.old_reboot) ||
	              measure_sample_from_json(measure_get_obj(u->measure, "reboot_sample"),
	                                       &in.old_reboot);
	(void)measure_sample_from_json(measure_get_obj(u->measure, "commit_sample"),
	                               &in.old_earlier);

	/* The probe on both kernels. */
	report_probe(m, c, u, report, missing, &old_probe, &new_probe);

	/* Old-kernel phase: commit request -> reboot request (or -> failure). */
	commit_ns = stamp_ns(u, "commit-requested", u->handoff_boot_id ?: context_boot_id(c));
	if (!measure_on_new_kernel(m, c, u)) {
		uint64_t end = stamp_ns(u, "failed", context_boot_id(c));
		if (commit_ns && end >= commit_ns) {
			json_object_array_add(phases,
			                      phase_new("pre-handoff", 0,
			                                (int64_t)(end - commit_ns), false, "old"));
			json_object_object_add(report, "phase_axis",
			                       json_object_new_string("commit-request"));
		}
		measure_add_missing(missing, "timebase", "%s",
		                    "the update did not reach a new kernel");
		json_object_object_add(report, "phases", phases);
		json_object_object_add(report, "missing", missing);
		measure_close_probe(m); /* this update's measurement is over */
		return 0;
	}

	/* The new kernel: one axis across the kexec. */
	report_read_new_kernel(m, &in, missing, &kmsg, &kmsg_size);
	have_tb = report_timebase(&in, have_reboot, &tb, report, missing);
	report_phases(m, c, u, &in, &tb, have_tb, commit_ns, report, phases, missing);
	measure_vm_downtimes(&tb, &in, old_probe, new_probe, report, missing);
	report_purgatory(u, &in, &tb, have_tb, report, missing);
	measure_report_relocation(m, u, &in, report, phases, missing);
	measure_report_critical_path(m, u, &in, &tb, have_tb, have_reboot, report, missing);

	/* Boot analysis of the new kernel. */
	if (kmsg) {
		Bootlog b = {};
		json_object *j = NULL;

		if (bootlog_parse(kmsg, kmsg_size, &b) >= 0 && bootlog_to_json(&b, &j) >= 0)
			json_object_object_add(report, "boot", j);
		bootlog_done(&b);
	}

	json_object_object_add(report, "phases", phases);
	json_object_object_add(report, "missing", missing);
	measure_close_probe(m); /* this update's measurement is over */
	m->started = false;
	return 0;
}
