/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Schema 1 -> schema 2 of the update report (report-schema.h, docs/report.md "Changes
 * from schema 1"). Every input is untrusted (a report file read back): a field of the
 * wrong type becomes null, never a crash.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fileio.h"
#include "macros.h"
#include "path-util.h"
#include "report-schema.h"

typedef json_object *(*Convert)(json_object *v);

static json_object *field(json_object *o, const char *k) {
	json_object *v;

	if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, k, &v))
		return NULL;
	return v;
}

static bool is_int(json_object *v) {
	return v && json_object_is_type(v, json_type_int);
}

static bool is_array(json_object *v) {
	return v && json_object_is_type(v, json_type_array);
}

static void add(json_object *o, const char *k, json_object *v) {
	json_object_object_add(o, k, v);
}

static json_object *string_or_null(const char *s) {
	return s ? json_object_new_string(s) : NULL;
}

/* A copy of an integer field (a new reference), null otherwise. */
static json_object *int_copy(json_object *v) {
	return is_int(v) ? json_object_new_int64(json_object_get_int64(v)) : NULL;
}

/* Microseconds -> nanoseconds; null when not an integer or out of range. */
static json_object *usec_to_ns(json_object *v) {
	int64_t x;

	if (!is_int(v))
		return NULL;
	x = json_object_get_int64(v);
	if (x > INT64_MAX / 1000 || x < INT64_MIN / 1000)
		return NULL;
	return json_object_new_int64(x * 1000);
}

/* CLOCK_REALTIME microseconds -> ISO 8601 UTC; null when not a usable instant. */
static json_object *usec_to_iso(json_object *v) {
	char buf[32];

	if (!is_int(v) || json_object_get_int64(v) < 0)
		return NULL;
	return string_or_null(report_iso_format((uint64_t)json_object_get_int64(v), buf));
}

/* An instant that may be unknown (< 0) as ISO 8601 UTC. */
static json_object *iso_or_null(int64_t usec) {
	char buf[32];

	return usec >= 0 ? string_or_null(report_iso_format((uint64_t)usec, buf)) : NULL;
}

/* Moves o[from] to o[to] through convert (NULL: unchanged); an absent field stays absent. */
static void move_field(json_object *o, const char *from, const char *to, Convert convert) {
	json_object *v;

	if (!o || !json_object_is_type(o, json_type_object) ||
	    !json_object_object_get_ex(o, from, &v))
		return;
	v = convert ? convert(v) : json_object_get(v);
	json_object_object_del(o, from);
	add(o, to, v);
}

const char *report_iso_format(uint64_t realtime_usec, char buf[static 32]) {
	time_t t = (time_t)(realtime_usec / 1000000);
	struct tm tm;
	size_t n;

	if (!gmtime_r(&t, &tm))
		return NULL;
	n = strftime(buf, 32, "%Y-%m-%dT%H:%M:%S", &tm);
	if (n == 0 || n > 20)
		return NULL;
	snprintf(buf + n, 32 - n, ".%06" PRIu64 "Z", realtime_usec % 1000000);
	return buf;
}

int report_iso_parse(const char *s, uint64_t *ret_usec) {
	struct tm tm = {};
	const char *p;
	unsigned long us = 0;
	int digits = 0;
	time_t t;

	if (!s || !(p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm)))
		return -EINVAL;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			if (digits++ < 6)
				us = us * 10 + (unsigned long)(*p - '0');
	for (; digits > 0 && digits < 6; digits++)
		us *= 10;
	if (p[0] != 'Z' || p[1] != '\0')
		return -EINVAL;
	t = timegm(&tm);
	if (t < 0)
		return -EINVAL;
	*ret_usec = (uint64_t)t * 1000000 + us;
	return 0;
}

int report_read_machine_id(const char *root, char **ret) {
	_cleanup_free_ char *path = NULL, *data = NULL;
	size_t size = 0;
	int r;

	r = path_prefix_root(root, "/etc/machine-id", &path);
	if (r < 0)
		return r;
	r = read_file_full(path, 64, &data, &size);
	if (r < 0)
		return r;
	while (size > 0 && (data[size - 1] == '\n' || data[size - 1] == ' '))
		data[--size] = '\0';
	if (size != 32 || strspn(data, "0123456789abcdef") != 32)
		return -EBADMSG;
	*ret = TAKE_PTR(data);
	return 0;
}

/* "severity: code: text" (policy_reasons_format()) -> {code, severity, text}; any other
 * text gets fallback_code and fallback_severity. */
static json_object *reason_object(const char *s, const char *fallback_code,
                                  const char *fallback_severity) {
	static const char *const severities[] = { "info", "warning", "blocking" };
	json_object *o = json_object_new_object();
	const char *code = NULL, *text = s;
	size_t sev = 0, code_len = 0;

	for (size_t i = 0; i < ELEMENTSOF(severities); i++) {
		size_t n = strlen(severities[i]);
		const char *e;

		if (strncmp(s, severities[i], n) != 0 || strncmp(s + n, ": ", 2) != 0)
			continue;
		e = strstr(s + n + 2, ": ");
		if (!e || e == s + n + 2)
			break;
		sev = i;
		code = s + n + 2;
		code_len = (size_t)(e - code);
		text = e + 2;
		break;
	}
	add(o, "code",
	    code ? json_object_new_string_len(code, (int)code_len)
	         : json_object_new_string(fallback_code));
	add(o, "severity", json_object_new_string(code ? severities[sev] : fallback_severity));
	add(o, "text", json_object_new_string(text));
	return o;
}

/* A list of reason texts -> reason objects; entries that are objects already stay. */
static void reasons_to_objects(json_object *o, const char *key, const char *fallback_code,
                               const char *fallback_severity) {
	json_object *l = field(o, key), *out;

	if (!is_array(l))
		return;
	out = json_object_new_array();
	for (size_t i = 0; i < json_object_array_length(l); i++) {
		json_object *v = json_object_array_get_idx(l, i);

		if (v && json_object_is_type(v, json_type_string))
			json_object_array_add(out, reason_object(json_object_get_string(v),
			                                         fallback_code, fallback_severity));
		else if (v && json_object_is_type(v, json_type_object))
			json_object_array_add(out, json_object_get(v));
	}
	add(o, key, out);
}

/* The handoff's reasons (the policy's, and the daemon's own: code "handoff") and those of
 * the old kernel's shutdown (code "shutdown"). */
static void upgrade_handoff(json_object *report) {
	json_object *h = field(report, "handoff");

	reasons_to_objects(h, "reasons", "handoff", "info");
	reasons_to_objects(field(h, "shutdown"), "reasons", "shutdown", "info");
}

/* stamps[]: realtime -> "at", monotonic -> "monotonic_ns" (that boot's clock). */
static void upgrade_stamps(json_object *report) {
	json_object *l = field(report, "stamps");

	for (size_t i = 0; is_array(l) && i < json_object_array_length(l); i++) {
		json_object *s = json_object_array_get_idx(l, i);

		move_field(s, "realtime_usec", "at", usec_to_iso);
		move_field(s, "monotonic_usec", "monotonic_ns", usec_to_ns);
		/* Moved to the end to keep the order: name, at, monotonic_ns, tsc, boot_id. */
		move_field(s, "tsc", "tsc", NULL);
		move_field(s, "boot_id", "boot_id", NULL);
	}
}

/* The CLOCK_REALTIME microseconds of the first stamp, or of the last stamp called
 * name_a or name_b; -1 when there is none. */
static int64_t stamp_usec(json_object *report, bool first, const char *name_a, const char *name_b) {
	json_object *l = field(report, "stamps");
	int64_t found = -1;

	for (size_t i = 0; is_array(l) && i < json_object_array_length(l); i++) {
		json_object *s = json_object_array_get_idx(l, i), *n = field(s, "name");
		json_object *t = field(s, "realtime_usec");
		const char *name = n && json_object_is_type(n, json_type_string)
		                           ? json_object_get_string(n)
		                           : "";

		if (!is_int(t) || json_object_get_int64(t) < 0)
			continue;
		if (first)
			return json_object_get_int64(t);
		if ((name_a && strcmp(name, name_a) == 0) || (name_b && strcmp(name, name_b) == 0))
			found = json_object_get_int64(t);
	}
	return found;
}

/* schema, host.machine_id, daemon.version, started_at, finished_at. */
static void upgrade_identity(json_object *report, const ReportIdentity *id) {
	int64_t started = stamp_usec(report, true, NULL, NULL);
	int64_t finished = stamp_usec(report, false, "completed", "failed");
	json_object *host = field(report, "host"), *d;

	add(report, "schema", json_object_new_int(REPORT_SCHEMA_LATEST));
	if (finished < 0 && id && id->written_usec > 0)
		finished = (int64_t)id->written_usec;
	add(report, "started_at", iso_or_null(started));
	add(report, "finished_at", iso_or_null(finished));
	if (host && json_object_is_type(host, json_type_object)) {
		add(host, "machine_id", string_or_null(id ? id->machine_id : NULL));
		/* hostname, machine_id, then the boots */
		move_field(host, "old_boot_id", "old_boot_id", NULL);
		move_field(host, "new_boot_id", "new_boot_id", NULL);
	}
	add(report, "daemon", d = json_object_new_object());
	add(d, "version", string_or_null(id ? id->version : NULL));
}

/* The panic path's CLOCK_REALTIME moments -> ISO 8601 UTC. */
static void upgrade_panic_path(json_object *report) {
	json_object *p = field(report, "panic_path");

	move_field(field(p, "old_kernel_last_stamp"), "realtime_usec", "at", usec_to_iso);
	move_field(p, "recovery_realtime_usec", "recovery_at", usec_to_iso);
	move_field(p, "handoff_realtime_usec", "handoff_at", usec_to_iso);
	move_field(p, "handoff_mode", "handoff_mode", NULL);
}

/* The new kernel's boot analysis: microseconds on its kernel-local clock -> ns. */
static void upgrade_boot(json_object *report) {
	json_object *b = field(report, "boot"), *gaps = field(b, "gaps");

	move_field(b, "init_us", "init_ns", usec_to_ns);
	for (size_t i = 0; is_array(gaps) && i < json_object_array_length(gaps); i++) {
		json_object *g = json_object_array_get_idx(gaps, i);

		move_field(g, "gap_us", "gap_ns", usec_to_ns);
		move_field(g, "start_us", "start_ns", usec_to_ns);
		move_field(g, "end_us", "end_ns", usec_to_ns);
	}
}

/* The cross-kexec estimate of the VM called name (schema 1's vm_downtime[]), or NULL. */
static json_object *estimate_of(json_object *estimates, json_object *name) {
	const char *n = name && json_object_is_type(name, json_type_string)
	                        ? json_object_get_string(name)
	                        : NULL;

	for (size_t i = 0; n && is_array(estimates) && i < json_object_array_length(estimates);
	     i++) {
		json_object *e = json_object_array_get_idx(estimates, i), *en = field(e, "name");

		if (en && json_object_is_type(en, json_type_string) &&
		    strcmp(json_object_get_string(en), n) == 0)
			return e;
	}
	return NULL;
}

/* A VM's one downtime: the cross-kexec estimate when it was computed (source probe,
 * marks or mixed, +- the timebase), else libvirt's pause -> resume wall clock (source
 * libvirt-wallclock, no bound: the wall clock may step across the kexec), else none. */
static json_object *downtime_object(json_object *wallclock_usec, json_object *est) {
	json_object *d = json_object_new_object(), *ns = field(est, "downtime_ns");
	json_object *src = field(est, "downtime_source");

	if (is_int(ns)) {
		add(d, "ns", int_copy(ns));
		add(d, "source",
		    src && json_object_is_type(src, json_type_string)
		            ? json_object_new_string(json_object_get_string(src))
		            : NULL);
		add(d, "uncertainty_ns", int_copy(field(est, "uncertainty_ns")));
	} else if (is_int(wallclock_usec) && json_object_get_int64(wallclock_usec) >= 0) {
		add(d, "ns", usec_to_ns(wallclock_usec));
		add(d, "source", json_object_new_string("libvirt-wallclock"));
		add(d, "uncertainty_ns", NULL);
	} else {
		add(d, "ns", NULL);
		add(d, "source", NULL);
		add(d, "uncertainty_ns", NULL);
	}
	add(d, "estimated", json_object_new_boolean(true));
	add(d, "stopped_ns", int_copy(field(est, "stopped_ns")));
	add(d, "running_ns", int_copy(field(est, "running_ns")));
	return d;
}

/* One VM record (vm_results_to_json(), microseconds) -> schema 2's units and downtime. */
static void upgrade_vm(json_object *vm, json_object *estimates) {
	json_object *k = field(vm, "kept_ram"), *c = field(vm, "clock_sync");

	if (!vm || !json_object_is_type(vm, json_type_object))
		return;
	add(vm, "downtime",
	    downtime_object(field(vm, "downtime"), estimate_of(estimates, field(vm, "name"))));
	move_field(vm, "paused_at", "paused_at", usec_to_iso);
	move_field(vm, "saved_at", "saved_at", usec_to_iso);
	move_field(vm, "saved_bytes", "saved_bytes", NULL);
	move_field(vm, "save_time", "save_ns", usec_to_ns);
	move_field(vm, "restore_time", "restore_ns", usec_to_ns);
	move_field(vm, "resumed_at", "resumed_at", usec_to_iso);
	move_field(vm, "downtime", "downtime", NULL);
	move_field(vm, "error", "error", NULL);
	move_field(vm, "kept_ram", "kept_ram", NULL);
	move_field(vm, "fallback_reason", "fallback_reason", NULL);
	move_field(vm, "clock_sync", "clock_sync", NULL);

	move_field(k, "size", "size_bytes", NULL);
	move_field(k, "digest_time", "digest_ns", usec_to_ns);
	move_field(k, "verify_time", "verify_ns", usec_to_ns);
	move_field(k, "start_attempts", "start_attempts", NULL);

	move_field(c, "synced_at", "synced_at", usec_to_iso);
	move_field(c, "sync_time", "sync_ns", usec_to_ns);
	move_field(c, "behind", "behind_ns", usec_to_ns);
	move_field(c, "reason", "reason", NULL);
}

static int cmp_i64(const void *a, const void *b) {
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* Drops the "missing" entries about figure (a figure schema 2 has after all). */
static void drop_missing(json_object *report, const char *figure) {
	json_object *m = field(report, "missing"), *keep;

	if (!is_array(m))
		return;
	keep = json_object_new_array();
	for (size_t i = 0; i < json_object_array_length(m); i++) {
		json_object *e = json_object_array_get_idx(m, i), *f = field(e, "figure");

		if (!f || !json_object_is_type(f, json_type_string) ||
		    strcmp(json_object_get_string(f), figure) != 0)
			json_object_array_add(keep, json_object_get(e));
	}
	add(report, "missing", keep);
}

/* Whether some VM's downtime has this source. */
static bool has_source(json_object *vms, const char *source) {
	for (size_t i = 0; is_array(vms) && i < json_object_array_length(vms); i++) {
		json_object *s =
		        field(field(json_object_array_get_idx(vms, i), "downtime"), "source");

		if (s && json_object_is_type(s, json_type_string) &&
		    strcmp(json_object_get_string(s), source) == 0)
			return true;
	}
	return false;
}

/* totals.max/median_vm_downtime_ns over the VMs' one downtime each (left as they are
 * when no VM has one), and the sources of those figures. */
static void upgrade_totals(json_object *report) {
	static const char *const sources[] = { "probe", "marks", "mixed", "libvirt-wallclock" };
	json_object *vms = field(report, "vms"), *t = field(report, "totals"), *l;
	size_t n = 0, len = is_array(vms) ? json_object_array_length(vms) : 0;
	_cleanup_free_ int64_t *d = calloc(len ?: 1, sizeof(*d));

	if (!d || !t || !json_object_is_type(t, json_type_object))
		return;
	for (size_t i = 0; i < len; i++) {
		json_object *ns = field(field(json_object_array_get_idx(vms, i), "downtime"), "ns");

		if (is_int(ns))
			d[n++] = json_object_get_int64(ns);
	}
	add(t, "vm_downtime_sources", l = json_object_new_array());
	for (size_t i = 0; i < ELEMENTSOF(sources); i++)
		if (has_source(vms, sources[i]))
			json_object_array_add(l, json_object_new_string(sources[i]));
	move_field(t, "estimated", "estimated", NULL);
	if (n == 0)
		return;
	qsort(d, n, sizeof(*d), cmp_i64);
	add(t, "max_vm_downtime_ns", json_object_new_int64(d[n - 1]));
	add(t, "median_vm_downtime_ns",
	    json_object_new_int64(n % 2 ? d[n / 2] : d[n / 2 - 1] / 2 + d[n / 2] / 2));
	drop_missing(report, "vm_downtime_totals");
}

/* vms[] in schema 2, schema 1's vm_downtime[] folded into them; the totals follow. */
static void upgrade_vms(json_object *report) {
	json_object *vms = field(report, "vms"), *est = field(report, "vm_downtime");

	for (size_t i = 0; is_array(vms) && i < json_object_array_length(vms); i++)
		upgrade_vm(json_object_array_get_idx(vms, i), est);
	json_object_object_del(report, "vm_downtime");
	upgrade_totals(report);
}

/* Sizes are *_bytes. */
static void upgrade_sizes(json_object *report) {
	move_field(field(report, "new_kernel"), "size", "size_bytes", NULL);
	move_field(field(report, "initrd"), "size", "size_bytes", NULL);
}

/* The top-level keys in the documented order; unknown keys follow. */
static void reorder(json_object *report) {
	static const char *const order[] = {
		"schema",        "id",          "result",     "reason",         "errors",
		"started_at",    "finished_at", "host",       "daemon",         "backend",
		"handoff",       "old_kernel",  "new_kernel", "initrd",         "cmdline",
		"booted_kernel", "panic_path",  "stamps",     "deferred_units", "phase_axis",
		"timebase",      "phases",      "probe",      "boot",           "critical_path",
		"purgatory",     "vms",         "decisions",  "totals",         "missing",
	};

	for (size_t i = 0; i < ELEMENTSOF(order); i++)
		move_field(report, order[i], order[i], NULL);
	/* Anything else, in its order, after them. */
	for (size_t n = json_object_object_length(report); n > 0; n--) {
		struct json_object_iterator it = json_object_iter_begin(report);
		_cleanup_free_ char *k = strdup(json_object_iter_peek_name(&it));
		bool known = false;

		for (size_t i = 0; k && i < ELEMENTSOF(order) && !known; i++)
			known = strcmp(order[i], k) == 0;
		if (!k || known)
			break;
		move_field(report, k, k, NULL);
	}
}

int report_upgrade(json_object *report, const ReportIdentity *id) {
	json_object *schema = field(report, "schema");

	if (!report || !json_object_is_type(report, json_type_object))
		return -EBADMSG;
	if (!is_int(schema))
		return -EBADMSG;
	if (json_object_get_int64(schema) == REPORT_SCHEMA_LATEST)
		return 0;
	if (json_object_get_int64(schema) != 1)
		return -EPROTONOSUPPORT;

	upgrade_identity(report, id); /* reads the stamps: before they change */
	upgrade_stamps(report);
	upgrade_handoff(report);
	upgrade_panic_path(report);
	upgrade_sizes(report);
	upgrade_boot(report);
	upgrade_vms(report);
	reorder(report);
	return 0;
}
