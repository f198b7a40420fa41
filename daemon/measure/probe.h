/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The contract between probe.bpf.c (kernel side) and probe.c (loader). Fixed-width
 * types only: the same layout is read by the BPF program and by userspace.
 *
 * Clock: every timestamp is bpf_ktime_get_ns(), i.e. CLOCK_MONOTONIC of the
 * running kernel. The daemon stamps its own moments with
 * clock_gettime(CLOCK_MONOTONIC), so both share one axis per kernel.
 */

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Value of the "tracked" hash map (key: tid), written by userspace only. */
struct probe_tid_config {
	__u64 window_ns; /* window start (CLOCK_MONOTONIC); 0 = no window yet */
	__u32 vm;        /* caller's VM index, copied into events */
	__u32 pad;
};

#define PROBE_STATE_EXITED 0x1u /* the thread died: later switches of this tid are ignored */

/* Value of the "state" hash map (key: tid), written by the BPF program only. */
struct probe_tid_state {
	__u64 last_in_ns;         /* most recent switch-in */
	__u64 last_out_ns;        /* most recent switch-out (any reason) */
	__u64 window_ns;          /* the window the fields below refer to */
	__u64 last_out_before_ns; /* last switch-out before window_ns */
	__u64 first_in_ns;        /* first switch-in at or after window_ns */
	__u64 first_sleep_ns; /* first non-preempted switch-out to a sleeping/stopped state at or after window_ns */
	__u64 run_ns; /* total on-CPU time seen by the probe */
	__u32 nr_in;
	__u32 nr_out;
	__u32 flags; /* PROBE_STATE_* */
	__u32 pad;
};

enum probe_event_kind {
	PROBE_EV_FIRST_IN = 1,    /* first switch-in after the window start */
	PROBE_EV_FIRST_SLEEP = 2, /* first sleep/stop after the window start */
	PROBE_EV_EXIT = 3,        /* the thread's final switch-out */
	PROBE_EV_SWITCH_IN = 4,   /* every switch-in (only with trace_all) */
	PROBE_EV_SWITCH_OUT = 5,  /* every switch-out (only with trace_all) */
};

/* Ring buffer record. */
struct probe_event {
	__u64 ts_ns;
	__u32 tid;
	__u32 vm;
	__u32 kind; /* enum probe_event_kind */
	__u32 cpu;
	__u32 prev_state; /* task state at switch-out, 0 for switch-in */
	__u32 pad;
};

#define PROBE_MAX_TIDS 4096
