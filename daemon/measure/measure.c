/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Measurement of an update across the kexec: see measure.h and docs/report.md.
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
#include "job.h"
#include "measure.h"
#include "path-util.h"
#include "probe-open-bounded.h"
#include "string-util.h"

#define MEASURE_FIRST_RUN_WAIT_MS 1000 /* how long the report waits for resumed vCPUs to run */
#define MEASURE_FILE_MAX          (16u * 1024u * 1024u)

typedef struct MeasureVm {
	char *name;
	uint32_t index; /* in the probe of this kernel */
} MeasureVm;

struct Measure {
	char *root;
	sd_event *event;
	sd_event_source *io;
	ProbeOptions probe_opts;
	char *btf_path;

	Probe *probe; /* this kernel's, NULL until opened */
	MeasureVm *vms;
	size_t n_vms;

	/* The VM steps' API is called from the VM library's worker threads too (restore,
	 * resume): this lock serialises it with the probe's consumer. */
	pthread_mutex_t lock;

	ProbeOpenFunc probe_open;    /* NULL: probe_open() (test seam) */
	uint64_t probe_open_timeout; /* usec the probe may take to open */
	bool probe_gave_up;          /* it did not open in time: not tried again */

	bool started;         /* measure_daemon_start() found a handoff to complete */
	TimebaseSample start; /* new kernel: at daemon start */
	int (*sample_now)(TimebaseSample *ret);
};

/* ---- constructors ---- */

int measure_new(const MeasureOptions *opts, Measure **ret) {
	_cleanup_(measure_freep) Measure *m = NULL;

	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->lock, NULL);
	if (opts && opts->root && !streq(opts->root, "/")) {
		m->root = strdup(opts->root);
		if (!m->root)
			return -ENOMEM;
	}
	if (opts && opts->btf_path) {
		m->btf_path = strdup(opts->btf_path);
		if (!m->btf_path)
			return -ENOMEM;
	}
	m->event = opts && opts->event ? sd_event_ref(opts->event) : NULL;
	m->probe_opts =
	        (ProbeOptions){ .disabled = opts && opts->probe_disabled, .btf_path = m->btf_path };
	m->sample_now = timebase_sample_now;
	m->probe_open_timeout = PROBE_OPEN_TIMEOUT_USEC;
	*ret = TAKE_PTR(m);
	return 0;
}

static void measure_close_probe(Measure *m) {
	m->io = sd_event_source_disable_unref(m->io);
	m->probe = probe_close(m->probe);
	for (size_t i = 0; i < m->n_vms; i++)
		free(m->vms[i].name);
	free(m->vms);
	m->vms = NULL;
	m->n_vms = 0;
}

Measure *measure_free(Measure *m) {
	if (!m)
		return NULL;
	measure_close_probe(m);
	pthread_mutex_destroy(&m->lock);
	sd_event_unref(m->event);
	free(m->btf_path);
	free(m->root);
	free(m);
	return NULL;
}

/* Test seam: the clock sample source (timebase_sample_now() normally). */
void measure_set_sample_func(Measure *m, int (*f)(TimebaseSample *ret));
void measure_set_sample_func(Measure *m, int (*f)(TimebaseSample *ret)) {
	m->sample_now = f ?: timebase_sample_now;
}

/* Test seam: what opens the probe (probe_open() normally) and how long it may take. */
void measure_set_probe_open_func(Measure *m, ProbeOpenFunc f, uint64_t timeout_usec);
void measure_set_probe_open_func(Measure *m, ProbeOpenFunc f, uint64_t timeout_usec) {
	m->probe_open = f;
	m->probe_open_timeout = timeout_usec ?: PROBE_OPEN_TIMEOUT_USEC;
}

Probe *measure_probe(Measure *m) {
	return m ? m->probe : NULL;
}

/* ---- helpers ---- */

static int on_probe_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
	Measure *m = userdata;

	(void)s, (void)fd, (void)revents;
	pthread_mutex_lock(&m->lock);
	(void)probe_consume(m->probe);
	pthread_mutex_unlock(&m->lock);
	return 0;
}

/* The probe's ring buffer on the event loop (the loop's own thread: sd-event is not
 * thread-safe; a job's worker that opened the probe hands this over). */
static void measure_watch_probe(void *userdata) {
	Measure *m = userdata;
	int r;

	if (m->io || !m->event || !m->probe || probe_fd(m->probe) < 0)
		return;
	r = sd_event_add_io(m->event, &m->io, probe_fd(m->probe), EPOLLIN, on_probe_io, m);
	if (r < 0)
		log_warning_errno(r, "Cannot watch the probe's ring buffer, ignoring: %m");
}

/* Opens this kernel's probe once; degraded (marks only) is fine. */
static int measure_open_probe(Measure *m) {
	const char *detail = NULL;
	int r;

	if (m->probe)
		return 0;
	if (m->probe_gave_up)
		return -ETIMEDOUT;
	/* Bounded: on the new kernel this runs before the VMs are restored, and nothing
	 * the probe measures is worth more than the VMs coming back. */
	r = probe_open_bounded(m->probe_open, &m->probe_opts, m->probe_open_timeout, &m->probe);
	if (r == -ETIMEDOUT) {
		m->probe_gave_up = true;
		return log_warning_errno(r,
		                         "The vCPU probe did not open within %.1f s, going on "
		                         "without it (the report keeps the daemon's marks): %m",
		                         (double)m->probe_open_timeout / 1e6);
	}
	if (r < 0)
		return log_warning_errno(r, "Cannot set up the vCPU probe: %m");
	if (r == 0) {
		ProbeUnavailable u = probe_unavailable(m->probe, &detail);
		log_info("vCPU probe unavailable (%s): %s; the report keeps the daemon's marks.",
		         probe_unavailable_to_string(u), strna(detail));
		return 0;
	}
	if (job_on_loop())
		measure_watch_probe(m);
	else
		(void)job_defer(measure_watch_probe, m, NULL);
	return 0;
}

static MeasureVm *measure_find_vm(Measure *m, const char *name) {
	for (size_t i = 0; i < m->n_vms; i++)
		if (streq(m->vms[i].name, name))
			return &m->vms[i];
	return NULL;
}

static int measure_get_vm(Measure *m, const char *name, uint32_t *ret) {
	MeasureVm *v, *n;
	int r;

	if (!name || !*name)
		return -EINVAL;
	r = measure_open_probe(m);
	if (r < 0)
		return r;
	v = measure_find_vm(m, name);
	if (!v) {
		n = realloc(m->vms, (m->n_vms + 1) * sizeof(*n));
		if (!n)
			return -ENOMEM;
		m->vms = n;
		v = &m->vms[m->n_vms];
		*v = (MeasureVm){ .name = strdup(name) };
		if (!v->name)
			return -ENOMEM;
		r = probe_add_vm(m->probe, name, &v->index);
		if (r < 0) {
			free(v->name);
			return r;
		}
		m->n_vms++;
	}
	*ret = v->index;
	return 0;
}

static json_object *sample_to_json(const TimebaseSample *s) {
	json_object *o = json_object_new_object();

	if (!o)
		return NULL;
	json_object_object_add(o, "tsc", json_object_new_uint64(s->tsc));
	json_object_object_add(o, "realtime_ns", json_object_new_uint64(s->realtime_ns));
	json_object_object_add(o, "monotonic_ns", json_object_new_uint64(s->monotonic_ns));
	json_object_object_add(o, "skew_ns", json_object_new_uint64(s->skew_ns));
	return o;
}

static uint64_t get_u64(json_object *o, const char *key) {
	json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int) ||
	    json_object_get_int64(v) < 0)
		return 0;
	return json_object_get_uint64(v);
}

/* false when absent or malformed: the record is input from a previous boot. */
static bool sample_from_json(json_object *o, TimebaseSample *ret) {
	if (!o || !json_object_is_type(o, json_type_object))
		return false;
	*ret = (TimebaseSample){ .tsc = get_u64(o, "tsc"),
		                 .realtime_ns = get_u64(o, "realtime_ns"),
		                 .monotonic_ns = get_u64(o, "monotonic_ns"),
		                 .skew_ns = get_u64(o, "skew_ns") };
	return ret->realtime_ns > 0 && ret->monotonic_ns > 0;
}

static json_object *measure_record(Update *u) {
	if (!u->measure)
		u->measure = json_object_new_object();
	return u->measure;
}

static json_object *get_obj(json_object *o, const char *key) {
	json_object *v = NULL;

	if (!o || !json_object_object_get_ex(o, key, &v))
		return NULL;
	return v;
}

static int root_file(Measure *m, const char *path, char **ret_data, size_t *ret_size) {
	_cleanup_free_ char *p = NULL;
	int r;

	r = path_prefix_root(m->root, path, &p);
	if (r < 0)
		return r;
	if (streq(path, "/dev/kmsg"))
		return bootlog_read_kmsg(p, ret_data, ret_size);
	return read_file_full(p, MEASURE_FILE_MAX, ret_data, ret_size);
}

static void add_missing(json_object *missing, const char *figure, const char *fmt, ...)
        _printf_(3, 4);
static void add_missing(json_object *missing, const char *figure, const char *fmt, ...) {
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

/* "upgraded: EVENT update=ID" as a kernel log record at level notice: on a console
 * that prints it (loglevel > 5), an outside observer timestamps the moment itself
 * (the lab does). Only to a character device: tests' fake /dev/kmsg files stay as
 * they are. Best effort, never fails the caller. */
int measure_kmsg_format(const char *event, const char *id, char *buf, size_t size);
int measure_kmsg_format(const char *event, const char *id, char *buf, size_t size) {
	int n;

	if (!event || !buf || size == 0)
		return -EINVAL;
	n = snprintf(buf, size, "<5>upgraded: %s update=%s\n", event, id && *id ? id : "-");
	if (n < 0 || (size_t)n >= size)
		return -ENOBUFS;
	return n;
}

static void measure_kmsg(Measure *m, const char *event, const char *id) {
	_cleanup_free_ char *p = NULL;
	_cleanup_close_ int fd = -EBADF;
	char line[128];
	struct stat st;
	int n;

	n = measure_kmsg_format(event, id, line, sizeof(line));
	if (n < 0 || path_prefix_root(m->root, "/dev/kmsg", &p) < 0)
		return;
	fd = open(p, O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode))
		return;
	if (write(fd, line, (size_t)n) != n)
		log_debug_errno(-errno, "Cannot write the %s mark to /dev/kmsg, ignoring: %m",
		                event);
}

/* ---- the seams ---- */

/* Pre-handoff step "measure-open": the probe runs before the first VM is paused,
 * and an early clock sample lets the timebase see a step of CLOCK_REALTIME. */
static int hook_measure_open(Context *c, Update *u, void *userdata, char **ret_reason) {
	Measure *m = userdata;
	TimebaseSample s;
	json_object *rec;

	(void)c, (void)ret_reason;
	(void)measure_open_probe(m);
	rec = measure_record(u);
	if (rec && m->sample_now(&s) >= 0)
		json_object_object_add(rec, "commit_sample", sample_to_json(&s));
	return 0; /* measurement never fails a commit */
}

/* Right before the handoff record is written: the old kernel's figures and the
 * reboot-request sample (t = 0 of the report's axis) go into it. */
static void measure_handoff_prepare(Context *c, Update *u, void *userdata) {
	Measure *m = userdata;
	json_object *rec, *probe = NULL;
	TimebaseSample s;

	(void)c;
	rec = measure_record(u);
	if (!rec)
		return;
	if (m->sample_now(&s) >= 0) {
		json_object_object_add(rec, "reboot_sample", sample_to_json(&s));
		if (m->probe)
			(void)probe_mark_at(m->probe, PROBE_HOST, PROBE_MARK_REBOOT_REQUEST,
			                    s.monotonic_ns);
	}
	if (m->probe) {
		(void)probe_consume(m->probe);
		if (probe_to_json(m->probe, &probe) >= 0)
			json_object_object_add(rec, "old_probe", probe);
	}
}

/* Right before the kexec is requested: the exact t = 0. The record written before
 * carries the earlier sample; this one reaches the disk with the
 * "handoff-requested" phase (best effort) and is preferred when it did. */
static void measure_handoff_request(Context *c, Update *u, void *userdata) {
	Measure *m = userdata;
	json_object *rec = measure_record(u), *marks;
	TimebaseSample s;

	(void)c;
	if (!rec || m->sample_now(&s) < 0)
		return;
	json_object_object_add(rec, "request_sample", sample_to_json(&s));
	measure_kmsg(m, "reboot-request", u->id);
	marks = get_obj(get_obj(rec, "old_probe"), "marks_ns");
	if (marks)
		json_object_object_add(marks, "reboot-request",
		                       json_object_new_uint64(s.monotonic_ns));
}

/* The panic path: the report's axis is the second kexec (crash kernel -> staged
 * kernel), whose reboot request the crash kernel samples. The old kernel's
 * samples and probe figures stay in the record under "crashed_kernel", off that
 * axis (its clock ended in the crash, at an unknown moment). */
static void measure_panic_takeover(Context *c, Update *u, void *userdata) {
	static const char *const keys[] = { "commit_sample", "reboot_sample", "request_sample",
		                            "old_probe" };
	json_object *rec = measure_record(u), *old;

	(void)c;
	(void)userdata;
	if (!rec || get_obj(rec, "crashed_kernel"))
		return;
	old = json_object_new_object();
	if (!old)
		return;
	for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
		json_object *v = get_obj(rec, keys[i]);

		if (!v)
			continue;
		json_object_object_add(old, keys[i], json_object_get(v));
		json_object_object_del(rec, keys[i]);
	}
	json_object_object_add(rec, "crashed_kernel", old);
}

static bool measure_on_new_kernel(Measure *m, Context *c, const Update *u) {
	return m->started && u->handoff_boot_id && !streq(u->handoff_boot_id, context_boot_id(c));
}

/* Finds a VM's probe figures by name in a probe fragment. */
static bool fragment_vm(json_object *frag, const char *name, ProbeVmResult *ret) {
	json_object *vms = get_obj(frag, "vms"), *n;

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
	json_object *out = json_object_new_array(), *vms = get_obj(old_probe, "vms"), *totals;
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
			add_missing(missing, "vcpu_last_ran", "%s: %s", vm, vcpu_gap(&old, false));
		if (new_probe && vcpu_gap(&new, true))
			add_missing(missing, "vcpu_first_ran", "%s: %s", vm, vcpu_gap(&new, true));

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
			add_missing(missing, "vm_downtime", "%s: %s", vm,
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

	totals = get_obj(report, "totals");
	if (totals && n > 0) {
		qsort(d, n, sizeof(*d), cmp_i64);
		json_object_object_add(totals, "max_vm_downtime_ns",
		                       json_object_new_int64(d[n - 1]));
		json_object_object_add(
		        totals, "median_vm_downtime_ns",
		        json_object_new_int64(n % 2 ? d[n / 2] : (d[n / 2 - 1] + d[n / 2]) / 2));
	} else if (totals)
		add_missing(missing, "vm_downtime_totals", "%s",
		            vms && json_object_array_length(vms) > 0
		                    ? "no VM downtime could be computed"
		                    : "no VM was tracked during the update");
	free(d);
}

/* The probe's figures of both kernels into report.probe; what is missing into missing.
 * *ret_old / *ret_new: the old and new kernel's probe JSON (borrowed from report). */
static void report_probe(Measure *m, Context *c, Update *u, json_object *report,
                         json_object *missing, json_object **ret_old, json_object **ret_new) {
	json_object *old_probe = get_obj(u->measure, "old_probe"), *new_probe = NULL, *o;

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
		add_missing(missing, "probe_old", "%s",
		            get_obj(u->measure, "crashed_kernel")
		                    ? "the old kernel crashed (panic path): its figures are not on "
		                      "the axis of the kexec out of the crash kernel"
		            : u->measure ? "the handoff record carries no probe figures"
		                         : "the old kernel recorded no measurement");
	else if (!json_object_get_boolean(get_obj(old_probe, "available")))
		add_missing(missing, "vcpu_last_ran",
		            "probe unavailable on the old kernel: %s (%s)",
		            json_object_get_string(get_obj(old_probe, "reason")),
		            json_object_get_string(get_obj(old_probe, "detail")));
	if (measure_on_new_kernel(m, c, u)) {
		if (!new_probe)
			add_missing(missing, "probe_new", "%s", "the probe was not opened");
		else if (!json_object_get_boolean(get_obj(new_probe, "available")))
			add_missing(missing, "vcpu_first_ran",
			            "probe unavailable on the new kernel: %s (%s)",
			            json_object_get_string(get_obj(new_probe, "reason")),
			            json_object_get_string(get_obj(new_probe, "detail")));
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
	(void)root_file(m, "/proc/cpuinfo", &cpuinfo, NULL);
	r = root_file(m, "/dev/kmsg", ret_kmsg, ret_kmsg_size);
	if (r < 0)
		add_missing(missing, "boot_analysis", "cannot read /dev/kmsg: %s", strerror(-r));
	(void)timebase_cpu_parse(cpuinfo, *ret_kmsg, &in->cpu);
	r = root_file(m, "/proc/cmdline", &cmdline, NULL);
	if (r >= 0) {
		r = timebase_stamps_from_cmdline(cmdline, &in->stamps);
		if (r == -EBADMSG)
			add_missing(missing, "purgatory_stamps", "%s",
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
		add_missing(missing, "timebase", "%s",
		            "the handoff record has no reboot-request clock sample");
	else if (tbr < 0)
		add_missing(missing, "timebase", "%s", "clock samples unusable");
	else if (tb->kind == TIMEBASE_NONE)
		add_missing(missing, "timebase", "%s",
		            "the kernels cannot be ordered (realtime went backwards)");
	else
		return true;
	return false;
}

/* The phases on the reboot-request axis and the host's blackout (have_tb), or what is
 * missing without a common timebase. */
static void report_phases(Measure *m, Context *c, Update *u, const TimebaseInput *in, Timebase *tb,
                          bool have_tb, uint64_t commit_ns, json_object *report,
                          json_object *phases, json_object *missing) {
	json_object *totals = get_obj(report, "totals");

	if (have_tb) {
		json_object *tp = get_obj(get_obj(report, "timebase"), "phases");
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
			json_object *x = phase_new(json_object_get_string(get_obj(p, "name")),
			                           json_object_get_int64(get_obj(p, "start_ns")),
			                           json_object_get_int64(get_obj(p, "end_ns")),
			                           true, "handoff");
			json_object_array_add(phases, x);
		}
		if (done)
			json_object_array_add(phases, phase_new("post-boot", start,
			                                        timebase_new_to_axis(tb, done),
			                                        true, "new"));
		json_object_object_add(totals, "host_blackout_ns", json_object_new_int64(start));
		json_object_object_add(totals, "uncertainty_ns",
		                       json_object_new_uint64(tb->uncertainty_ns));
		json_object_object_add(totals, "timebase",
		                       json_object_new_string(timebase_kind_to_string(tb->kind)));
	} else {
		add_missing(missing, "host_blackout", "%s", "no common timebase");
		tb->kind = TIMEBASE_NONE; /* a zeroed Timebase would read as "tsc" */
	}
}

/* Purgatory: its implementation and verification time from its stamps. */
static void report_purgatory(const Update *u, const TimebaseInput *in, const Timebase *tb,
                             bool have_tb, json_object *report, json_object *missing) {
	json_object *purg = get_obj(report, "purgatory");

	if (!purg)
		return;
	if (in->stamps.impl) {
		const char *impl = in->stamps.impl == 's'   ? "sha-ni"
		                   : in->stamps.impl == 'a' ? "avx2"
		                   : in->stamps.impl == 'g' ? "generic"
		                                            : "none";
		if (in->stamps.mode != '-') /* '-': the template, purgatory never ran */
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
		add_missing(missing, "purgatory_verify",
		            "the staged kernel did not boot (running %s): nothing was stamped",
		            u->booted_kernel);
	else
		add_missing(missing, "purgatory_verify", "%s",
		            in->stamps.entry || in->stamps.verified
		                    ? "purgatory stamps incomplete or not on a usable timebase"
		                    : "no upgraded.stamps= on /proc/cmdline (the kernel's own "
		                      "purgatory, e.g. kexec_file_load, stamps nothing)");
}

/* Adds the measured sections to a report being built (defaults from report_build()
 * are replaced section by section). */
static int measure_report_extend(Context *c, Update *u, json_object *report, void *userdata) {
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
	have_reboot = sample_from_json(get_obj(u->measure, "request_sample"), &in.old_reboot) ||
	              sample_from_json(get_obj(u->measure, "reboot_sample"), &in.old_reboot);
	(void)sample_from_json(get_obj(u->measure, "commit_sample"), &in.old_earlier);

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
		add_missing(missing, "timebase", "%s", "the update did not reach a new kernel");
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

/* ---- public entry points ---- */

int measure_attach(Measure *m, Context *c) {
	int r;

	if (!m || !c)
		return -EINVAL;
	r = context_add_hook(c, HOOK_PRE_HANDOFF, "measure-open", hook_measure_open, m);
	if (r < 0)
		return r;
	context_set_measure(c, &(ContextMeasure){ .handoff_prepare = measure_handoff_prepare,
	                                          .panic_takeover = measure_panic_takeover,
	                                          .handoff_request = measure_handoff_request,
	                                          .report_extend = measure_report_extend,
	                                          .userdata = m });
	return 0;
}

int measure_daemon_start(Measure *m, Context *c) {
	const Update *pending = NULL;
	Update *const *updates;
	size_t n;

	if (!m || !c)
		return -EINVAL;
	updates = context_updates(c, &n);
	for (size_t i = 0; i < n; i++) {
		Update *u = updates[i];
		if ((u->state == UPDATE_COMMITTING || u->state == UPDATE_COMPLETING) &&
		    u->handoff_boot_id && !streq(u->handoff_boot_id, context_boot_id(c)))
			pending = u;
	}
	if (!pending)
		return 0;
	if (m->sample_now(&m->start) < 0)
		return log_warning_errno(-EIO, "Cannot read the clocks at daemon start: %m");
	measure_kmsg(m, "daemon-start", pending->id);
	m->started = true;
	(void)measure_open_probe(m);
	if (m->probe)
		(void)probe_mark_at(m->probe, PROBE_HOST, PROBE_MARK_DAEMON_START,
		                    m->start.monotonic_ns);
	return 1;
}

static int vm_tracking_locked(Measure *m, const char *vm, pid_t qemu_pid) {
	uint32_t i;
	int r;

	r = measure_get_vm(m, vm, &i);
	if (r < 0)
		return r;
	r = probe_track_qemu(m->probe, i, qemu_pid);
	if (r < 0 && r != -EOPNOTSUPP)
		log_warning_errno(r, "Cannot track the vCPU threads of '%s' (pid %d), ignoring: %m",
		                  vm, (int)qemu_pid);
	return r == -EOPNOTSUPP ? 0 : r;
}

int measure_vm_tracking(Measure *m, const char *vm, pid_t qemu_pid) {
	int r;

	if (!m || qemu_pid <= 0)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	r = vm_tracking_locked(m, vm, qemu_pid);
	pthread_mutex_unlock(&m->lock);
	return r;
}

int measure_window_start(Measure *m, const char *vm) {
	uint32_t i;
	int r;

	if (!m)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	r = measure_get_vm(m, vm, &i);
	if (r >= 0)
		r = probe_window_start(m->probe, i, NULL);
	pthread_mutex_unlock(&m->lock);
	return r;
}

/* once: keep a mark already stamped (the exact moment from the VM steps' events wins
 * over the later progress report of the same step). */
static int mark_locked(Measure *m, const char *vm, ProbeMark mark, bool once) {
	uint32_t i = PROBE_HOST;
	ProbeVmResult res;
	int r;

	if (vm) {
		r = measure_get_vm(m, vm, &i);
		if (r < 0)
			return r;
		if (once && probe_result(m->probe, i, &res) >= 0 && res.marks[mark] != 0)
			return 0;
	} else {
		r = measure_open_probe(m);
		if (r < 0)
			return r;
	}
	return probe_mark(m->probe, i, mark);
}

int measure_mark(Measure *m, const char *vm, ProbeMark mark) {
	int r;

	if (!m || mark < 0 || mark >= _PROBE_MARK_MAX)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	r = mark_locked(m, vm, mark, false);
	pthread_mutex_unlock(&m->lock);
	return r;
}

int measure_vm_outcome(Measure *m, const char *vm, const char *outcome) {
	static const struct {
		const char *outcome;
		int mark; /* -1: no mark */
	} table[] = {
		{ "paused", PROBE_MARK_PAUSE },
		{ "saved", PROBE_MARK_SAVE_COMPLETE },
		{ "restored", PROBE_MARK_RESTORE },
		{ "resumed", PROBE_MARK_RESUME },
		{ "pending", -1 },
		{ "saving", -1 },
		{ "shutting-down", -1 },
		{ "shut-down", -1 },
		{ "ignored", -1 },
		{ "rolled-back", -1 },
		{ "restoring", -1 },
		{ "failed", -1 },
	};

	if (!m || !vm || !outcome)
		return -EINVAL;
	for (size_t i = 0; i < ELEMENTSOF(table); i++)
		if (streq(table[i].outcome, outcome)) {
			int r = 0;

			if (table[i].mark < 0)
				return 0;
			pthread_mutex_lock(&m->lock);
			r = mark_locked(m, vm, (ProbeMark)table[i].mark, true);
			pthread_mutex_unlock(&m->lock);
			return r;
		}
	return -EINVAL;
}
