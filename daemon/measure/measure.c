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
#include "kmsg.h"
#include "measure-internal.h"
#include "path-util.h"
#include "probe-open-bounded.h"
#include "string-util.h"

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
	if (opts && opts->bus_address) {
		m->bus_address = strdup(opts->bus_address);
		if (!m->bus_address)
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

void measure_close_probe(Measure *m) {
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
	free(m->bus_address);
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
bool measure_sample_from_json(json_object *o, TimebaseSample *ret) {
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

json_object *measure_get_obj(json_object *o, const char *key) {
	json_object *v = NULL;

	if (!o || !json_object_object_get_ex(o, key, &v))
		return NULL;
	return v;
}

int measure_root_file(Measure *m, const char *path, char **ret_data, size_t *ret_size) {
	_cleanup_free_ char *p = NULL;
	int r;

	r = path_prefix_root(m->root, path, &p);
	if (r < 0)
		return r;
	if (streq(path, "/dev/kmsg"))
		return kmsg_read_all(p, ret_data, ret_size);
	return read_file_full(p, MEASURE_FILE_MAX, ret_data, ret_size);
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

static bool measure_kmsg(Measure *m, const char *event, const char *id) {
	_cleanup_free_ char *p = NULL;
	_cleanup_close_ int fd = -EBADF;
	char line[128];
	struct stat st;
	int n;

	n = measure_kmsg_format(event, id, line, sizeof(line));
	if (n < 0 || path_prefix_root(m->root, "/dev/kmsg", &p) < 0)
		return false;
	fd = open(p, O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode))
		return false;
	if (write(fd, line, (size_t)n) != n) {
		log_debug_errno(-errno, "Cannot write the %s mark to /dev/kmsg, ignoring: %m",
		                event);
		return false;
	}
	return true;
}

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
	TimebaseSample s, written;

	(void)c;
	if (!rec || m->sample_now(&s) < 0)
		return;
	json_object_object_add(rec, "request_sample", sample_to_json(&s));
	/* When the mark went out: its printk time lies between the sample and this, which
	 * puts the old kernel's last log lines on the axis (measure-relocation.c). */
	if (measure_kmsg(m, "reboot-request", u->id) && m->sample_now(&written) >= 0)
		json_object_object_add(rec, "request_mark_written_ns",
		                       json_object_new_uint64(written.monotonic_ns));
	marks = measure_get_obj(measure_get_obj(rec, "old_probe"), "marks_ns");
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
		                            "request_mark_written_ns", "old_probe" };
	json_object *rec = measure_record(u), *old;

	(void)c;
	(void)userdata;
	if (!rec || measure_get_obj(rec, "crashed_kernel"))
		return;
	old = json_object_new_object();
	if (!old)
		return;
	for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
		json_object *v = measure_get_obj(rec, keys[i]);

		if (!v)
			continue;
		json_object_object_add(old, keys[i], json_object_get(v));
		json_object_object_del(rec, keys[i]);
	}
	json_object_object_add(rec, "crashed_kernel", old);
}

/* The measurement's step of the commit path: the probe opens before the first VM pauses
 * (ContextStepId), the old kernel's figures go into the handoff record, the measured
 * sections into the report. */
static const ContextStepVTable measure_step = {
	.name = "measure",
	.hooks = { [HOOK_PRE_HANDOFF] = { "measure-open", hook_measure_open } },
	.handoff_prepare = measure_handoff_prepare,
	.panic_takeover = measure_panic_takeover,
	.handoff_request = measure_handoff_request,
	.report_extend = measure_report_extend,
};

int measure_attach(Measure *m, Context *c) {
	if (!m || !c)
		return -EINVAL;
	return context_add_step(c, CONTEXT_STEP_MEASURE, &measure_step, m);
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
	(void)measure_kmsg(m, "daemon-start", pending->id);
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
