/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The daemon's view of the vCPU probe.
 *
 * One Probe per kernel: open it when the window starts (old kernel: before the
 * first pause; new kernel: at daemon start), add the VMs, track their vCPU
 * threads, mark the window start of each VM (old kernel: right before pausing
 * it; new kernel: right before resuming it), add probe_fd() to sd-event with
 * EPOLLIN and call probe_consume() when it is readable, read probe_result()
 * (old kernel: before the reboot request, into the handoff record) and close.
 *
 * When BPF is unavailable the Probe still opens, "degraded": it records the
 * daemon's own moments (probe_mark) but has no vCPU figures, and
 * probe_unavailable() names the reason the report must carry.
 *
 * Every timestamp is CLOCK_MONOTONIC of the running kernel, in ns.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>

typedef struct Probe Probe;

typedef enum ProbeUnavailable {
	PROBE_AVAILABLE = 0,
	PROBE_DISABLED,     /* "disabled": turned off by configuration */
	PROBE_NO_BTF,       /* "no-btf": the kernel exposes no BTF (/sys/kernel/btf/vmlinux) */
	PROBE_NO_PRIVILEGE, /* "no-privilege": bpf() refused (EPERM) */
	PROBE_UNSUPPORTED_KERNEL, /* "unsupported-kernel": no ring buffer or tp_btf support */
	PROBE_LOAD_FAILED, /* "load-failed": the verifier (EACCES/EINVAL) or CO-RE relocation refused */
	PROBE_ATTACH_FAILED, /* "attach-failed": the tracepoint could not be attached */
	_PROBE_UNAVAILABLE_MAX,
} ProbeUnavailable;

/* Userspace moments the daemon stamps itself (CLOCK_MONOTONIC). */
typedef enum ProbeMark {
	PROBE_MARK_DAEMON_START,   /* "daemon-start" (host) */
	PROBE_MARK_PAUSE,          /* "pause": virDomainSuspend returned */
	PROBE_MARK_SAVE_COMPLETE,  /* "save-complete": the checkpoint is on disk */
	PROBE_MARK_REBOOT_REQUEST, /* "reboot-request" (host): right before kexec */
	PROBE_MARK_RESTORE,        /* "restore": the restore (paused) finished */
	PROBE_MARK_RESUME,         /* "resume": virDomainResume returned */
	_PROBE_MARK_MAX,
} ProbeMark;

#define PROBE_HOST UINT32_MAX /* the vm argument of host-wide marks */

typedef struct ProbeOptions {
	bool disabled;        /* record marks only; never touch bpf() */
	bool trace_all;       /* an event for every switch of a tracked thread (debugging) */
	const char *btf_path; /* NULL: /sys/kernel/btf/vmlinux */
} ProbeOptions;

/* Per-VM figures, on this kernel's CLOCK_MONOTONIC; 0 means "not observed". */
typedef struct ProbeVmResult {
	bool available;     /* false: the BPF figures below are missing */
	unsigned n_threads; /* vCPU threads tracked */
	unsigned n_exited;  /* of which exited (e.g. QEMU quit after the save) */
	unsigned n_running; /* of which never stopped after the window start */
	uint64_t window_ns; /* the window start (probe_window_start) */
	uint64_t
	        last_ran_ns; /* the latest moment any vCPU thread stopped running after the window start */
	uint64_t
	        first_ran_ns; /* the earliest switch-in of any vCPU thread at/after the window start */
	uint64_t last_out_ns; /* the latest switch-out of any thread, whatever the reason */
	uint64_t run_ns;      /* on-CPU time of all threads while tracked */
	uint64_t marks[_PROBE_MARK_MAX];
} ProbeVmResult;

const char *probe_unavailable_to_string(ProbeUnavailable u);
const char *probe_mark_to_string(ProbeMark m);

/* Returns 1 with the BPF program attached, 0 when the probe is degraded
 * (see probe_unavailable()), -ENOMEM/-EINVAL on hard failures. */
int probe_open(const ProbeOptions *opts, Probe **ret);
Probe *probe_close(Probe *p);
static inline void probe_closep(Probe **p) {
	if (*p)
		probe_close(*p);
}

/* PROBE_AVAILABLE or the reason; *ret_detail (optional) is a human sentence. */
ProbeUnavailable probe_unavailable(const Probe *p, const char **ret_detail);

/* Registers a VM (by libvirt name) and returns its index. */
int probe_add_vm(Probe *p, const char *name, uint32_t *ret_vm);
/* Starts tracking one thread as a vCPU of vm. -EOPNOTSUPP when degraded. */
int probe_track_tid(Probe *p, uint32_t vm, pid_t tid);
/* Finds QEMU's vCPU threads ("CPU n/KVM", "CPU n/TCG") under /proc/pid/task and tracks
 * them; returns how many. */
int probe_track_qemu(Probe *p, uint32_t vm, pid_t qemu_pid);
/* Opens the window of vm now (CLOCK_MONOTONIC, returned in *ret_ns): the probe
 * records each thread's first sleep and first run at or after this moment. */
int probe_window_start(Probe *p, uint32_t vm, uint64_t *ret_ns);
/* Stamps a userspace moment now / at ns. vm may be PROBE_HOST for host moments. */
int probe_mark(Probe *p, uint32_t vm, ProbeMark m);
int probe_mark_at(Probe *p, uint32_t vm, ProbeMark m, uint64_t ns);

/* The fd to watch for EPOLLIN (ring_buffer__epoll_fd()); -EOPNOTSUPP when degraded. */
int probe_fd(const Probe *p);
/* Drains the ring buffer without blocking; returns the number of events. */
int probe_consume(Probe *p);

int probe_result(Probe *p, uint32_t vm, ProbeVmResult *ret);

/* The report fragment: {"available","reason","detail","clock","missing",
 * "dropped_events","marks",vms:[...]} (see docs/measurement.md). */
int probe_to_json(Probe *p, struct json_object **ret);

/* One VM's figures as JSON (the "vms" entries of probe_to_json()), and back: the old
 * kernel's figures travel to the new kernel in the handoff record this way.
 * from_json: -EBADMSG on a malformed object (*ret untouched). */
int probe_vm_result_to_json(const ProbeVmResult *r, const char *name, struct json_object **ret);
int probe_vm_result_from_json(struct json_object *o, ProbeVmResult *ret);

/* Pure helpers, exported for tests. */
bool probe_parse_vcpu_comm(const char *comm, unsigned *ret_index);
/* Lists the vCPU thread ids of pid under proc_root ("/proc" normally). */
int probe_find_vcpu_threads(const char *proc_root, pid_t pid, pid_t **ret_tids, size_t *ret_n);
