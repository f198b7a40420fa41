/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Shared by measure.c (the seams, the probe, the VM marks) and measure-report.c (the
 * report's measured sections); not part of the API (measure.h).
 */

#include <json-c/json.h>
#include <pthread.h>
#include <systemd/sd-event.h>

#include "measure.h"
#include "probe-open-bounded.h"

#define MEASURE_FIRST_RUN_WAIT_MS 1000 /* how long the report waits for resumed vCPUs to run */
#define MEASURE_FILE_MAX          (16u * 1024u * 1024u)

typedef struct MeasureVm {
	char *name;
	uint32_t index; /* in the probe of this kernel */
} MeasureVm;

struct Measure {
	char *root;
	char *bus_address; /* where systemd is asked for the critical path; NULL: system bus */
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

void measure_close_probe(Measure *m);

/* false when absent or malformed: the record is input from a previous boot. */
bool measure_sample_from_json(json_object *o, TimebaseSample *ret);

json_object *measure_get_obj(json_object *o, const char *key);

/* The report's critical_path (measure-chain.c): systemd's unit chain on the new kernel,
 * the old boot's unit stops after the reboot request. Blocks for a bounded time. */
void measure_report_critical_path(Measure *m, const Update *u, const TimebaseInput *in,
                                  const Timebase *tb, bool have_tb, bool have_reboot,
                                  json_object *report, json_object *missing);

/* The report's purgatory.relocation (measure-relocation.c): "Starting new kernel" in
 * the old kernel's shutdown dump (pstore) to purgatory's entry stamp, or why not. When
 * it is measured (not estimated) and phases has a stamp-bounded "shutdown", that phase
 * ends where the slice begins and a "relocation" phase follows it. */
void measure_report_relocation(Measure *m, const Update *u, const TimebaseInput *in,
                               json_object *report, json_object *phases, json_object *missing);

/* Appends {figure, reason} to the report's "missing" array. */
void measure_add_missing(json_object *missing, const char *figure, const char *fmt, ...)
        _printf_(3, 4);

int measure_root_file(Measure *m, const char *path, char **ret_data, size_t *ret_size);

/* Adds the measured sections to a report being built (defaults from report_build()
 * are replaced section by section). */
int measure_report_extend(Context *c, Update *u, json_object *report, void *userdata);
