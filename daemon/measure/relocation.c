/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The relocation slice of a handoff (relocation.h): "Starting new kernel" in the
 * old kernel's shutdown dump, put on the report's axis by the daemon's own mark
 * beside it, against purgatory's entry stamp.
 */
#include <errno.h>
#include <string.h>

#include "macros.h"
#include "relocation.h"

#define KEXEC_CORE_PREFIX    "kexec_core: "
#define PRINTK_RESOLUTION_NS 1000u /* printk times are whole microseconds */

/* Digits at *p (at most max of them) into *v; false when there is none or too many. */
static bool parse_digits(const char **p, const char *end, unsigned max, uint64_t *v) {
	const char *start = *p;

	*v = 0;
	while (*p < end && **p >= '0' && **p <= '9') {
		if ((unsigned)(*p - start) >= max)
			return false;
		*v = *v * 10 + (uint64_t)(**p - '0');
		(*p)++;
	}
	return *p > start;
}

/*
 * One dump line: "<pri>" (optional), "[  SSSSS.UUUUUU]", an optional caller id
 * "[T123]"/"[C1]", a blank, the message. *ret_msg points into line.
 */
static bool parse_line(const char *line, size_t len, uint64_t *ret_us, const char **ret_msg,
                       size_t *ret_msg_len) {
	const char *p = line, *end = line + len;
	uint64_t sec, usec;

	if (p < end && *p == '<') {
		while (p < end && *p != '>')
			p++;
		if (p == end)
			return false;
		p++;
	}
	if (p >= end || *p++ != '[')
		return false;
	while (p < end && *p == ' ')
		p++;
	if (!parse_digits(&p, end, 12, &sec) || p >= end || *p++ != '.')
		return false;
	if (!parse_digits(&p, end, 6, &usec) || p >= end || *p++ != ']')
		return false;
	if (p < end && *p == '[') { /* CONFIG_PRINTK_CALLER */
		while (p < end && *p != ']')
			p++;
		if (p == end)
			return false;
		p++;
	}
	if (p >= end || *p++ != ' ')
		return false;
	*ret_us = sec * 1000000u + usec;
	*ret_msg = p;
	*ret_msg_len = (size_t)(end - p);
	return true;
}

static bool msg_is(const char *msg, size_t len, const char *want) {
	return len == strlen(want) && memcmp(msg, want, len) == 0;
}

static bool msg_is_start(const char *msg, size_t len) {
	size_t k = strlen(KEXEC_CORE_PREFIX);

	if (len > k && memcmp(msg, KEXEC_CORE_PREFIX, k) == 0) {
		msg += k;
		len -= k;
	}
	return msg_is(msg, len, RELOCATION_START_MESSAGE);
}

int relocation_log_parse(const char *text, size_t size, const char *update_id, RelocationLog *ret) {
	size_t mark_len = strlen(RELOCATION_MARK_PREFIX);
	RelocationLog found = {};
	bool have_mark = false, have_start = false;

	if (!update_id || !*update_id || (!text && size > 0))
		return -EINVAL;
	for (size_t pos = 0; pos < size;) {
		const char *line = text + pos, *nl = memchr(line, '\n', size - pos), *msg;
		size_t len = nl ? (size_t)(nl - line) : size - pos, msg_len;
		uint64_t us;

		pos += len + 1;
		if (len > 0 && line[len - 1] == '\r')
			len--;
		if (!parse_line(line, len, &us, &msg, &msg_len))
			continue;
		if (msg_len > mark_len && memcmp(msg, RELOCATION_MARK_PREFIX, mark_len) == 0 &&
		    msg_is(msg + mark_len, msg_len - mark_len, update_id)) {
			found.mark_us = us; /* the last mark wins; a start before it is not ours */
			have_mark = true;
			have_start = false;
		} else if (have_mark && !have_start && msg_is_start(msg, msg_len)) {
			found.start_us = us;
			have_start = true;
		}
	}
	if (!have_mark || !have_start)
		return -ENOENT;
	*ret = found;
	return 0;
}

static uint64_t sat_add(uint64_t a, uint64_t b) {
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* ppm of x, rounded up. */
static uint64_t ppm_of(uint64_t x, uint32_t ppm) {
	return (uint64_t)(((unsigned __int128)x * ppm + 999999u) / 1000000u);
}

int relocation_compute(const RelocationLog *log, const TimebaseSample *request,
                       uint64_t mark_written_ns, const TimebaseInput *in, Relocation *ret,
                       const char **ret_reason) {
	uint64_t latency, d_ns, u;
	uint32_t ppm;
	int64_t entry, start;
	const char *why = NULL;

	if (!log || !request || !in || !ret || !ret_reason)
		return -EINVAL;
	if (in->stamps.entry == 0)
		why = "no purgatory entry stamp (the kernel's own purgatory stamps nothing)";
	else if (request->tsc == 0)
		why = "the reboot-request sample has no TSC reading";
	else if (in->cpu.tsc_khz == 0)
		why = "the TSC frequency is unknown";
	else if (mark_written_ns == 0 || mark_written_ns < request->monotonic_ns)
		why = "the handoff record does not say when the reboot-request mark was written";
	if (why) {
		*ret_reason = why;
		return -ENODATA;
	}
	if (log->start_us < log->mark_us ||
	    timebase_tsc_interval_ns(request->tsc, in->stamps.entry, in->cpu.tsc_khz, &entry,
	                             NULL) < 0) {
		*ret_reason = "the old kernel's lines or purgatory's entry stamp are out of order";
		return -ERANGE;
	}
	/* The mark's printk time lies between the sample (t = 0) and its write. */
	latency = mark_written_ns - request->monotonic_ns;
	d_ns = (log->start_us - log->mark_us) * 1000u;
	if (d_ns > TIMEBASE_MAX_HANDOFF_NS) {
		*ret_reason = "the old kernel's lines are further apart than any handoff";
		return -ERANGE;
	}
	start = (int64_t)(d_ns + latency / 2);
	ppm = in->cpu.tsc_khz_ppm ?: TIMEBASE_DEFAULT_TSC_PPM;
	/* The half latency, the two printk truncations, the sample's own width, and the
	 * rate error over both intervals (printk's clock counts the old kernel's TSC at
	 * its calibration, the stamp is converted at the new kernel's). */
	u = sat_add(latency / 2 + latency % 2, 2 * PRINTK_RESOLUTION_NS);
	u = sat_add(u, request->skew_ns);
	u = sat_add(u, ppm_of((uint64_t)entry + d_ns, ppm));
	if (entry < start && (uint64_t)(start - entry) > u) {
		*ret_reason = "purgatory's entry stamp precedes \"Starting new kernel\"";
		return -ERANGE;
	}
	*ret = (Relocation){
		.start_ns = start,
		.entry_ns = entry,
		.ns = entry - start,
		.uncertainty_ns = u,
		.estimated = !in->cpu.constant_tsc || !in->cpu.nonstop_tsc || in->cpu.tsc_unstable,
	};
	*ret_reason = ret->estimated ? "the TSC is not invariant (constant_tsc, nonstop_tsc, "
	                               "stable): printk's clock and the stamp may drift apart"
	                             : NULL;
	return 0;
}

int relocation_to_json(const Relocation *r, const char *source, const char *reason,
                       struct json_object **ret) {
	json_object *o;

	if (!r || !ret)
		return -EINVAL;
	o = json_object_new_object();
	if (!o)
		return -ENOMEM;
	json_object_object_add(o, "ns", json_object_new_int64(r->ns));
	json_object_object_add(o, "uncertainty_ns", json_object_new_uint64(r->uncertainty_ns));
	json_object_object_add(o, "start_ns", json_object_new_int64(r->start_ns));
	json_object_object_add(o, "entry_ns", json_object_new_int64(r->entry_ns));
	json_object_object_add(o, "estimated", json_object_new_boolean(r->estimated));
	json_object_object_add(o, "source", source ? json_object_new_string(source) : NULL);
	json_object_object_add(o, "reason", reason ? json_object_new_string(reason) : NULL);
	*ret = o;
	return 0;
}
