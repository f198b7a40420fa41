/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The daemon's measurement of an update: the vCPU probe on both kernels, the
 * clock samples that put both kernels on one time axis, and the boot analysis
 * of the new kernel. It plugs into the state machine through Context.measure
 * (handoff_prepare, report_extend) and one pre-handoff hook ("measure-open"),
 * and gives the VM steps a small API to name their moments.
 *
 * Nothing here can fail an update: every figure it cannot produce is listed in
 * the report's "missing" array with the reason (docs/report.md).
 *
 * Calls the VM steps make (old kernel, in this order per VM):
 *   measure_vm_tracking(m, name, qemu_pid);         once QEMU's pid is known
 *   measure_window_start(m, name);                  right before virDomainSuspend
 *   measure_mark(m, name, PROBE_MARK_PAUSE);        after it returned
 *   measure_mark(m, name, PROBE_MARK_SAVE_COMPLETE);after the checkpoint is on disk
 * and on the new kernel:
 *   measure_mark(m, name, PROBE_MARK_RESTORE);      the restore (paused) finished
 *   measure_vm_tracking(m, name, qemu_pid);         the restored QEMU exists
 *   measure_window_start(m, name);                  right before virDomainResume
 *   measure_mark(m, name, PROBE_MARK_RESUME);       after it returned
 * daemon/vm/vm-steps-measure.c makes them from the VM library's VmEvent callback (vm/vm.h), at the
 * moments themselves, on the VM library's worker threads for restores: these calls
 * (and measure_vm_outcome()) are thread-safe. The reboot request and the daemon
 * start are marked here, in the probe and as a line in the kernel log
 * ("upgraded: reboot-request update=ID", "upgraded: daemon-start update=ID", level
 * notice, only when /dev/kmsg is the kernel's device) that a console shows to an
 * outside clock.
 */

#include <stdbool.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include <json-c/json.h>

#include "context.h"
#include "probe-loader.h"
#include "timebase.h"

typedef struct Measure Measure;

typedef struct MeasureOptions {
	const char *root;        /* prefixes /proc/cpuinfo, /proc/cmdline, /dev/kmsg; NULL: "/" */
	const char *bus_address; /* the daemon's bus, where systemd is; NULL: the system bus */
	sd_event *event;         /* the probe's ring buffer is consumed here; NULL: on demand */
	bool probe_disabled;     /* configuration: marks only, never bpf() */
	const char *btf_path;    /* NULL: the kernel's; tests point it at a missing file */
} MeasureOptions;

int measure_new(const MeasureOptions *opts, Measure **ret);
Measure *measure_free(Measure *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(Measure *, measure_free);

/* Registers the "measure-open" pre-handoff step and the Context.measure seams.
 * Call right after context_new(), before any VM step is registered, so the probe
 * is open before the first VM is paused. */
int measure_attach(Measure *m, Context *c);

/* At daemon start, after context_load() and before context_recover(): when an
 * update waits for completion after a kexec (its handoff record comes from another
 * boot), takes the new kernel's clock sample, opens the probe and marks
 * "daemon-start". Returns 1 when it did, 0 when there was nothing to measure. */
int measure_daemon_start(Measure *m, Context *c);

/* The VM steps' API (see above). vm is the libvirt domain name; NULL in
 * measure_mark() is the host. Each returns 0 on success, -errno otherwise, and
 * may be ignored: a failure only removes figures from the report. */
int measure_vm_tracking(Measure *m, const char *vm, pid_t qemu_pid);
int measure_window_start(Measure *m, const char *vm);
int measure_mark(Measure *m, const char *vm, ProbeMark mark);

/* Marks from a VM outcome change, for the VM steps' progress callback (VmProgressCb,
 * called on the daemon's thread): "paused" -> pause, "saved" -> save-complete,
 * "restored" -> restore, "resumed" -> resume; other outcomes are ignored (0). A mark
 * measure_mark() already stamped is kept: the progress report comes later than the
 * moment.
 * -EINVAL for an unknown outcome name. The vCPU figures still need
 * measure_vm_tracking() and measure_window_start() right before suspend/resume. */
int measure_vm_outcome(Measure *m, const char *vm, const char *outcome);

/* The probe of the running kernel (NULL before it was opened). For tests. */
Probe *measure_probe(Measure *m);
