/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <string.h>

#include "cli-json.h"
#include "fileio.h"
#include "macros.h"
#include "report-html.h"
#include "report-schema.h"

#define SVG_WIDTH   1200
#define LABEL_WIDTH 170
#define PLOT_LEFT   (LABEL_WIDTH + 10)
#define PLOT_WIDTH  (SVG_WIDTH - PLOT_LEFT - 30)
#define ROW_HEIGHT  34
#define BAR_HEIGHT  20
#define MAX_GAPS    5
#define MAX_VMS     200

/* Kernel colours of the phases (docs/report.md "Phases"). */
static const struct {
	const char *kernel, *color;
} kernel_colors[] = { { "old", "#4e79a7" }, { "handoff", "#f28e2b" }, { "new", "#59a14f" } };

/* A VM's bar: from when it stopped to when it ran again, both on the report's axis. */
typedef struct VmBar {
	const char *name, *source;
	double stop_ns, run_ns, unc_ns; /* unc_ns: the +- of run_ns (0: exact) */
	bool have_stop, have_run;
	json_object *downtime; /* vms[].downtime.ns, or NULL */
} VmBar;

typedef struct Scale {
	double lo, hi; /* ns on the report's axis */
} Scale;

/* ---- helpers ---- */

static void esc(FILE *f, const char *s) {
	for (const char *p = s ?: ""; *p; p++)
		switch (*p) {
		case '&':
			fputs("&amp;", f);
			break;
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		case '\'':
			fputs("&#39;", f);
			break;
		default:
			fputc(*p, f);
		}
}

static bool jnum(json_object *o, const char *k, double *ret) {
	json_object *v = cli_jobj(o, k);

	if (!v || !json_object_is_type(v, json_type_int))
		return false;
	*ret = (double)json_object_get_int64(v);
	return true;
}

/* An ISO 8601 UTC instant (schema 2's *_at) as CLOCK_REALTIME microseconds. */
static bool jinstant(json_object *o, const char *k, double *ret_usec) {
	uint64_t usec;

	if (report_iso_parse(cli_jstr(o, k), &usec) < 0)
		return false;
	*ret_usec = (double)usec;
	return true;
}

static double x_of(const Scale *s, double ns) {
	double x = PLOT_LEFT + (ns - s->lo) * PLOT_WIDTH / (s->hi - s->lo);

	return x < PLOT_LEFT ? PLOT_LEFT : x > PLOT_LEFT + PLOT_WIDTH ? PLOT_LEFT + PLOT_WIDTH : x;
}

static void widen(Scale *s, double ns) {
	if (ns == ns) { /* not NaN */
		s->lo = MIN(s->lo, ns);
		s->hi = MAX(s->hi, ns);
	}
}

static const char *kernel_color(const char *kernel) {
	for (size_t i = 0; i < ELEMENTSOF(kernel_colors); i++)
		if (streq_ptr(kernel, kernel_colors[i].kernel))
			return kernel_colors[i].color;
	return "#bab0ac";
}

/* The timebase's uncertainty (0 when there is none). */
static double uncertainty_ns(json_object *r) {
	double u = 0;

	if (!jnum(cli_jobj(r, "timebase"), "uncertainty_ns", &u))
		(void)jnum(cli_jobj(r, "totals"), "uncertainty_ns", &u);
	return u > 0 ? u : 0;
}

/* The realtime (usec) of t = 0: the commit request's stamp is the pre-handoff phase's start
 * (both on the old kernel's clocks); without phases, the commit request itself. */
static bool axis_realtime_origin(json_object *r, double *ret_usec) {
	json_object *stamps = cli_jarray(r, "stamps"), *phases = cli_jarray(r, "phases");
	double commit = 0, start = 0;
	bool found = false;

	for (size_t i = 0; i < cli_jarray_length(stamps); i++) {
		json_object *s = json_object_array_get_idx(stamps, i);

		if (streq_ptr(cli_jstr(s, "name"), "commit-requested"))
			found = jinstant(s, "at", &commit);
	}
	for (size_t i = 0; i < cli_jarray_length(phases); i++) {
		json_object *p = json_object_array_get_idx(phases, i);

		if (streq_ptr(cli_jstr(p, "name"), "pre-handoff"))
			(void)jnum(p, "start_ns", &start);
	}
	*ret_usec = commit - start / 1000;
	return found;
}

/* One bar per vms[] entry: its downtime's stopped_ns/running_ns when the report put them on
 * the axis, else libvirt's paused_at/resumed_at (CLOCK_REALTIME) moved onto it. */
static size_t collect_vms(json_object *r, VmBar *bars, size_t max) {
	json_object *vms = cli_jarray(r, "vms");
	double origin = 0, unc = uncertainty_ns(r);
	bool have_origin = axis_realtime_origin(r, &origin);
	size_t n = 0;

	for (size_t i = 0; i < cli_jarray_length(vms) && n < max; i++) {
		json_object *v = json_object_array_get_idx(vms, i), *d = cli_jobj(v, "downtime");
		VmBar *b = &bars[n];
		double t;

		*b = (VmBar){ .name = cli_jstr(v, "name") };
		if (!b->name)
			continue;
		b->downtime = cli_jobj(d, "ns");
		b->source = cli_jstr(d, "source");
		b->have_stop = jnum(d, "stopped_ns", &b->stop_ns);
		b->have_run = jnum(d, "running_ns", &b->run_ns);
		if (!jnum(d, "uncertainty_ns", &b->unc_ns))
			b->unc_ns = unc;
		if (!b->have_stop && have_origin && jinstant(v, "paused_at", &t)) {
			b->stop_ns = (t - origin) * 1000;
			b->have_stop = true;
		}
		if (!b->have_run && have_origin && jinstant(v, "resumed_at", &t)) {
			b->run_ns = (t - origin) * 1000;
			b->have_run = true;
			b->source = b->source ?: "libvirt-wallclock";
		}
		n++;
	}
	return n;
}

/* ---- the SVG ---- */

static void whisker(FILE *f, const Scale *s, double at, double unc, double y) {
	double a = x_of(s, at - unc), b = x_of(s, at + unc);

	if (unc <= 0)
		return;
	fprintf(f,
	        "<g class=\"whisker\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
	        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
	        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/></g>\n",
	        a, y, b, y, a, y - 5, a, y + 5, b, y - 5, b, y + 5);
}

static void row_label(FILE *f, double y, const char *text) {
	fprintf(f, "<text class=\"row-label\" x=\"%d\" y=\"%.1f\">", LABEL_WIDTH,
	        y + BAR_HEIGHT / 2.0 + 4);
	esc(f, text);
	fputs("</text>\n", f);
}

/* Where a bar's label goes when it does not fit inside the bar. */
typedef enum LabelOutside {
	LABEL_RIGHT, /* right of the bar (rows with one bar) */
	LABEL_BELOW, /* under it, small (phases: the next one starts where this one ends) */
	LABEL_NONE,  /* only in the tooltip and the tables (many narrow bars) */
} LabelOutside;

/* A bar from a to b with a tooltip; its label inside when it fits, else as outside says. */
static void bar(FILE *f, const Scale *s, double a, double b, double y, const char *cls,
                const char *fill, const char *label, const char *tip, LabelOutside outside) {
	double x0 = x_of(s, a), x1 = x_of(s, b), w = MAX(x1 - x0, 1.5);
	bool inside = label && strlen(label) * 6.5 < w - 6;

	fprintf(f,
	        "<g class=\"%s\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" "
	        "fill=\"%s\"><title>",
	        cls, x0, y, w, BAR_HEIGHT, fill);
	esc(f, tip ?: label);
	fputs("</title></rect>", f);
	if (label && (inside || outside != LABEL_NONE)) {
		if (inside)
			fprintf(f, "<text class=\"in-bar\" x=\"%.1f\" y=\"%.1f\">", x0 + w / 2,
			        y + BAR_HEIGHT / 2.0 + 4);
		else if (outside == LABEL_BELOW)
			fprintf(f, "<text class=\"below-bar\" x=\"%.1f\" y=\"%.1f\">", x0 + w / 2,
			        y + BAR_HEIGHT + 11.0);
		else
			fprintf(f, "<text class=\"by-bar\" x=\"%.1f\" y=\"%.1f\">", x0 + w + 4,
			        y + BAR_HEIGHT / 2.0 + 4);
		esc(f, label);
		fputs("</text>", f);
	}
	fputs("</g>\n", f);
}

/* A tick step of 1, 2 or 5 times a power of ten giving about ten ticks over span (ns). */
static double nice_step(double span) {
	double raw = span / 10, p = 1;

	while (p * 10 <= raw)
		p *= 10;
	while (p > raw && p > 1e-3)
		p /= 10;
	return raw / p < 2 ? 2 * p : raw / p < 5 ? 5 * p : 10 * p;
}

static void draw_axis(FILE *f, const Scale *s, double top, double bottom, const char *axis) {
	double step = nice_step(s->hi - s->lo);

	double first = (double)(int64_t)(s->lo / step) * step;
	unsigned n = 0;

	/* At most ~12 ticks: the bound only guards against rounding. */
	for (double t = first < s->lo ? first + step : first; t <= s->hi && n < 40;
	     t += step, n++) {
		double x = x_of(s, t);

		fprintf(f,
		        "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
		        "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\">%g s</text>\n",
		        x, top, x, bottom, x, bottom + 16, t / 1e9);
	}
	if (s->lo <= 0 && s->hi >= 0) {
		fprintf(f, "<line class=\"zero\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>",
		        x_of(s, 0), top - 6, x_of(s, 0), bottom);
		fprintf(f,
		        "<text class=\"zero-label\" x=\"%.1f\" y=\"%.1f\">t = 0: ", x_of(s, 0) + 4,
		        top - 8);
		esc(f, axis);
		fputs("</text>\n", f);
	}
}

static const char *axis_name(const char *phase_axis) {
	if (streq_ptr(phase_axis, "reboot-request"))
		return "the reboot request";
	if (streq_ptr(phase_axis, "commit-request"))
		return "the commit request";
	return "the commit request (wall clock: no common time axis)";
}

static void draw_phases(FILE *f, const Scale *s, json_object *r, double y) {
	json_object *phases = cli_jarray(r, "phases");
	double unc = uncertainty_ns(r);

	row_label(f, y, "Phases");
	if (cli_jarray_length(phases) == 0)
		fprintf(f,
		        "<text class=\"none\" x=\"%d\" y=\"%.1f\">no phases: the kernels share no "
		        "time axis (see Missing); VM bars on the wall clock</text>\n",
		        PLOT_LEFT, y + 14.0);
	for (size_t i = 0; i < cli_jarray_length(phases); i++) {
		json_object *p = json_object_array_get_idx(phases, i);
		const char *name = cli_jstr(p, "name"), *kernel = cli_jstr(p, "kernel");
		bool est = json_object_get_boolean(cli_jobj(p, "estimated"));
		char tip[256];
		double a, b;

		if (!name || !jnum(p, "start_ns", &a) || !jnum(p, "end_ns", &b))
			continue;
		snprintf(tip, sizeof(tip), "%s (%s kernel): %.3f s to %.3f s, %.3f s%s", name,
		         strna(kernel), a / 1e9, b / 1e9, (b - a) / 1e9,
		         est ? " (estimated, +- the timebase uncertainty)" : "");
		fprintf(f, "<g class=\"phase\" data-name=\"");
		esc(f, name);
		fputs("\">", f);
		bar(f, s, a, b, y, "phase-bar", kernel_color(kernel), name, tip, LABEL_BELOW);
		if (est)
			whisker(f, s, b, unc, y + BAR_HEIGHT / 2.0);
		fputs("</g>\n", f);
	}
}

/* The old kernel's last slice before purgatory (purgatory.relocation), on the purgatory row. */
static void draw_relocation(FILE *f, const Scale *s, json_object *rel, double y) {
	double start, entry;
	char label[64];

	if (!jnum(rel, "start_ns", &start) || !jnum(rel, "entry_ns", &entry) || entry < start)
		return;
	snprintf(label, sizeof(label), "relocation %.1f ms%s", (entry - start) / 1e6,
	         json_object_get_boolean(cli_jobj(rel, "estimated")) ? " (estimated)" : "");
	bar(f, s, start, entry, y, "kexec relocation", "#9c755f", label,
	    "the old kernel: \"Starting new kernel\" (machine_shutdown, the shutdown dump, "
	    "the relocation copy) to purgatory's entry",
	    LABEL_BELOW);
}

/* Purgatory's slice from its stamps (timebase.stamps: entry, verified, jump on the axis). */
static void draw_purgatory(FILE *f, const Scale *s, json_object *r, double y) {
	json_object *st = cli_jobj(cli_jobj(r, "timebase"), "stamps");
	bool trusted = json_object_get_boolean(cli_jobj(st, "trusted"));
	double entry, verified, jump;
	char label[96];

	row_label(f, y, "Purgatory");
	if (!jnum(st, "entry_ns", &entry) || !jnum(st, "jump_ns", &jump)) {
		fprintf(f,
		        "<text class=\"none\" x=\"%d\" y=\"%.1f\">no purgatory stamps on the axis",
		        PLOT_LEFT, y + 14.0);
		fputs(" (see Missing)</text>\n", f);
		return;
	}
	if (!jnum(st, "verified_ns", &verified))
		verified = entry;
	snprintf(label, sizeof(label), "verify %.3f s%s", (verified - entry) / 1e9,
	         trusted ? "" : " (untrusted stamps)");
	bar(f, s, entry, verified, y, "purgatory verify", "#e15759", label,
	    "purgatory: entry to the end of the SHA-256 verification", LABEL_RIGHT);
	bar(f, s, verified, jump, y, "purgatory jump", "#ff9da7", NULL,
	    "purgatory: verification done to the jump into the new kernel", LABEL_NONE);
	draw_relocation(f, s, cli_jobj(cli_jobj(r, "purgatory"), "relocation"), y);
}

/* The largest boot gaps of the new kernel, on the axis from its clock zero (new_origin_ns). */
static void draw_boot_gaps(FILE *f, const Scale *s, json_object *r, double y) {
	json_object *gaps = cli_jarray(cli_jobj(r, "boot"), "gaps");
	double origin, a, b;
	size_t n = MIN(cli_jarray_length(gaps), (size_t)MAX_GAPS);

	row_label(f, y, "Largest boot gaps");
	if (n == 0 || !jnum(cli_jobj(r, "timebase"), "new_origin_ns", &origin)) {
		fprintf(f, "<text class=\"none\" x=\"%d\" y=\"%.1f\">%s</text>\n", PLOT_LEFT,
		        y + 14.0,
		        n == 0 ? "no boot analysis (see Missing)"
		               : "the new kernel's clock zero is not on the axis");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		json_object *g = json_object_array_get_idx(gaps, i);
		char label[32], tip[512];

		if (!jnum(g, "start_ns", &a) || !jnum(g, "end_ns", &b))
			continue;
		snprintf(label, sizeof(label), "#%zu", i + 1);
		snprintf(tip, sizeof(tip), "boot gap #%zu: %.3f s before \"%s\"", i + 1,
		         (b - a) / 1e9, strna(cli_jstr(g, "message")));
		bar(f, s, origin + a, origin + b, y, "boot-gap", "#9c755f", label, tip, LABEL_NONE);
	}
}

/* The critical path: the old kernel's unit stops after the reboot request (those that took
 * time), then the new kernel's chain of units up to the daemon; names in the tooltips and
 * the tables below. */
static void draw_critical_path(FILE *f, const Scale *s, json_object *r, double y) {
	json_object *cp = cli_jobj(r, "critical_path");
	json_object *kernels[2] = { cli_jobj(cp, "old_kernel"), cli_jobj(cp, "new_kernel") };
	size_t drawn = 0;

	row_label(f, y, "Critical path");
	for (size_t k = 0; k < ELEMENTSOF(kernels); k++) {
		json_object *units = cli_jarray(kernels[k], "units");

		for (size_t i = 0; i < cli_jarray_length(units); i++) {
			json_object *u = json_object_array_get_idx(units, i);
			double a, b, t;
			char tip[320];

			if (!jnum(u, "start_ns", &a) || !jnum(u, "end_ns", &b) ||
			    !jnum(u, "time_ns", &t) || t <= 0)
				continue;
			snprintf(tip, sizeof(tip), "%s %s: %.3f s (%s kernel)",
			         k == 0 ? "stopping" : "starting", strna(cli_jstr(u, "unit")),
			         t / 1e9, k == 0 ? "old" : "new");
			bar(f, s, a, b, y, k == 0 ? "unit-stop" : "unit-start",
			    k == 0 ? "#4e79a7" : "#59a14f", NULL, tip, LABEL_NONE);
			drawn++;
		}
	}
	if (drawn == 0)
		fprintf(f, "<text class=\"none\" x=\"%d\" y=\"%.1f\">%s</text>\n", PLOT_LEFT,
		        y + 14.0, "no unit times on the axis (see Missing)");
}

static void draw_vms(FILE *f, const Scale *s, const VmBar *vms, size_t n, double y) {
	for (size_t i = 0; i < n; i++, y += ROW_HEIGHT) {
		const VmBar *v = &vms[i];
		char label[160];

		row_label(f, y, v->name);
		if (!v->have_stop || !v->have_run) {
			fprintf(f,
			        "<text class=\"none\" x=\"%d\" y=\"%.1f\">not stopped and resumed "
			        "on the axis</text>\n",
			        PLOT_LEFT, y + 14.0);
			continue;
		}
		if (v->downtime && json_object_is_type(v->downtime, json_type_int))
			snprintf(label, sizeof(label), "%.3f s +- %.3f (%s)",
			         (double)json_object_get_int64(v->downtime) / 1e9, v->unc_ns / 1e9,
			         strna(v->source));
		else
			snprintf(label, sizeof(label), "%.3f s, pause to resume (%s)",
			         (v->run_ns - v->stop_ns) / 1e9, strna(v->source));
		fprintf(f, "<g class=\"vm\" data-vm=\"");
		esc(f, v->name);
		fputs("\">", f);
		bar(f, s, v->stop_ns, v->run_ns, y, "vm-bar", "#76b7b2", label, label, LABEL_RIGHT);
		whisker(f, s, v->run_ns, v->unc_ns, y + BAR_HEIGHT / 2.0);
		fputs("</g>\n", f);
	}
}

static void draw_svg(FILE *f, json_object *r, const VmBar *vms, size_t n_vms) {
	json_object *phases = cli_jarray(r, "phases");
	Scale s = { 0, 0 };
	double unc = uncertainty_ns(r), origin, v, top = 40, height;

	for (size_t i = 0; i < cli_jarray_length(phases); i++) {
		json_object *p = json_object_array_get_idx(phases, i);

		if (jnum(p, "start_ns", &v))
			widen(&s, v);
		if (jnum(p, "end_ns", &v))
			widen(&s, v + unc);
	}
	for (size_t i = 0; i < n_vms; i++) {
		if (vms[i].have_stop)
			widen(&s, vms[i].stop_ns);
		if (vms[i].have_run)
			widen(&s, vms[i].run_ns + vms[i].unc_ns);
	}
	if (jnum(cli_jobj(r, "timebase"), "new_origin_ns", &origin) &&
	    jnum(cli_jobj(r, "boot"), "init_ns", &v))
		widen(&s, origin + v);
	if (!(s.hi - s.lo > 1e6))
		s.hi = s.lo + 1e9;
	v = (s.hi - s.lo) * 0.02;
	s.lo -= v;
	s.hi += v;

	height = top + ROW_HEIGHT * (4 + (double)n_vms) + 40;
	fprintf(f,
	        "<svg id=\"timeline\" width=\"%d\" height=\"%.0f\" viewBox=\"0 0 %d %.0f\" "
	        "role=\"img\">\n",
	        SVG_WIDTH, height, SVG_WIDTH, height);
	fputs("<title>The update on the report's time axis</title>\n", f);
	draw_axis(f, &s, top - 4, height - 30, axis_name(cli_jstr(r, "phase_axis")));
	draw_phases(f, &s, r, top);
	draw_purgatory(f, &s, r, top + ROW_HEIGHT);
	draw_boot_gaps(f, &s, r, top + 2 * ROW_HEIGHT);
	draw_critical_path(f, &s, r, top + 3 * ROW_HEIGHT);
	draw_vms(f, &s, vms, n_vms, top + 4 * ROW_HEIGHT);
	fputs("</svg>\n", f);
}

/* ---- the page ---- */

static const char style[] =
        "body{font-family:sans-serif;margin:24px;color:#222;background:#fff}"
        "h1{font-size:20px;margin:0 0 4px}.ok{color:#2e7d32}.failed{color:#c62828}"
        "table{border-collapse:collapse;margin:8px 0 20px;font-size:13px}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}th{background:#f3f3f3}"
        "td.n{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}"
        "svg text{font-size:12px;fill:#222}.row-label{text-anchor:end;font-weight:bold}"
        ".in-bar{text-anchor:middle;fill:#fff}.by-bar{text-anchor:start}"
        ".below-bar{text-anchor:middle;font-size:10px;fill:#444}"
        ".tick{text-anchor:middle;fill:#555}.grid{stroke:#e4e4e4}"
        ".zero{stroke:#c62828;stroke-dasharray:4 3}.zero-label{fill:#c62828}"
        ".whisker line{stroke:#111;stroke-width:1.5}.none{fill:#777;font-style:italic}"
        ".note{color:#555;font-size:13px;max-width:1150px}";

static void cell(FILE *f, const char *cls, const char *text) {
	fprintf(f, "<td%s>", cls ? " class=\"n\"" : "");
	esc(f, text);
	fputs("</td>", f);
}

static const char *secs(json_object *o, const char *k, char buf[static 32]) {
	double v;

	if (!jnum(o, k, &v))
		return "n/a";
	snprintf(buf, 32, "%.3f s", v / 1e9);
	return buf;
}

static void summary(FILE *f, json_object *r) {
	json_object *tot = cli_jobj(r, "totals"), *tb = cli_jobj(r, "timebase");
	const char *result = cli_jstr(r, "result");
	char a[32], b[32], c[32];

	fputs("<h1>Update ", f);
	esc(f, strna(cli_jstr(r, "id")));
	fprintf(f, ": <span class=\"%s\">", streq_ptr(result, "success") ? "ok" : "failed");
	esc(f, strna(result));
	fputs("</span></h1>\n<p class=\"note\">", f);
	esc(f, strna(cli_jstr(cli_jobj(r, "host"), "hostname")));
	fputs(": ", f);
	esc(f, strna(cli_jstr(cli_jobj(r, "old_kernel"), "version")));
	fputs(" &#8594; ", f);
	esc(f, strna(cli_jstr(cli_jobj(r, "new_kernel"), "version")));
	fputs(", handoff ", f);
	esc(f, strna(cli_jstr(cli_jobj(r, "handoff"), "mode")));
	fputs(", backend ", f);
	esc(f, strna(cli_jstr(cli_jobj(r, "backend"), "name")));
	fputs(", timebase ", f);
	esc(f, strna(cli_jstr(tb, "timebase")));
	fprintf(f, " +- %s.", secs(tb, "uncertainty_ns", a));
	fputs("<br>Started ", f);
	esc(f, strna(cli_jstr(r, "started_at")));
	fputs(", finished ", f);
	esc(f, strna(cli_jstr(r, "finished_at")));
	fputs(", machine ", f);
	esc(f, strna(cli_jstr(cli_jobj(r, "host"), "machine_id")));
	fputs(", upgraded ", f);
	esc(f, strna(cli_jstr(cli_jobj(r, "daemon"), "version")));
	fputs(".", f);
	if (cli_jstr(r, "reason")) {
		fputs(" Failed: ", f);
		esc(f, cli_jstr(r, "reason"));
	}
	fprintf(f,
	        "<br>Host blackout %s, max VM downtime %s, median %s (estimates, +- the "
	        "timebase uncertainty).</p>\n",
	        secs(tot, "host_blackout_ns", a), secs(tot, "max_vm_downtime_ns", b),
	        secs(tot, "median_vm_downtime_ns", c));
}

/* The boot gaps drawn (#1 is the largest) with the kernel message that ended each. */
static void boot_gap_table(FILE *f, json_object *r) {
	json_object *gaps = cli_jarray(cli_jobj(r, "boot"), "gaps");
	char a[32], b[32];

	fputs("</table>\n<h2>Largest boot gaps</h2><table id=\"boot-gaps\"><tr><th>#</th>"
	      "<th>gap</th><th>at (new kernel's clock)</th><th>ended by</th></tr>\n",
	      f);
	for (size_t i = 0; i < MIN(cli_jarray_length(gaps), (size_t)MAX_GAPS); i++) {
		json_object *g = json_object_array_get_idx(gaps, i);

		snprintf(a, sizeof(a), "%zu", i + 1);
		fputs("<tr>", f);
		cell(f, "n", a);
		cell(f, "n", secs(g, "gap_ns", a));
		cell(f, "n", secs(g, "start_ns", b));
		cell(f, NULL, strna(cli_jstr(g, "message")));
		fputs("</tr>\n", f);
	}
	fputs("</table>\n", f);
}

/* One table per kernel of the critical path: the unit, when it began and ended on the
 * report's axis, and how long it took. */
static void critical_path_table(FILE *f, json_object *side, const char *id, const char *title,
                                const char *began, const char *ended) {
	json_object *units = cli_jarray(side, "units");
	char a[32], b[32], c[32];

	fprintf(f,
	        "<h2>%s</h2><table id=\"%s\"><tr><th>unit</th><th>%s</th><th>%s</th>"
	        "<th>took</th></tr>\n",
	        title, id, began, ended);
	if (!side)
		fputs("<tr><td colspan=\"4\">not measured (see Missing figures)</td></tr>\n", f);
	for (size_t i = 0; i < cli_jarray_length(units); i++) {
		json_object *u = json_object_array_get_idx(units, i);

		fputs("<tr>", f);
		cell(f, NULL, strna(cli_jstr(u, "unit")));
		cell(f, "n", secs(u, "start_ns", a));
		cell(f, "n", secs(u, "end_ns", b));
		cell(f, "n", secs(u, "time_ns", c));
		fputs("</tr>\n", f);
	}
	fputs("</table>\n", f);
}

static void tables(FILE *f, json_object *r, const VmBar *vms, size_t n_vms) {
	json_object *phases = cli_jarray(r, "phases"), *missing = cli_jarray(r, "missing");
	char a[32], b[32], c[32];

	fputs("<h2>Phases</h2><table id=\"phases\"><tr><th>phase</th><th>kernel</th><th>start</th>"
	      "<th>end</th><th>duration</th><th>estimated</th></tr>\n",
	      f);
	for (size_t i = 0; i < cli_jarray_length(phases); i++) {
		json_object *p = json_object_array_get_idx(phases, i);

		fputs("<tr>", f);
		cell(f, NULL, strna(cli_jstr(p, "name")));
		cell(f, NULL, strna(cli_jstr(p, "kernel")));
		cell(f, "n", secs(p, "start_ns", a));
		cell(f, "n", secs(p, "end_ns", b));
		cell(f, "n", secs(p, "duration_ns", c));
		cell(f, NULL, json_object_get_boolean(cli_jobj(p, "estimated")) ? "yes" : "no");
		fputs("</tr>\n", f);
	}
	fputs("</table>\n<h2>VMs</h2><table id=\"vms\"><tr><th>VM</th><th>downtime</th>"
	      "<th>source</th><th>stopped at</th><th>running at</th></tr>\n",
	      f);
	for (size_t i = 0; i < n_vms; i++) {
		fputs("<tr>", f);
		cell(f, NULL, vms[i].name);
		snprintf(a, sizeof(a), vms[i].have_stop ? "%.3f s" : "n/a", vms[i].stop_ns / 1e9);
		snprintf(b, sizeof(b), vms[i].have_run ? "%.3f s" : "n/a", vms[i].run_ns / 1e9);
		if (vms[i].downtime && json_object_is_type(vms[i].downtime, json_type_int))
			snprintf(c, sizeof(c), "%.3f s",
			         (double)json_object_get_int64(vms[i].downtime) / 1e9);
		else
			snprintf(c, sizeof(c), "n/a");
		cell(f, "n", c);
		cell(f, NULL, strna(vms[i].source));
		cell(f, "n", a);
		cell(f, "n", b);
		fputs("</tr>\n", f);
	}
	boot_gap_table(f, r);
	critical_path_table(
	        f, cli_jobj(cli_jobj(r, "critical_path"), "old_kernel"), "old-kernel-stops",
	        "Units stopped after the reboot request (old kernel)", "stopping", "stopped");
	critical_path_table(
	        f, cli_jobj(cli_jobj(r, "critical_path"), "new_kernel"), "critical-chain",
	        "Critical chain up to the daemon (new kernel, estimated)", "starting", "active");
	fputs("<h2>Missing figures</h2><table id=\"missing\"><tr><th>figure</th>"
	      "<th>why</th></tr>\n",
	      f);
	if (cli_jarray_length(missing) == 0)
		fputs("<tr><td colspan=\"2\">none: every figure was measured</td></tr>\n", f);
	for (size_t i = 0; i < cli_jarray_length(missing); i++) {
		json_object *m = json_object_array_get_idx(missing, i);

		fputs("<tr>", f);
		cell(f, NULL, strna(cli_jstr(m, "figure")));
		cell(f, NULL, strna(cli_jstr(m, "reason")));
		fputs("</tr>\n", f);
	}
	fputs("</table>\n", f);
}

void report_html(json_object *r, FILE *f) {
	VmBar vms[MAX_VMS];
	size_t n_vms = collect_vms(r, vms, ELEMENTSOF(vms));

	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
	      "<meta name=\"viewport\" content=\"width=device-width\">\n<title>Update ",
	      f);
	esc(f, strna(cli_jstr(r, "id")));
	fprintf(f, "</title>\n<style>%s</style></head>\n<body>\n", style);
	summary(f, r);
	draw_svg(f, r, vms, n_vms);
	fputs("<p class=\"note\">Bars on the report's time axis. Phases: blue on the old kernel, "
	      "orange across the handoff, green on the new kernel; whiskers mark the +- "
	      "uncertainty of a time that crosses the kexec. VM bars run from the VM's pause to "
	      "its resume.</p>\n",
	      f);
	tables(f, r, vms, n_vms);
	fputs("</body></html>\n", f);
}

int report_html_write(json_object *report, const char *path) {
	_cleanup_free_ char *text = NULL;
	size_t size = 0;
	FILE *f;

	f = open_memstream(&text, &size);
	if (!f)
		return -ENOMEM;
	report_html(report, f);
	if (fclose(f) != 0)
		return -ENOMEM;
	if (!path)
		return fwrite(text, 1, size, stdout) == size ? 0 : -EIO;
	return write_file_atomic(path, text, size, 0644);
}
