/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Loader and consumer of probe.bpf.c: opens the skeleton (or explains why not),
 * keeps the per-VM bookkeeping, drains the ring buffer for sd-event, and turns
 * the kernel's per-thread state into per-VM figures.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "json-util.h"
#include "log.h"
#include "macros.h"
#include "probe-loader.h"
#include "probe.h"
#include "probe.skel.h"

#define DEFAULT_BTF_PATH "/sys/kernel/btf/vmlinux"

typedef struct ProbeVm {
	char *name;
	pid_t *tids;
	size_t n_tids;
	uint64_t window_ns;
	uint64_t first_in_event_ns; /* from the ring buffer, for the log */
	uint64_t marks[_PROBE_MARK_MAX];
} ProbeVm;

struct Probe {
	struct probe_bpf *skel;
	struct ring_buffer *rb;
	ProbeUnavailable unavailable;
	char *detail;
	ProbeVm *vms;
	size_t n_vms;
	uint64_t host_marks[_PROBE_MARK_MAX];
	uint64_t n_events;
};

static const char *const unavailable_table[_PROBE_UNAVAILABLE_MAX] = {
	[PROBE_AVAILABLE] = "available",
	[PROBE_DISABLED] = "disabled",
	[PROBE_NO_BTF] = "no-btf",
	[PROBE_NO_PRIVILEGE] = "no-privilege",
	[PROBE_UNSUPPORTED_KERNEL] = "unsupported-kernel",
	[PROBE_LOAD_FAILED] = "load-failed",
	[PROBE_ATTACH_FAILED] = "attach-failed",
};

static const char *const mark_table[_PROBE_MARK_MAX] = {
	[PROBE_MARK_DAEMON_START] = "daemon-start",
	[PROBE_MARK_PAUSE] = "pause",
	[PROBE_MARK_SAVE_COMPLETE] = "save-complete",
	[PROBE_MARK_REBOOT_REQUEST] = "reboot-request",
	[PROBE_MARK_RESTORE] = "restore",
	[PROBE_MARK_RESUME] = "resume",
};

const char *probe_unavailable_to_string(ProbeUnavailable u) {
	if ((unsigned)u >= _PROBE_UNAVAILABLE_MAX)
		return NULL;
	return unavailable_table[u];
}

const char *probe_mark_to_string(ProbeMark m) {
	if ((unsigned)m >= _PROBE_MARK_MAX)
		return NULL;
	return mark_table[m];
}

static uint64_t now_monotonic_ns(void) {
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

/* libbpf's own messages are for debugging: the reason string is what users see. Its
 * warnings and notes go to our debug level; its own debug level (hundreds of CO-RE
 * relocation lines per load) only with UPGRADED_LIBBPF_DEBUG=1. */
static int libbpf_print_debug(enum libbpf_print_level level, const char *fmt, va_list ap)
        _printf_(2, 0);
static int libbpf_print_debug(enum libbpf_print_level level, const char *fmt, va_list ap) {
	char buf[512];
	size_t l;

	if (log_get_max_level() < LOG_DEBUG)
		return 0;
	if (level == LIBBPF_DEBUG && !streq_ptr(getenv("UPGRADED_LIBBPF_DEBUG"), "1"))
		return 0;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	l = strlen(buf);
	if (l > 0 && buf[l - 1] == '\n')
		buf[l - 1] = 0;
	log_debug("libbpf: %s", buf);
	return 0;
}

static int degrade(Probe *p, ProbeUnavailable why, int err, const char *fmt, ...) _printf_(4, 5);
static int degrade(Probe *p, ProbeUnavailable why, int err, const char *fmt, ...) {
	char buf[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);

	free(p->detail);
	p->detail = NULL;
	if (err != 0) {
		char msg[128];

		/* libbpf's own codes (>= 4000) have no strerror() text */
		if (libbpf_strerror(err, msg, sizeof(msg)) < 0)
			snprintf(msg, sizeof(msg), "error %d", err);
		if (asprintf(&p->detail, "%s: %s", buf, msg) < 0)
			p->detail = NULL;
	} else
		p->detail = strdup(buf);
	if (!p->detail)
		return -ENOMEM;
	p->unavailable = why;

	if (p->rb) {
		ring_buffer__free(p->rb);
		p->rb = NULL;
	}
	if (p->skel) {
		probe_bpf__destroy(p->skel);
		p->skel = NULL;
	}
	log_debug("vCPU probe unavailable (%s): %s", unavailable_table[why], p->detail);
	return 0;
}

static int handle_event(void *ctx, void *data, size_t size) {
	Probe *p = ctx;
	const struct probe_event *e = data;

	if (size < sizeof(*e))
		return 0;
	p->n_events++;
	if (e->vm < p->n_vms && e->kind == PROBE_EV_FIRST_IN) {
		ProbeVm *vm = &p->vms[e->vm];
		if (vm->first_in_event_ns == 0 || e->ts_ns < vm->first_in_event_ns)
			vm->first_in_event_ns = e->ts_ns;
	}
	if (e->vm < p->n_vms)
		log_debug("probe: vm '%s' tid %u event %u at %llu on cpu %u", p->vms[e->vm].name,
		          e->tid, e->kind, (unsigned long long)e->ts_ns, e->cpu);
	return 0;
}

/* Loads and attaches the BPF side, or records why it cannot. */
static int probe_load(Probe *p, const ProbeOptions *opts) {
	LIBBPF_OPTS(bpf_object_open_opts, oo);
	const char *btf = opts->btf_path ?: DEFAULT_BTF_PATH;
	int r;

	if (opts->disabled)
		return degrade(p, PROBE_DISABLED, 0, "the vCPU probe is disabled by configuration");
	if (access(btf, R_OK) < 0)
		return degrade(p, PROBE_NO_BTF, -errno, "kernel BTF '%s' is not readable", btf);
	if (!streq(btf, DEFAULT_BTF_PATH))
		oo.btf_custom_path = btf;

	libbpf_set_print(libbpf_print_debug);

	p->skel = probe_bpf__open_opts(&oo);
	if (!p->skel)
		return degrade(p, PROBE_LOAD_FAILED, -errno, "opening the BPF object failed");
	p->skel->rodata->trace_all = opts->trace_all;

	r = probe_bpf__load(p->skel);
	if (r < 0) {
		/* EPERM: no CAP_BPF/CAP_PERFMON. EACCES is the verifier refusing the
		 * program (e.g. CO-RE relocated against a BTF that is not this kernel's). */
		if (r == -EPERM)
			return degrade(p, PROBE_NO_PRIVILEGE, r,
			               "loading the BPF program was refused");
		if (r == -EACCES)
			return degrade(p, PROBE_LOAD_FAILED, r,
			               "the kernel's verifier rejected the BPF program");
		if (r <= -LIBBPF_ERRNO__LIBELF)
			/* CO-RE could not use this BTF (a foreign or broken file) */
			return degrade(p, PROBE_LOAD_FAILED, r,
			               "loading the BPF program against the BTF in '%s' failed",
			               btf);
		if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) == 0)
			return degrade(p, PROBE_UNSUPPORTED_KERNEL, r,
			               "the kernel has no BPF ring buffer (Linux >= 5.8 needed)");
		/* tp_btf needs 5.5 and sched_switch's prev_state argument 5.18: the
		 * verifier refuses the program with EINVAL on older kernels. */
		return degrade(p, PROBE_LOAD_FAILED, r, "loading the BPF program failed");
	}

	r = probe_bpf__attach(p->skel);
	if (r < 0) {
		if (r == -EPERM)
			return degrade(p, PROBE_NO_PRIVILEGE, r,
			               "attaching to sched_switch was refused");
		return degrade(p, PROBE_ATTACH_FAILED, r, "attaching to sched_switch failed");
	}

	p->rb = ring_buffer__new(bpf_map__fd(p->skel->maps.events), handle_event, p, NULL);
	if (!p->rb)
		return degrade(p, PROBE_ATTACH_FAILED, -errno,
		               "creating the ring buffer reader failed");

	p->unavailable = PROBE_AVAILABLE;
	return 1;
}

int probe_open(const ProbeOptions *opts, Probe **ret) {
	static const ProbeOptions defaults = {};
	Probe *p;
	int r;

	if (!ret)
		return -EINVAL;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	r = probe_load(p, opts ?: &defaults);
	if (r < 0) {
		probe_close(p);
		return r;
	}
	*ret = p;
	return r;
}

Probe *probe_close(Probe *p) {
	if (!p)
		return NULL;
	ring_buffer__free(p->rb);
	probe_bpf__destroy(p->skel);
	for (size_t i = 0; i < p->n_vms; i++) {
		free(p->vms[i].name);
		free(p->vms[i].tids);
	}
	free(p->vms);
	free(p->detail);
	free(p);
	return NULL;
}

ProbeUnavailable probe_unavailable(const Probe *p, const char **ret_detail) {
	if (ret_detail)
		*ret_detail = p->detail;
	return p->unavailable;
}

int probe_add_vm(Probe *p, const char *name, uint32_t *ret_vm) {
	ProbeVm *n;
	char *copy;

	if (!p || !name || !ret_vm || p->n_vms >= PROBE_MAX_TIDS)
		return -EINVAL;
	copy = strdup(name);
	if (!copy)
		return -ENOMEM;
	n = reallocarray(p->vms, p->n_vms + 1, sizeof(*n));
	if (!n) {
		free(copy);
		return -ENOMEM;
	}
	p->vms = n;
	p->vms[p->n_vms] = (ProbeVm){ .name = copy };
	*ret_vm = (uint32_t)p->n_vms++;
	return 0;
}

static ProbeVm *vm_get(Probe *p, uint32_t vm) {
	if (!p || vm >= p->n_vms)
		return NULL;
	return &p->vms[vm];
}

static int tid_config_write(Probe *p, uint32_t vm, pid_t tid, uint64_t window_ns) {
	struct probe_tid_config cfg = { .window_ns = window_ns, .vm = vm };
	__u32 key = (__u32)tid;

	if (bpf_map__update_elem(p->skel->maps.tracked, &key, sizeof(key), &cfg, sizeof(cfg),
	                         BPF_ANY) < 0)
		return -errno;
	return 0;
}

int probe_track_tid(Probe *p, uint32_t vm, pid_t tid) {
	ProbeVm *v = vm_get(p, vm);
	__u32 key = (__u32)tid;
	pid_t *n;
	int r;

	if (!v || tid <= 0)
		return -EINVAL;
	if (!p->skel)
		return -EOPNOTSUPP;
	for (size_t i = 0; i < v->n_tids; i++)
		if (v->tids[i] == tid)
			return 0;

	n = reallocarray(v->tids, v->n_tids + 1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	v->tids = n;

	/* A reused tid must not inherit the figures of a thread that died. */
	(void)bpf_map__delete_elem(p->skel->maps.state, &key, sizeof(key), 0);
	r = tid_config_write(p, vm, tid, v->window_ns);
	if (r < 0)
		return r;
	v->tids[v->n_tids++] = tid;
	return 0;
}

bool probe_parse_vcpu_comm(const char *comm, unsigned *ret_index) {
	unsigned long idx;
	const char *s;
	char *end;

	if (!comm || strncmp(comm, "CPU ", 4) != 0)
		return false;
	s = comm + 4;
	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	idx = strtoul(s, &end, 10);
	if (errno != 0 || idx > 65535 || end == s)
		return false;
	if (!streq(end, "/KVM") && !streq(end, "/TCG") && !streq(end, "/KVM\n") &&
	    !streq(end, "/TCG\n"))
		return false;
	if (ret_index)
		*ret_index = (unsigned)idx;
	return true;
}

int probe_find_vcpu_threads(const char *proc_root, pid_t pid, pid_t **ret_tids, size_t *ret_n) {
	_cleanup_free_ char *dir = NULL;
	_cleanup_free_ pid_t *tids = NULL;
	size_t n = 0;
	struct dirent *de;
	DIR *d;

	if (!proc_root || pid <= 0 || !ret_tids || !ret_n)
		return -EINVAL;
	if (asprintf(&dir, "%s/%d/task", proc_root, (int)pid) < 0)
		return -ENOMEM;
	d = opendir(dir);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		_cleanup_free_ char *path = NULL;
		char comm[64] = {};
		unsigned long tid;
		char *end;
		ssize_t l;
		int fd;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		tid = strtoul(de->d_name, &end, 10);
		if (*end || tid == 0 || tid > INT32_MAX)
			continue;
		if (asprintf(&path, "%s/%s/comm", dir, de->d_name) < 0) {
			closedir(d);
			return -ENOMEM;
		}
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue; /* the thread exited meanwhile */
		l = read(fd, comm, sizeof(comm) - 1);
		close(fd);
		if (l <= 0)
			continue;
		comm[l] = 0;
		if (!probe_parse_vcpu_comm(comm, NULL))
			continue;
		pid_t *nt = reallocarray(tids, n + 1, sizeof(*nt));
		if (!nt) {
			closedir(d);
			return -ENOMEM;
		}
		tids = nt;
		tids[n++] = (pid_t)tid;
	}
	closedir(d);
	*ret_tids = TAKE_PTR(tids);
	*ret_n = n;
	return 0;
}

int probe_track_qemu(Probe *p, uint32_t vm, pid_t qemu_pid) {
	_cleanup_free_ pid_t *tids = NULL;
	size_t n;
	int r;

	if (!vm_get(p, vm))
		return -EINVAL;
	if (!p->skel)
		return -EOPNOTSUPP;
	r = probe_find_vcpu_threads("/proc", qemu_pid, &tids, &n);
	if (r < 0)
		return r;
	if (n == 0)
		return -ESRCH;
	for (size_t i = 0; i < n; i++) {
		r = probe_track_tid(p, vm, tids[i]);
		if (r < 0)
			return r;
	}
	return (int)n;
}

int probe_window_start(Probe *p, uint32_t vm, uint64_t *ret_ns) {
	ProbeVm *v = vm_get(p, vm);
	uint64_t now;

	if (!v)
		return -EINVAL;
	now = now_monotonic_ns();
	if (p->skel)
		for (size_t i = 0; i < v->n_tids; i++) {
			int r = tid_config_write(p, vm, v->tids[i], now);
			if (r < 0)
				return r;
		}
	v->window_ns = now;
	if (ret_ns)
		*ret_ns = now;
	return 0;
}

int probe_mark_at(Probe *p, uint32_t vm, ProbeMark m, uint64_t ns) {
	if (!p || (unsigned)m >= _PROBE_MARK_MAX)
		return -EINVAL;
	if (vm == PROBE_HOST) {
		p->host_marks[m] = ns;
		return 0;
	}
	if (!vm_get(p, vm))
		return -EINVAL;
	p->vms[vm].marks[m] = ns;
	return 0;
}

int probe_mark(Probe *p, uint32_t vm, ProbeMark m) {
	return probe_mark_at(p, vm, m, now_monotonic_ns());
}

int probe_fd(const Probe *p) {
	if (!p || !p->rb)
		return -EOPNOTSUPP;
	return ring_buffer__epoll_fd(p->rb);
}

int probe_consume(Probe *p) {
	if (!p || !p->rb)
		return -EOPNOTSUPP;
	return ring_buffer__consume(p->rb);
}

int probe_result(Probe *p, uint32_t vm, ProbeVmResult *ret) {
	ProbeVm *v = vm_get(p, vm);
	ProbeVmResult res = {};

	if (!v || !ret)
		return -EINVAL;

	memcpy(res.marks, v->marks, sizeof(res.marks));
	res.window_ns = v->window_ns;
	res.n_threads = (unsigned)v->n_tids;
	res.available = p->skel != NULL;
	if (!res.available) {
		*ret = res;
		return 0;
	}

	for (size_t i = 0; i < v->n_tids; i++) {
		struct probe_tid_state s;
		__u32 key = (__u32)v->tids[i];
		uint64_t stopped = 0;
		bool fresh;

		if (bpf_map__lookup_elem(p->skel->maps.state, &key, sizeof(key), &s, sizeof(s), 0) <
		    0)
			continue; /* never switched since tracked */

		/* The kernel restarts the window fields lazily, at the thread's next switch. */
		fresh = s.window_ns == v->window_ns;
		if (!fresh) {
			s.last_out_before_ns = s.last_out_ns;
			s.first_in_ns = 0;
			s.first_sleep_ns = 0;
		}
		if (s.flags & PROBE_STATE_EXITED)
			res.n_exited++;
		res.run_ns += s.run_ns;
		res.last_out_ns = MAX(res.last_out_ns, s.last_out_ns);

		if (v->window_ns != 0) {
			if (s.first_sleep_ns != 0)
				stopped = s.first_sleep_ns;
			else if (s.last_in_ns < v->window_ns && s.last_out_ns >= s.last_in_ns)
				/* asleep since before the window: it stopped when it last left */
				stopped = s.last_out_before_ns;
			else if (s.flags & PROBE_STATE_EXITED)
				stopped = s.last_out_ns;
			else
				res.n_running++;
			res.last_ran_ns = MAX(res.last_ran_ns, stopped);
			if (s.first_in_ns != 0 &&
			    (res.first_ran_ns == 0 || s.first_in_ns < res.first_ran_ns))
				res.first_ran_ns = s.first_in_ns;
		}
	}
	*ret = res;
	return 0;
}

static int json_add_u64(struct json_object *o, const char *key, uint64_t v) {
	return json_add_take(o, key, json_object_new_uint64(v));
}

static int json_add_string(struct json_object *o, const char *key, const char *v) {
	return json_add_take(o, key, json_object_new_string(v));
}

static struct json_object *marks_to_json(const uint64_t marks[_PROBE_MARK_MAX]) {
	struct json_object *o = json_object_new_object();

	if (!o)
		return NULL;
	for (unsigned m = 0; m < _PROBE_MARK_MAX; m++)
		if (marks[m] != 0 && json_add_u64(o, mark_table[m], marks[m]) < 0) {
			json_object_put(o);
			return NULL;
		}
	return o;
}

int probe_vm_result_to_json(const ProbeVmResult *r, const char *name, struct json_object **ret) {
	struct json_object *o;
	int k = 0;

	if (!r || !ret)
		return -EINVAL;
	o = json_object_new_object();
	if (!o)
		return -ENOMEM;
	if (name)
		k |= json_add_string(o, "name", name);
	k |= json_add_take(o, "available", json_object_new_boolean(r->available));
	k |= json_add_u64(o, "threads", r->n_threads);
	k |= json_add_take(o, "marks_ns", marks_to_json(r->marks));
	if (r->window_ns)
		k |= json_add_u64(o, "window_ns", r->window_ns);
	if (r->available) {
		k |= json_add_u64(o, "exited", r->n_exited);
		k |= json_add_u64(o, "still_running", r->n_running);
		k |= json_add_u64(o, "run_ns", r->run_ns);
		if (r->last_ran_ns)
			k |= json_add_u64(o, "vcpu_last_ran_ns", r->last_ran_ns);
		if (r->first_ran_ns)
			k |= json_add_u64(o, "vcpu_first_ran_ns", r->first_ran_ns);
		if (r->last_out_ns)
			k |= json_add_u64(o, "vcpu_last_out_ns", r->last_out_ns);
	}
	if (k != 0) {
		json_object_put(o);
		return -ENOMEM;
	}
	*ret = o;
	return 0;
}

/* Reads an optional unsigned field; -EBADMSG when present with the wrong type. */
static int json_get_u64(struct json_object *o, const char *key, uint64_t *ret) {
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0)
		return -EBADMSG;
	*ret = json_object_get_uint64(v);
	return 0;
}

int probe_vm_result_from_json(struct json_object *o, ProbeVmResult *ret) {
	struct json_object *v, *marks;
	ProbeVmResult r = {};
	uint64_t n = 0, exited = 0, running = 0;
	int k = 0;

	if (!o || !ret)
		return -EINVAL;
	if (!json_object_is_type(o, json_type_object) ||
	    !json_object_object_get_ex(o, "available", &v) ||
	    !json_object_is_type(v, json_type_boolean))
		return -EBADMSG;
	r.available = json_object_get_boolean(v);
	k |= json_get_u64(o, "threads", &n);
	k |= json_get_u64(o, "exited", &exited);
	k |= json_get_u64(o, "still_running", &running);
	k |= json_get_u64(o, "window_ns", &r.window_ns);
	k |= json_get_u64(o, "run_ns", &r.run_ns);
	k |= json_get_u64(o, "vcpu_last_ran_ns", &r.last_ran_ns);
	k |= json_get_u64(o, "vcpu_first_ran_ns", &r.first_ran_ns);
	k |= json_get_u64(o, "vcpu_last_out_ns", &r.last_out_ns);
	if (k != 0 || n > PROBE_MAX_TIDS || exited > n || running > n)
		return -EBADMSG;
	r.n_threads = (unsigned)n;
	r.n_exited = (unsigned)exited;
	r.n_running = (unsigned)running;
	if (json_object_object_get_ex(o, "marks_ns", &marks)) {
		if (!json_object_is_type(marks, json_type_object))
			return -EBADMSG;
		for (unsigned m = 0; m < _PROBE_MARK_MAX; m++)
			if (json_get_u64(marks, mark_table[m], &r.marks[m]) < 0)
				return -EBADMSG;
	}
	*ret = r;
	return 0;
}

static struct json_object *vm_to_json(Probe *p, uint32_t vm) {
	struct json_object *o = NULL;
	ProbeVmResult r;

	if (probe_result(p, vm, &r) < 0 || probe_vm_result_to_json(&r, p->vms[vm].name, &o) < 0)
		return NULL;
	return o;
}

int probe_to_json(Probe *p, struct json_object **ret) {
	struct json_object *o, *vms, *missing;
	int k = 0;

	if (!p || !ret)
		return -EINVAL;
	o = json_object_new_object();
	if (!o)
		return -ENOMEM;

	k |= json_add_take(o, "available", json_object_new_boolean(p->skel != NULL));
	k |= json_add_string(o, "clock", "CLOCK_MONOTONIC");
	if (p->skel) {
		k |= json_add_u64(o, "dropped_events", p->skel->bss->dropped_events);
		k |= json_add_u64(o, "events", p->n_events);
	} else {
		k |= json_add_string(o, "reason", unavailable_table[p->unavailable]);
		k |= json_add_string(o, "detail", strempty(p->detail));
		missing = json_object_new_array();
		if (missing) {
			k |= json_object_array_add(missing,
			                           json_object_new_string("vcpu_last_ran"));
			k |= json_object_array_add(missing,
			                           json_object_new_string("vcpu_first_ran"));
		}
		k |= json_add_take(o, "missing", missing);
	}
	k |= json_add_take(o, "marks_ns", marks_to_json(p->host_marks));
	vms = json_object_new_array();
	k |= json_add_take(o, "vms", vms);
	for (uint32_t i = 0; vms && i < p->n_vms; i++) {
		struct json_object *v = vm_to_json(p, i);
		if (!v || json_object_array_add(vms, v) < 0) {
			json_object_put(v);
			k = -1;
			break;
		}
	}
	if (k != 0) {
		json_object_put(o);
		return -ENOMEM;
	}
	*ret = o;
	return 0;
}
