/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fileio.h"
#include "handoff-mode.h"
#include "json-util.h"
#include "macros.h"
#include "metrics.h"
#include "report-schema.h"

/* Every state Describe() reports as "State" (idle, or the active update's). */
static const char *const daemon_states[] = { "idle", "staged", "committing", "completing" };
/* Every state an update record can be in (daemon/update.c); the first
 * N_ACTIVE_STATES are not terminal: a record in one is the active update. */
#define N_ACTIVE_STATES 3
static const char *const record_states[] = { "staged", "committing", "completing",
	                                     "done",   "cancelled",  "failed" };

/* ---- JSON lookups: NULL for anything absent or of another type ---- */

static json_object *jget(json_object *o, const char *k) {
	json_object *v = NULL;

	if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, k, &v))
		return NULL;
	return v;
}

static const char *jstr(json_object *o, const char *k) {
	json_object *v = jget(o, k);

	return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

static json_object *jarray(json_object *o, const char *k) {
	json_object *v = jget(o, k);

	return v && json_object_is_type(v, json_type_array) ? v : NULL;
}

static size_t jlen(json_object *a) {
	return a ? json_object_array_length(a) : 0;
}

static bool jint(json_object *v, int64_t *ret) {
	if (!v || !json_object_is_type(v, json_type_int))
		return false;
	*ret = json_object_get_int64(v);
	return true;
}

/* ---- the exposition format ---- */

/* A label value: backslash, double quote and line feed escaped. */
static void put_value(FILE *f, const char *v) {
	fputc('"', f);
	for (const char *p = v ?: ""; *p; p++)
		if (*p == '\\' || *p == '"')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else
			fputc(*p, f);
	fputc('"', f);
}

static void family(FILE *f, const char *name, const char *help) {
	fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
}

/* One sample: labels is NULL or a NULL-terminated list of name, value pairs. */
static void sample(FILE *f, const char *name, const char *const *labels, const char *value) {
	fputs(name, f);
	for (size_t i = 0; labels && labels[i]; i += 2) {
		fprintf(f, "%s%s=", i == 0 ? "{" : ",", labels[i]);
		put_value(f, labels[i + 1]);
	}
	fprintf(f, "%s %s\n", labels && labels[0] ? "}" : "", value);
}

/* An integer count of units of 10^-digits as an exact decimal: (1500000, 6) -> "1.5". */
static const char *fixed(int64_t v, int digits, char buf[static 48]) {
	int64_t scale = 1;
	uint64_t a = v < 0 ? -(uint64_t)v : (uint64_t)v;
	size_t n;

	for (int i = 0; i < digits; i++)
		scale *= 10;
	n = (size_t)snprintf(buf, 48, "%s%" PRIu64 ".%0*" PRIu64, v < 0 ? "-" : "",
	                     a / (uint64_t)scale, digits, a % (uint64_t)scale);
	while (n > 0 && buf[n - 1] == '0')
		buf[--n] = 0;
	if (n > 0 && buf[n - 1] == '.')
		buf[--n] = 0;
	return buf;
}

/* A family of one unlabelled sample, left out entirely when the figure is null. */
static void gauge_ns(FILE *f, const char *name, const char *help, json_object *ns) {
	char buf[48];
	int64_t v;

	if (!jint(ns, &v))
		return;
	family(f, name, help);
	sample(f, name, NULL, fixed(v, 9, buf));
}

static void gauge_usec(FILE *f, const char *name, const char *help, bool have, int64_t usec) {
	char buf[48];

	if (!have)
		return;
	family(f, name, help);
	sample(f, name, NULL, fixed(usec, 6, buf));
}

/* A state set: one sample per possible value, 1 for the current one. */
static void stateset(FILE *f, const char *name, const char *help, const char *label,
                     const char *const *values, size_t n, const char *current) {
	family(f, name, help);
	for (size_t i = 0; i < n; i++)
		sample(f, name, (const char *const[]){ label, values[i], NULL },
		       current && streq(current, values[i]) ? "1" : "0");
}

/* ---- the time of an update ---- */

/* The realtime of the stamp called name in stamps (NULL: the last one). */
static bool stamp_usec(json_object *stamps, const char *name, int64_t *ret) {
	for (size_t i = jlen(stamps); i > 0; i--) {
		json_object *s = json_object_array_get_idx(stamps, i - 1);

		if ((!name || streq(jstr(s, "name") ?: "", name)) &&
		    jint(jget(s, "realtime_usec"), ret))
			return true;
	}
	return false;
}

/* The report's ISO 8601 instant called key, as usec since the epoch. */
static bool report_instant(json_object *report, const char *key, int64_t *ret_usec) {
	uint64_t usec;

	if (report_iso_parse(jstr(report, key), &usec) < 0 || usec > INT64_MAX)
		return false;
	*ret_usec = (int64_t)usec;
	return true;
}

/* ---- sections ---- */

static void format_daemon(FILE *f, json_object *d, const char *version) {
	json_object *updates = jarray(d, "Updates"), *active = NULL;
	char buf[48];
	int64_t t = 0;
	bool has;

	family(f, "upgraded_info",
	       "The upgraded daemon: its version, the running kernel, the kexec backend "
	       "it uses and the host's architecture.");
	sample(f, "upgraded_info",
	       (const char *const[]){ "version", version, "running_kernel",
	                              jstr(d, "RunningKernel"), "backend",
	                              jstr(jget(d, "Backend"), "Name"), "architecture",
	                              jstr(d, "Architecture"), NULL },
	       "1");
	family(f, "upgraded_backend_usable",
	       "1 when the kexec backend can load a kernel on this host, 0 when it cannot.");
	sample(f, "upgraded_backend_usable", NULL,
	       json_object_get_boolean(jget(jget(d, "Backend"), "Usable")) ? "1" : "0");
	stateset(f, "upgraded_state", "The daemon's state: 1 for the current one.", "state",
	         daemon_states, ELEMENTSOF(daemon_states), jstr(d, "State") ?: "idle");

	family(f, "upgraded_update_records",
	       "Update records on this host by state (records kept, not a counter).");
	for (size_t i = 0; i < ELEMENTSOF(record_states); i++) {
		unsigned n = 0;

		for (size_t j = 0; j < jlen(updates); j++) {
			json_object *u = json_object_array_get_idx(updates, j);

			if (streq(jstr(u, "state") ?: "", record_states[i])) {
				n++;
				if (i < N_ACTIVE_STATES)
					active = u;
			}
		}
		snprintf(buf, sizeof(buf), "%u", n);
		sample(f, "upgraded_update_records",
		       (const char *const[]){ "state", record_states[i], NULL }, buf);
	}
	if (!active)
		return;
	family(f, "upgraded_staged_kernel_info",
	       "The kernel of the update in progress (staged, committing or completing).");
	sample(f, "upgraded_staged_kernel_info",
	       (const char *const[]){ "id", jstr(active, "id"), "version",
	                              jstr(active, "kernel_version"), "path",
	                              jstr(jget(active, "kernel"), "path"), NULL },
	       "1");
	has = stamp_usec(jarray(active, "phases"), "staged", &t);
	gauge_usec(f, "upgraded_staged_timestamp_seconds",
	           "When the update in progress was staged (Unix time).", has, t);
}

/* Per VM: the one downtime of each vms[] entry (schema 2), with its source. */
static void format_vm_downtime(FILE *f, json_object *r) {
	json_object *list = jarray(r, "vms");
	const char *name = "upgraded_last_update_vm_downtime_seconds";
	bool first = true;

	for (size_t i = 0; i < jlen(list); i++) {
		json_object *v = json_object_array_get_idx(list, i), *d = jget(v, "downtime");
		char buf[48];
		int64_t ns;

		if (!jint(jget(d, "ns"), &ns) || !jstr(v, "name"))
			continue;
		if (first)
			family(f, name,
			       "Each VM's downtime in the last update (estimated, +- "
			       "upgraded_last_update_uncertainty_seconds).");
		first = false;
		sample(f, name,
		       (const char *const[]){ "vm", jstr(v, "name"), "source",
		                              jstr(d, "source") ?: "unknown", NULL },
		       fixed(ns, 9, buf));
	}
}

static void format_report(FILE *f, json_object *r) {
	json_object *totals = jget(r, "totals"), *purg = jget(r, "purgatory");
	const char *result = jstr(r, "result"), *handoff_modes[_HANDOFF_MODE_MAX];
	bool has_start, has_end;
	int64_t start = 0, end = 0, bytes;
	char buf[48];

	family(f, "upgraded_last_update_info",
	       "The last finished update: its id, result, kernels, handoff mode and backend.");
	sample(f, "upgraded_last_update_info",
	       (const char *const[]){ "id", jstr(r, "id"), "result", result, "old_kernel",
	                              jstr(jget(r, "old_kernel"), "version"), "new_kernel",
	                              jstr(jget(r, "new_kernel"), "version"), "handoff_mode",
	                              jstr(jget(r, "handoff"), "mode"), "backend",
	                              jstr(jget(r, "backend"), "name"), "timebase",
	                              jstr(totals, "timebase"), NULL },
	       "1");
	family(f, "upgraded_last_update_success",
	       "1 when the last finished update succeeded, 0 when it failed.");
	sample(f, "upgraded_last_update_success", NULL,
	       result && streq(result, "success") ? "1" : "0");
	for (int m = 0; m < _HANDOFF_MODE_MAX; m++)
		handoff_modes[m] = handoff_mode_to_string((HandoffMode)m);
	stateset(f, "upgraded_last_update_handoff_mode",
	         "How the last update handed over to the new kernel: 1 for its mode.", "mode",
	         handoff_modes, _HANDOFF_MODE_MAX, jstr(jget(r, "handoff"), "mode"));
	has_start = report_instant(r, "started_at", &start);
	has_end = report_instant(r, "finished_at", &end);
	gauge_usec(f, "upgraded_last_update_start_timestamp_seconds",
	           "When the last update started: its first stamp (Unix time).", has_start, start);
	gauge_usec(f, "upgraded_last_update_finish_timestamp_seconds",
	           "When the last update finished (Unix time).", has_end, end);
	gauge_ns(f, "upgraded_last_update_host_blackout_seconds",
	         "Reboot request to the daemon running on the new kernel (estimated).",
	         jget(totals, "host_blackout_ns"));
	gauge_ns(f, "upgraded_last_update_max_vm_downtime_seconds",
	         "The longest VM downtime of the last update (estimated).",
	         jget(totals, "max_vm_downtime_ns"));
	gauge_ns(f, "upgraded_last_update_median_vm_downtime_seconds",
	         "The median VM downtime of the last update (estimated).",
	         jget(totals, "median_vm_downtime_ns"));
	gauge_ns(f, "upgraded_last_update_uncertainty_seconds",
	         "The +- of the last update's cross-kexec figures (its timebase's).",
	         jget(totals, "uncertainty_ns"));
	format_vm_downtime(f, r);
	gauge_ns(f, "upgraded_last_update_purgatory_verify_seconds",
	         "Purgatory's SHA-256 verification of the new kernel in the last update.",
	         jget(purg, "verify_ns"));
	if (jint(jget(purg, "bytes"), &bytes)) {
		family(f, "upgraded_last_update_purgatory_verified_bytes",
		       "What purgatory verified in the last update: kernel and initrd (0: fast "
		       "handoff).");
		snprintf(buf, sizeof(buf), "%" PRId64, bytes);
		sample(f, "upgraded_last_update_purgatory_verified_bytes", NULL, buf);
	}
	family(f, "upgraded_last_update_vms", "VMs the last update handled.");
	snprintf(buf, sizeof(buf), "%zu", jlen(jarray(r, "vms")));
	sample(f, "upgraded_last_update_vms", NULL, buf);
}

/* ---- public entry points ---- */

int metrics_format(json_object *describe, json_object *report, const char *version,
                   char **ret_text) {
	char *text = NULL;
	size_t size = 0;
	FILE *f;

	f = open_memstream(&text, &size);
	if (!f)
		return -ENOMEM;
	format_daemon(f, describe, version);
	/* A schema-1 report (written before schema 2) is read as schema 2. */
	if (report && report_upgrade(report, NULL) >= 0)
		format_report(f, report);
	if (fclose(f) != 0) {
		free(text);
		return -ENOMEM;
	}
	*ret_text = text;
	return 0;
}

int metrics_write(const char *dir, const char *text) {
	_cleanup_free_ char *path = NULL;
	struct stat st;

	if (!dir || !text)
		return -EINVAL;
	if (stat(dir, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (asprintf(&path, "%s/" METRICS_FILE_NAME, dir) < 0)
		return -ENOMEM;
	return write_file_atomic(path, text, strlen(text), 0644);
}

int metrics_refresh(const char *dir, const char *describe_json, const char *report_json,
                    const char *version) {
	_cleanup_(json_object_putp) json_object *d = NULL, *r = NULL;
	_cleanup_free_ char *text = NULL;
	int ret;

	d = describe_json ? json_tokener_parse(describe_json) : NULL;
	r = report_json ? json_tokener_parse(report_json) : NULL;
	ret = metrics_format(d, r, version, &text);
	if (ret < 0)
		return ret;
	return metrics_write(dir, text);
}
