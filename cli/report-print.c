/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <inttypes.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "cli-json.h"
#include "macros.h"
#include "report-print.h"
#include "string-util.h"
#include "terminal.h"

/* ns -> "1.234 s" / "12.345 ms"; "n/a" for null (a figure that was not measured). */
static const char *format_ns(json_object *v, char *buf, size_t size) {
	int64_t ns;

	if (!v || !json_object_is_type(v, json_type_int))
		return "n/a";
	ns = json_object_get_int64(v);
	if (ns >= 1000000000 || ns <= -1000000000)
		snprintf(buf, size, "%.3f s", (double)ns / 1e9);
	else
		snprintf(buf, size, "%.3f ms", (double)ns / 1e6);
	return buf;
}

static void print_figure(FILE *f, const char *label, json_object *v, json_object *unc) {
	char a[32], b[32];

	if (!v || !json_object_is_type(v, json_type_int)) {
		fprintf(f, "%19s: n/a (see Missing)\n", label);
		return;
	}
	fprintf(f, "%19s: %s +- %s (estimated)\n", label, format_ns(v, a, sizeof(a)),
	        format_ns(unc, b, sizeof(b)));
}

/* purgatory.relocation: the old kernel's "Starting new kernel" to purgatory's entry. */
static void print_relocation(FILE *f, json_object *rel) {
	char a[32], b[32];

	if (!rel || !json_object_is_type(cli_jobj(rel, "ns"), json_type_int)) {
		fprintf(f, "%19s: n/a\n", "Kexec relocation");
		return;
	}
	fprintf(f, "%19s: %s +- %s%s\n", "Kexec relocation",
	        format_ns(cli_jobj(rel, "ns"), a, sizeof(a)),
	        format_ns(cli_jobj(rel, "uncertainty_ns"), b, sizeof(b)),
	        json_object_get_boolean(cli_jobj(rel, "estimated")) ? " (estimated)" : "");
}

/* Where t falls on a 41-column bar from lo to hi, in 0..40. Computed in double: the report's
 * figures are any 64-bit integers, and their differences may not fit in one. */
static int bar_column(int64_t t, int64_t lo, int64_t hi) {
	double span = (double)hi - (double)lo, x;

	if (!(span > 0)) /* also when hi and lo round to the same double */
		return 0;
	x = ((double)t - (double)lo) * 40.0 / span;
	return !(x > 0) ? 0 : x >= 40 ? 40 : (int)x;
}

/* Each restored VM's clock after the restore: synced (and how long the agent call took), or
 * why not. */
static void print_clocks(FILE *f, json_object *o) {
	json_object *vms = cli_jarray(o, "vms");
	size_t n = 0;

	for (size_t i = 0; i < cli_jarray_length(vms); i++) {
		json_object *v = json_object_array_get_idx(vms, i), *c = cli_jobj(v, "clock_sync");

		if (!c || !json_object_is_type(c, json_type_object))
			continue;
		fprintf(f, "%19s%s %s ", n == 0 ? "Guest clocks" : "", n == 0 ? ":" : " ",
		        strna(cli_jstr(v, "name")));
		n++;
		if (json_object_get_boolean(cli_jobj(c, "synced")))
			fprintf(f, "synced in %.3f ms, was %.3f s behind\n",
			        (double)json_object_get_int64(cli_jobj(c, "sync_ns")) / 1e6,
			        (double)json_object_get_int64(cli_jobj(c, "behind_ns")) / 1e9);
		else
			fprintf(f, "not synced: %s\n", strna(cli_jstr(c, "reason")));
	}
}

/* The phases on the report's axis, with relative times, durations and a bar. */
static void print_timeline(FILE *f, json_object *o) {
	json_object *phases = cli_jarray(o, "phases");
	int64_t lo = INT64_MAX, hi = INT64_MIN;
	size_t n = cli_jarray_length(phases);

	if (n == 0) {
		fprintf(f, "\nTimeline: not available (no common timebase; see Missing)\n");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		json_object *p = json_object_array_get_idx(phases, i);
		lo = MIN(lo, json_object_get_int64(cli_jobj(p, "start_ns")));
		hi = MAX(hi, json_object_get_int64(cli_jobj(p, "end_ns")));
	}
	fprintf(f, "\nTimeline (t = 0: %s; times marked ~ carry the timebase uncertainty):\n",
	        strna(cli_jstr(o, "phase_axis")));
	fprintf(f, "  %-15s %12s %12s %12s  %s\n", "PHASE", "START", "END", "DURATION", "");
	for (size_t i = 0; i < n; i++) {
		json_object *p = json_object_array_get_idx(phases, i);
		int64_t a = json_object_get_int64(cli_jobj(p, "start_ns"));
		int64_t b = json_object_get_int64(cli_jobj(p, "end_ns"));
		bool est = json_object_get_boolean(cli_jobj(p, "estimated"));
		int x0 = bar_column(a, lo, hi), x1 = bar_column(b, lo, hi);
		char bar[48];

		memset(bar, ' ', sizeof(bar));
		for (int x = x0; x <= x1; x++)
			bar[x] = '#';
		bar[41] = 0;
		fprintf(f, "  %-15s %c%+10.3fs %c%+10.3fs %11.3fs  |%s|\n",
		        strna(cli_jstr(p, "name")), est ? '~' : ' ', (double)a / 1e9,
		        est ? '~' : ' ', (double)b / 1e9, ((double)b - (double)a) / 1e9, bar);
	}
}

static double sec(json_object *v) {
	return (double)json_object_get_int64(v) / 1e9;
}

/* "~+12.345s" on the report's axis, or "n/a" when the entry has no place on it. */
static const char *format_axis(json_object *v, bool estimated, char *buf, size_t size) {
	if (!v || !json_object_is_type(v, json_type_int))
		return "n/a";
	snprintf(buf, size, "%c%+.3fs", estimated ? '~' : ' ', sec(v));
	return buf;
}

/* The new kernel's chain of units up to the daemon (systemd-analyze critical-chain's
 * view), then the old kernel's unit stops after the reboot request. */
static void print_critical_path(FILE *f, json_object *o) {
	json_object *cp = cli_jobj(o, "critical_path");
	json_object *nk = cli_jobj(cp, "new_kernel"), *ok = cli_jobj(cp, "old_kernel");
	json_object *units;
	char a[32], b[32];

	if (!nk && !ok)
		return; /* not measured (see Missing), or a report older than the field */
	units = cli_jarray(nk, "units");
	if (nk) {
		int64_t zero = json_object_get_int64(cli_jobj(nk, "userspace_ns"));

		fprintf(f, "\nCritical chain on the new kernel, up to %s%s:\n",
		        strna(cli_jstr(nk, "target")),
		        json_object_get_boolean(cli_jobj(nk, "truncated")) ? " (cut)" : "");
		fprintf(f, "  %-12s %10s %12s  %s\n", "ACTIVE", "TOOK", "ON AXIS", "UNIT");
		for (size_t i = 0; i < cli_jarray_length(units); i++) {
			json_object *u = json_object_array_get_idx(units, i);

			fprintf(f, "  @%10.3fs %9.3fs %12s  %s\n",
			        (double)(json_object_get_int64(cli_jobj(u, "activated_ns")) -
			                 zero) /
			                1e9,
			        sec(cli_jobj(u, "time_ns")),
			        format_axis(cli_jobj(u, "end_ns"), true, a, sizeof(a)),
			        strna(cli_jstr(u, "unit")));
		}
		fprintf(f, "  (@: after systemd started; ON AXIS: when it became active, t = 0 "
		           "the reboot request)\n");
	}
	units = cli_jarray(ok, "units");
	if (ok) {
		size_t n = cli_jarray_length(units), instant = 0;

		fprintf(f, "\nUnits the old kernel stopped after the reboot request (%zu):\n", n);
		fprintf(f, "  %-11s %11s %10s  %s\n", "STOPPING", "STOPPED", "TOOK", "UNIT");
		for (size_t i = 0; i < n; i++) {
			json_object *u = json_object_array_get_idx(units, i);

			if (!cli_jobj(u, "stopping_ns")) {
				instant++;
				continue;
			}
			fprintf(f, "  %11s %11s %9.3fs  %s\n",
			        format_axis(cli_jobj(u, "start_ns"), false, a, sizeof(a)),
			        format_axis(cli_jobj(u, "end_ns"), false, b, sizeof(b)),
			        sec(cli_jobj(u, "time_ns")), strna(cli_jstr(u, "unit")));
		}
		if (instant > 0)
			fprintf(f,
			        "  and %zu more that logged no \"Stopping\" (targets, sockets, "
			        "mounts: no measurable time)\n",
			        instant);
	}
}

/* A list of reasons {code, severity, text}, one per line, the first after label. */
static void print_reasons(FILE *f, const char *label, json_object *reasons) {
	for (size_t i = 0; i < cli_jarray_length(reasons); i++) {
		json_object *r = json_object_array_get_idx(reasons, i);

		fprintf(f, "%19s%s %s: %s: %s\n", i == 0 ? label : "", i == 0 && *label ? ":" : " ",
		        strna(cli_jstr(r, "severity")), strna(cli_jstr(r, "code")),
		        strna(cli_jstr(r, "text")));
	}
}

/* How the old kernel went down, and why ([Handoff] Shutdown=). */
static void print_shutdown(FILE *f, json_object *sd) {
	json_object *why = cli_jarray(sd, "reasons");
	const char *mode = cli_jstr(sd, "mode"), *asked = cli_jstr(sd, "requested");

	if (!sd)
		return;
	fprintf(f, "%19s: %s%s%s\n", "Shutdown", strna(mode),
	        !streq_ptr(mode, asked) ? ", asked: " : "",
	        !streq_ptr(mode, asked) ? strna(asked) : "");
	print_reasons(f, "", why);
}

/* The units held back on the new kernel's boot until the restore ([Restore]
 * DeferUntilRestored=), on one line; nothing when that boot held none back. */
static void print_deferred(FILE *f, json_object *d) {
	json_object *units = cli_jarray(d, "units");

	if (cli_jarray_length(units) == 0)
		return;
	fprintf(f, "%19s:", "Deferred units");
	for (size_t i = 0; i < cli_jarray_length(units); i++)
		fprintf(f, " %s",
		        strna(json_object_get_string(json_object_array_get_idx(units, i))));
	fprintf(f, " (released after the %s)\n",
	        streq_ptr(cli_jstr(d, "released_after"), "restore") ? "restore" : "failed restore");
}

/* The update, its result, when, where and by which daemon. */
static void print_header(FILE *f, json_object *o) {
	json_object *host = cli_jobj(o, "host");

	fprintf(f, "%19s: %s\n", "Update", strna(cli_jstr(o, "id")));
	fprintf(f, "%19s: %s%s%s%s%s\n", "Result",
	        term_color(f, term_color_of_state(cli_jstr(o, "result"))),
	        strna(cli_jstr(o, "result")), cli_jstr(o, "reason") ? ": " : "",
	        strempty(cli_jstr(o, "reason")), term_normal(f));
	fprintf(f, "%19s: %s\n", "Started", strna(cli_jstr(o, "started_at")));
	fprintf(f, "%19s: %s\n", "Finished", strna(cli_jstr(o, "finished_at")));
	fprintf(f, "%19s: %s (machine %s)\n", "Host", strna(cli_jstr(host, "hostname")),
	        strna(cli_jstr(host, "machine_id")));
	fprintf(f, "%19s: %s (report schema %" PRId64 ")\n", "Daemon",
	        strna(cli_jstr(cli_jobj(o, "daemon"), "version")),
	        json_object_get_int64(cli_jobj(o, "schema")));
}

/* Each VM's one downtime, with its source. */
static void print_vm_downtimes(FILE *f, json_object *o) {
	json_object *vms = cli_jarray(o, "vms");
	char a[32], b[32];

	for (size_t i = 0; i < cli_jarray_length(vms); i++) {
		json_object *v = json_object_array_get_idx(vms, i), *d = cli_jobj(v, "downtime");
		json_object *unc = cli_jobj(d, "uncertainty_ns");

		fprintf(f, "%19s%s %s %s", i == 0 ? "VM downtime" : "", i == 0 ? ":" : " ",
		        strna(cli_jstr(v, "name")), format_ns(cli_jobj(d, "ns"), a, sizeof(a)));
		if (unc && json_object_is_type(unc, json_type_int))
			fprintf(f, " +- %s", format_ns(unc, b, sizeof(b)));
		fprintf(f, " (%s)\n", strna(cli_jstr(d, "source")));
	}
}

/* A report of schema 2 (schema 1: report_upgrade() first) for people. */
void report_print(json_object *o, FILE *f) {
	json_object *k, *h, *b, *t, *tot, *a, *boot, *purg;
	char buf[32];

	print_header(f, o);
	k = cli_jobj(o, "old_kernel");
	fprintf(f, "%19s: %s\n", "Old kernel", strna(cli_jstr(k, "version")));
	k = cli_jobj(o, "new_kernel");
	fprintf(f, "%19s: %s (%s)\n", "New kernel", strna(cli_jstr(k, "version")),
	        strna(cli_jstr(k, "path")));
	fprintf(f, "%19s: %s\n", "Booted", strna(cli_jstr(o, "booted_kernel")));
	b = cli_jobj(o, "backend");
	fprintf(f, "%19s: %s%s\n", "Backend", strna(cli_jstr(b, "name")),
	        json_object_get_boolean(cli_jobj(b, "test_only")) ? " (TEST ONLY)" : "");
	if (cli_jstr(b, "reason"))
		fprintf(f, "%19s  (not kexec_load: %s)\n", "", cli_jstr(b, "reason"));
	k = cli_jobj(cli_jobj(o, "host"), "platform");
	if (k && json_object_is_type(k, json_type_object))
		fprintf(f, "%19s: %s, Secure Boot %s, lockdown %s\n", "Platform",
		        strna(cli_jstr(k, "firmware")), strna(cli_jstr(k, "secure_boot")),
		        strna(cli_jstr(k, "lockdown")));
	h = cli_jobj(o, "handoff");
	fprintf(f, "%19s: %s\n", "Mode", strna(cli_jstr(h, "mode")));
	print_reasons(f, "Why", cli_jarray(h, "reasons"));
	print_shutdown(f, cli_jobj(h, "shutdown"));
	print_deferred(f, cli_jobj(o, "deferred_units"));

	t = cli_jobj(o, "timebase");
	tot = cli_jobj(o, "totals");
	if (t && json_object_is_type(t, json_type_object) &&
	    !streq_ptr(cli_jstr(t, "timebase"), "none")) {
		json_object *fl = cli_jarray(t, "flags");
		fprintf(f, "%19s: %s, +- %s", "Timebase", strna(cli_jstr(t, "timebase")),
		        format_ns(cli_jobj(t, "uncertainty_ns"), buf, sizeof(buf)));
		for (size_t i = 0; i < cli_jarray_length(fl); i++)
			fprintf(f, "%s%s", i == 0 ? " (" : ", ",
			        strna(json_object_get_string(json_object_array_get_idx(fl, i))));
		fprintf(f, "%s\n", cli_jarray_length(fl) > 0 ? ")" : "");
	} else
		fprintf(f, "%19s: none (the kernels could not be put on one time axis)\n",
		        "Timebase");
	print_figure(f, "Host blackout", cli_jobj(tot, "host_blackout_ns"),
	             cli_jobj(tot, "uncertainty_ns"));
	print_figure(f, "Max VM downtime", cli_jobj(tot, "max_vm_downtime_ns"),
	             cli_jobj(tot, "uncertainty_ns"));
	print_figure(f, "Median VM downtime", cli_jobj(tot, "median_vm_downtime_ns"),
	             cli_jobj(tot, "uncertainty_ns"));
	purg = cli_jobj(o, "purgatory");
	fprintf(f, "%19s: %s%s\n", "Purgatory verify",
	        format_ns(cli_jobj(purg, "verify_ns"), buf, sizeof(buf)),
	        json_object_get_boolean(cli_jobj(purg, "verify_estimated")) &&
	                        cli_jobj(purg, "verify_ns")
	                ? " (estimated)"
	                : "");
	print_relocation(f, cli_jobj(purg, "relocation"));
	boot = cli_jobj(o, "boot");
	if (boot && json_object_is_type(boot, json_type_object)) {
		json_object *g = cli_jarray(boot, "gaps"),
		            *g0 = cli_jarray_length(g) > 0 ? json_object_array_get_idx(g, 0) : NULL;
		json_object *init = cli_jobj(boot, "init_ns");

		if (init)
			fprintf(f, "%19s: %.3f s after the kernel started\n", "Init started",
			        (double)json_object_get_int64(init) / 1e9);
		if (g0)
			fprintf(f, "%19s: %.3f ms before \"%s\"\n", "Largest boot gap",
			        (double)json_object_get_int64(cli_jobj(g0, "gap_ns")) / 1e6,
			        strna(cli_jstr(g0, "message")));
	}
	a = cli_jarray(o, "missing");
	for (size_t i = 0; i < cli_jarray_length(a); i++) {
		json_object *m = json_object_array_get_idx(a, i);
		fprintf(f, "%19s%s %s: %s\n", i == 0 ? "Missing" : "", i == 0 ? ":" : " ",
		        strna(cli_jstr(m, "figure")), strna(cli_jstr(m, "reason")));
	}
	print_vm_downtimes(f, o);
	print_clocks(f, o);
	print_timeline(f, o);
	print_critical_path(f, o);
}
