// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Watches sched_switch for the threads userspace tracks (the vCPU threads of the
 * VMs being updated) and records, per thread, when it last left the CPU and when
 * it first ran or first went to sleep after a per-thread "window start". The
 * state map holds the authoritative figures; the ring buffer tells the daemon
 * promptly when a first-run / first-sleep / exit happened.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "probe.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Settings, fixed at load time by the loader. */
const volatile bool trace_all = false; /* one event per switch of a tracked thread */

/* Counters read back by userspace through the mmapped .bss. */
__u64 dropped_events = 0;
__u64 state_full = 0;

#define TASK_RUNNING_STATE 0x0000u
#define TASK_DEAD_STATE    0x0080u

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PROBE_MAX_TIDS);
	__type(key, __u32);
	__type(value, struct probe_tid_config);
} tracked SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PROBE_MAX_TIDS);
	__type(key, __u32);
	__type(value, struct probe_tid_state);
} state SEC(".maps");

static void emit(__u64 now, __u32 tid, const struct probe_tid_config *cfg, __u32 kind,
                 __u32 prev_state) {
	struct probe_event *e;

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&dropped_events, 1);
		return;
	}
	e->ts_ns = now;
	e->tid = tid;
	e->vm = cfg->vm;
	e->kind = kind;
	e->cpu = bpf_get_smp_processor_id();
	e->prev_state = prev_state;
	e->pad = 0;
	bpf_ringbuf_submit(e, 0);
}

/* Looks up (creating on first sight) the state of tid, and restarts its
 * "after the window" figures when userspace moved the window. */
static struct probe_tid_state *state_for(__u32 tid, const struct probe_tid_config *cfg) {
	struct probe_tid_state *s, zero = {};

	s = bpf_map_lookup_elem(&state, &tid);
	if (!s) {
		zero.window_ns = cfg->window_ns;
		if (bpf_map_update_elem(&state, &tid, &zero, BPF_NOEXIST) < 0 &&
		    !bpf_map_lookup_elem(&state, &tid)) {
			__sync_fetch_and_add(&state_full, 1);
			return NULL;
		}
		s = bpf_map_lookup_elem(&state, &tid);
		if (!s)
			return NULL;
	}
	if (s->window_ns != cfg->window_ns) {
		s->window_ns = cfg->window_ns;
		s->last_out_before_ns = s->last_out_ns;
		s->first_in_ns = 0;
		s->first_sleep_ns = 0;
	}
	return s;
}

static void switched_out(__u64 now, __u32 tid, bool preempt, __u32 prev_state) {
	struct probe_tid_config *cfg;
	struct probe_tid_state *s;
	bool in_window;

	cfg = bpf_map_lookup_elem(&tracked, &tid);
	if (!cfg)
		return;
	s = state_for(tid, cfg);
	if (!s || (s->flags & PROBE_STATE_EXITED))
		return;

	if (s->last_in_ns > s->last_out_ns)
		s->run_ns += now - s->last_in_ns;
	s->last_out_ns = now;
	s->nr_out++;

	in_window = cfg->window_ns != 0 && now >= cfg->window_ns;
	if (!in_window)
		s->last_out_before_ns = now;

	if (prev_state & TASK_DEAD_STATE) {
		s->flags |= PROBE_STATE_EXITED;
		emit(now, tid, cfg, PROBE_EV_EXIT, prev_state);
		return;
	}
	/* A preempted thread stays runnable; only a real sleep or stop counts. */
	if (in_window && !preempt && prev_state != TASK_RUNNING_STATE && s->first_sleep_ns == 0) {
		s->first_sleep_ns = now;
		emit(now, tid, cfg, PROBE_EV_FIRST_SLEEP, prev_state);
	}
	if (trace_all)
		emit(now, tid, cfg, PROBE_EV_SWITCH_OUT, prev_state);
}

static void switched_in(__u64 now, __u32 tid) {
	struct probe_tid_config *cfg;
	struct probe_tid_state *s;

	cfg = bpf_map_lookup_elem(&tracked, &tid);
	if (!cfg)
		return;
	s = state_for(tid, cfg);
	if (!s || (s->flags & PROBE_STATE_EXITED))
		return;

	s->last_in_ns = now;
	s->nr_in++;
	if (cfg->window_ns != 0 && now >= cfg->window_ns && s->first_in_ns == 0) {
		s->first_in_ns = now;
		emit(now, tid, cfg, PROBE_EV_FIRST_IN, 0);
	}
	if (trace_all)
		emit(now, tid, cfg, PROBE_EV_SWITCH_IN, 0);
}

/* Kernel >= 5.18 passes prev_state; the typed tp_btf context is CO-RE checked at load. */
SEC("tp_btf/sched_switch")
int BPF_PROG(handle_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
             unsigned int prev_state) {
	__u64 now = bpf_ktime_get_ns();

	switched_out(now, (__u32)prev->pid, preempt, prev_state);
	switched_in(now, (__u32)next->pid);
	return 0;
}
