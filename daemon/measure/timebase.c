/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Puts the old and the new kernel's clocks on one axis, states how sure that
 * is, and says why (see timebase.h and docs/measurement.md).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "handoff-mode.h"
#include "macros.h"
#include "purgatory-abi.h"
#include "timebase.h"

#define NSEC_PER_SEC UINT64_C(1000000000)

static const char *const kind_table[_TIMEBASE_KIND_MAX] = {
	[TIMEBASE_TSC] = "tsc",
	[TIMEBASE_REALTIME] = "realtime",
	[TIMEBASE_NONE] = "none",
};

static const char *const flag_table[_TIMEBASE_FLAG_COUNT] = {
	"tsc-not-invariant",  "tsc-unstable",   "tsc-no-frequency",   "tsc-missing",
	"tsc-reset",          "tsc-wrapped",    "realtime-backwards", "realtime-stepped",
	"realtime-disagrees", "stamps-missing", "stamps-untrusted",   "stamps-disordered",
};

const char *timebase_kind_to_string(TimebaseKind k) {
	if ((unsigned)k >= _TIMEBASE_KIND_MAX)
		return NULL;
	return kind_table[k];
}

const char *timebase_flag_to_string(unsigned flag) {
	for (unsigned i = 0; i < _TIMEBASE_FLAG_COUNT; i++)
		if (flag == 1u << i)
			return flag_table[i];
	return NULL;
}

static uint64_t abs_diff(int64_t a, int64_t b) {
	return a > b ? (uint64_t)a - (uint64_t)b : (uint64_t)b - (uint64_t)a;
}

static uint64_t sat_add(uint64_t a, uint64_t b) {
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

int timebase_tsc_interval_ns(uint64_t from, uint64_t to, uint64_t khz, int64_t *ret_ns,
                             bool *ret_wrapped) {
	unsigned __int128 ns;
	uint64_t d = to - from;

	if (khz == 0)
		return -EINVAL;
	ns = (unsigned __int128)d * 1000000u / khz;
	if (ns > TIMEBASE_MAX_HANDOFF_NS)
		return -ERANGE;
	*ret_ns = (int64_t)ns;
	if (ret_wrapped)
		*ret_wrapped = to < from;
	return 0;
}

static bool sample_present(const TimebaseSample *s) {
	return s->monotonic_ns != 0 || s->realtime_ns != 0;
}

/* Narrows [c - u, c + u] to what is physically possible (c >= lo) and re-centres it. */
static bool clamp_interval(int64_t *c, uint64_t *u, int64_t lo) {
	int64_t lower = *c - (int64_t)MIN(*u, (uint64_t)INT64_MAX);
	int64_t upper = *c + (int64_t)MIN(*u, (uint64_t)INT64_MAX);

	if (upper < lo)
		return false;
	if (lower < lo) {
		lower = lo;
		*c = lower + (upper - lower) / 2;
		*u = (uint64_t)(upper - lower) / 2;
	}
	return true;
}

static void compute_stamps(const TimebaseInput *in, Timebase *tb) {
	const uint64_t raw[3] = { in->stamps.entry, in->stamps.verified, in->stamps.jump };
	int64_t prev = 0, end;
	bool any = false, ordered = true;

	for (unsigned i = 0; i < 3; i++)
		tb->stamp_ns[i] = TIMEBASE_STAMP_ABSENT;

	for (unsigned i = 0; i < 3; i++)
		any = any || raw[i] != 0;
	if (!any) {
		tb->flags |= TIMEBASE_STAMPS_MISSING;
		return;
	}
	if (in->old_reboot.tsc == 0 || in->cpu.tsc_khz == 0) {
		/* nothing to convert them with: raw values only */
		tb->flags |= TIMEBASE_STAMPS_UNTRUSTED;
		return;
	}

	/* Stamps must follow the reboot request, each other, and precede the new
	 * kernel's daemon start (as far as the TSC says). */
	end = tb->kind == TIMEBASE_NONE ? INT64_MAX
	                                : tb->new_origin_ns + (int64_t)MIN(tb->uncertainty_ns,
	                                                                   (uint64_t)INT64_MAX / 2);
	for (unsigned i = 0; i < 3; i++) {
		int64_t ns;

		if (raw[i] == 0)
			continue;
		if (timebase_tsc_interval_ns(in->old_reboot.tsc, raw[i], in->cpu.tsc_khz, &ns,
		                             NULL) < 0) {
			ordered = false;
			continue;
		}
		tb->stamp_ns[i] = ns;
		if (ns < prev || ns > end)
			ordered = false;
		prev = ns;
	}
	if (!ordered)
		tb->flags |= TIMEBASE_STAMPS_DISORDERED;
	if (tb->kind != TIMEBASE_TSC)
		tb->flags |= TIMEBASE_STAMPS_UNTRUSTED;
	tb->stamps_trusted = ordered && tb->kind == TIMEBASE_TSC;
}

/* Step 1 of timebase_compute(): whether the TSC can carry the axis; sets tb's TSC flags and,
 * when the two readings give an interval, tb->tsc_gap_ns. */
static bool tsc_usable(const TimebaseInput *in, Timebase *tb) {
	const TimebaseSample *o = &in->old_reboot, *n = &in->new_start;
	bool tsc_ok = true, wrapped = false;

	if (!in->cpu.constant_tsc || !in->cpu.nonstop_tsc) {
		tb->flags |= TIMEBASE_TSC_NOT_INVARIANT;
		tsc_ok = false;
	}
	if (in->cpu.tsc_unstable) {
		tb->flags |= TIMEBASE_TSC_UNSTABLE;
		tsc_ok = false;
	}
	if (in->cpu.tsc_khz == 0) {
		tb->flags |= TIMEBASE_TSC_NO_FREQUENCY;
		tsc_ok = false;
	}
	if (o->tsc == 0 || n->tsc == 0) {
		tb->flags |= TIMEBASE_TSC_MISSING;
		tsc_ok = false;
	}
	if (in->cpu.tsc_khz != 0 && o->tsc != 0 && n->tsc != 0) {
		int64_t gap;

		if (timebase_tsc_interval_ns(o->tsc, n->tsc, in->cpu.tsc_khz, &gap, &wrapped) < 0 ||
		    gap < (int64_t)MIN(n->monotonic_ns, (uint64_t)INT64_MAX)) {
			/* backwards, or less time than the new kernel has been up */
			tb->flags |= TIMEBASE_TSC_RESET;
			tsc_ok = false;
		} else {
			tb->tsc_gap_ns = gap;
			if (wrapped)
				tb->flags |= TIMEBASE_TSC_WRAPPED;
		}
	}
	return tsc_ok;
}

int timebase_compute(const TimebaseInput *in, Timebase *ret) {
	const TimebaseSample *o = &in->old_reboot, *n = &in->new_start;
	Timebase tb = {
		.kind = TIMEBASE_NONE,
		.tsc_gap_ns = INT64_MIN,
	};
	uint64_t rt_u, skew, ppm;
	bool tsc_ok;

	if (!in || !ret || !sample_present(o) || !sample_present(n) || o->realtime_ns == 0 ||
	    n->realtime_ns == 0)
		return -EINVAL;

	skew = sat_add(o->skew_ns, n->skew_ns);
	rt_u = sat_add(in->realtime_uncertainty_ns ?: TIMEBASE_DEFAULT_REALTIME_UNCERTAINTY_NS,
	               skew);
	ppm = in->cpu.tsc_khz_ppm ?: TIMEBASE_DEFAULT_TSC_PPM;
	tb.realtime_gap_ns = (int64_t)(n->realtime_ns - o->realtime_ns);

	/* A step of CLOCK_REALTIME on the old kernel shows as a change of
	 * realtime - monotonic between two samples; widen by its size. */
	if (sample_present(&in->old_earlier)) {
		int64_t off0 =
		        (int64_t)(in->old_earlier.realtime_ns - in->old_earlier.monotonic_ns);
		int64_t off1 = (int64_t)(o->realtime_ns - o->monotonic_ns);
		uint64_t step = abs_diff(off1, off0);

		if (step > TIMEBASE_STEP_THRESHOLD_NS) {
			tb.flags |= TIMEBASE_REALTIME_STEPPED;
			rt_u = sat_add(rt_u, step);
		}
	}

	/* 1. Can the TSC carry the axis? */
	tsc_ok = tsc_usable(in, &tb);

	/* 2. TSC timebase: error grows with the interval times the frequency error. */
	if (tsc_ok) {
		uint64_t u =
		        (uint64_t)(((unsigned __int128)(uint64_t)tb.tsc_gap_ns * ppm) / 1000000u);

		tb.kind = TIMEBASE_TSC;
		tb.new_origin_ns = tb.tsc_gap_ns - (int64_t)n->monotonic_ns;
		tb.uncertainty_ns = sat_add(sat_add(u, skew), 1000); /* + integer rounding */
		if (abs_diff(tb.tsc_gap_ns, tb.realtime_gap_ns) > sat_add(rt_u, tb.uncertainty_ns))
			tb.flags |= TIMEBASE_REALTIME_DISAGREES;
		(void)clamp_interval(&tb.new_origin_ns, &tb.uncertainty_ns, 0);
	} else {
		/* 3. Realtime: the new kernel's clock came from the RTC (1 s granularity). */
		tb.new_origin_ns = tb.realtime_gap_ns - (int64_t)n->monotonic_ns;
		tb.uncertainty_ns = rt_u;
		if (clamp_interval(&tb.new_origin_ns, &tb.uncertainty_ns, 0))
			tb.kind = TIMEBASE_REALTIME;
		else {
			tb.flags |= TIMEBASE_REALTIME_BACKWARDS;
			tb.kind = TIMEBASE_NONE;
			tb.new_origin_ns = 0;
			tb.uncertainty_ns = 0;
		}
	}

	compute_stamps(in, &tb);
	*ret = tb;
	return 0;
}

int64_t timebase_old_to_axis(const TimebaseInput *in, uint64_t old_monotonic_ns) {
	return (int64_t)(old_monotonic_ns - in->old_reboot.monotonic_ns);
}

int64_t timebase_new_to_axis(const Timebase *tb, uint64_t new_monotonic_ns) {
	return tb->new_origin_ns + (int64_t)new_monotonic_ns;
}

int timebase_downtime(const Timebase *tb, const TimebaseInput *in, uint64_t old_monotonic_ns,
                      uint64_t new_monotonic_ns, int64_t *ret_ns) {
	int64_t d;

	if (!tb || !in || !ret_ns || old_monotonic_ns == 0 || new_monotonic_ns == 0)
		return -EINVAL;
	if (tb->kind == TIMEBASE_NONE)
		return -EDOM;
	d = timebase_new_to_axis(tb, new_monotonic_ns) - timebase_old_to_axis(in, old_monotonic_ns);
	if (d < 0 && (uint64_t)-d > tb->uncertainty_ns)
		return -ERANGE;
	*ret_ns = d;
	return 0;
}

static int add_i64(struct json_object *o, const char *k, int64_t v) {
	struct json_object *n = json_object_new_int64(v);

	if (!n || json_object_object_add(o, k, n) < 0) {
		json_object_put(n);
		return -ENOMEM;
	}
	return 0;
}

static int add_u64(struct json_object *o, const char *k, uint64_t v) {
	struct json_object *n = json_object_new_uint64(v);

	if (!n || json_object_object_add(o, k, n) < 0) {
		json_object_put(n);
		return -ENOMEM;
	}
	return 0;
}

static int add_obj(struct json_object *o, const char *k, struct json_object *v) {
	if (!v || json_object_object_add(o, k, v) < 0) {
		json_object_put(v);
		return -ENOMEM;
	}
	return 0;
}

/* v NULL: a JSON null. */
static int add_str_or_null(struct json_object *o, const char *k, const char *v) {
	if (!v)
		return json_object_object_add(o, k, NULL) < 0 ? -ENOMEM : 0;
	return add_obj(o, k, json_object_new_string(v));
}

static int add_phase(struct json_object *a, const char *name, int64_t start, int64_t end,
                     bool trusted) {
	struct json_object *p = json_object_new_object();
	int k = 0;

	if (!p)
		return -ENOMEM;
	k |= add_obj(p, "name", json_object_new_string(name));
	k |= add_i64(p, "start_ns", start);
	k |= add_i64(p, "end_ns", end);
	k |= add_i64(p, "duration_ns", end - start);
	k |= add_obj(p, "trusted", json_object_new_boolean(trusted));
	if (k != 0 || json_object_array_add(a, p) < 0) {
		json_object_put(p);
		return -ENOMEM;
	}
	return 0;
}

/* Phase boundaries on the axis: reboot request (0) -> purgatory entry -> verified
 * -> jump -> new kernel's clock zero -> daemon start. Stamp-bounded phases are
 * used only when the stamps are trusted; otherwise one "handoff" phase. */
static struct json_object *phases_to_json(const Timebase *tb, const TimebaseInput *in) {
	struct json_object *a = json_object_new_array();
	const int64_t *s = tb->stamp_ns;
	int64_t origin = tb->new_origin_ns, prev = 0;
	int k = 0;

	if (!a || tb->kind == TIMEBASE_NONE)
		return a;
	if (tb->stamps_trusted) {
		/* reboot request -> entry: shutdown; entry -> verified: verify;
		 * -> jump: purgatory; jump -> the new kernel's clock zero: early boot */
		static const char *const names[3] = { "shutdown", "verify", "purgatory" };

		for (unsigned i = 0; i < 3; i++) {
			if (s[i] == TIMEBASE_STAMP_ABSENT)
				continue;
			k |= add_phase(a, prev == 0 ? names[0] : names[i], prev, s[i], true);
			prev = s[i];
		}
		k |= add_phase(a, "early-boot", prev, origin, true);
	} else
		k |= add_phase(a, "handoff", 0, origin, true);
	k |= add_phase(a, "boot-to-daemon", origin, origin + (int64_t)in->new_start.monotonic_ns,
	               true);
	if (k != 0) {
		json_object_put(a);
		return NULL;
	}
	return a;
}

int timebase_to_json(const Timebase *tb, const TimebaseInput *in, struct json_object **ret) {
	static const char *const stamp_names[3] = { "entry", "verified", "jump" };
	const uint64_t raw[3] = { in->stamps.entry, in->stamps.verified, in->stamps.jump };
	struct json_object *o, *flags, *stamps;
	int k = 0;

	if (!tb || !in || !ret)
		return -EINVAL;
	o = json_object_new_object();
	if (!o)
		return -ENOMEM;

	k |= add_obj(o, "timebase", json_object_new_string(kind_table[tb->kind]));
	k |= add_u64(o, "uncertainty_ns", tb->uncertainty_ns);
	if (tb->kind != TIMEBASE_NONE)
		k |= add_i64(o, "new_origin_ns", tb->new_origin_ns);
	if (tb->tsc_gap_ns != INT64_MIN)
		k |= add_i64(o, "tsc_gap_ns", tb->tsc_gap_ns);
	k |= add_i64(o, "realtime_gap_ns", tb->realtime_gap_ns);
	if (in->cpu.tsc_khz) {
		k |= add_u64(o, "tsc_khz", in->cpu.tsc_khz);
		k |= add_u64(o, "tsc_khz_ppm", in->cpu.tsc_khz_ppm ?: TIMEBASE_DEFAULT_TSC_PPM);
		if (in->cpu.tsc_khz_source)
			k |= add_obj(o, "tsc_khz_source",
			             json_object_new_string(in->cpu.tsc_khz_source));
	}

	flags = json_object_new_array();
	for (unsigned i = 0; flags && i < _TIMEBASE_FLAG_COUNT; i++)
		if (tb->flags & (1u << i))
			k |= json_object_array_add(flags, json_object_new_string(flag_table[i]));
	k |= add_obj(o, "flags", flags);

	stamps = json_object_new_object();
	k |= add_obj(o, "stamps", stamps);
	if (stamps) {
		k |= add_obj(stamps, "trusted", json_object_new_boolean(tb->stamps_trusted));
		for (unsigned i = 0; i < 3; i++) {
			char key[32];

			if (raw[i] == 0)
				continue;
			snprintf(key, sizeof(key), "%s_tsc", stamp_names[i]);
			k |= add_u64(stamps, key, raw[i]);
			if (tb->stamp_ns[i] != TIMEBASE_STAMP_ABSENT) {
				snprintf(key, sizeof(key), "%s_ns", stamp_names[i]);
				k |= add_i64(stamps, key, tb->stamp_ns[i]);
			}
		}
	}
	k |= add_obj(o, "phases", phases_to_json(tb, in));

	if (k != 0) {
		json_object_put(o);
		return -ENOMEM;
	}
	*ret = o;
	return 0;
}

/* Parses "2994.374" (MHz, up to 3 decimals) into kHz. */
static bool parse_mhz(const char *s, uint64_t *ret_khz) {
	uint64_t mhz = 0, frac = 0;
	unsigned digits = 0;

	if (*s < '0' || *s > '9')
		return false;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (mhz > UINT64_MAX / 10000)
			return false;
		mhz = mhz * 10 + (uint64_t)(*s - '0');
	}
	if (*s == '.')
		for (s++; *s >= '0' && *s <= '9'; s++)
			if (digits < 3) {
				frac = frac * 10 + (uint64_t)(*s - '0');
				digits++;
			}
	for (; digits < 3; digits++)
		frac *= 10;
	if (strncmp(s, " MHz", 4) != 0)
		return false;
	*ret_khz = mhz * 1000 + frac;
	return *ret_khz != 0;
}

static bool has_flag(const char *flags_line, const char *flag) {
	size_t l = strlen(flag);

	for (const char *p = flags_line; (p = strstr(p, flag)); p += l)
		if ((p == flags_line || p[-1] == ' ' || p[-1] == '\t') &&
		    (p[l] == ' ' || p[l] == '\n' || p[l] == '\0'))
			return true;
	return false;
}

int timebase_cpu_parse(const char *cpuinfo, const char *kmsg, TimebaseCpu *ret) {
	TimebaseCpu c = {};
	bool refined = false, marked_unstable = false;
	int last_is_tsc = -1;

	if (!ret)
		return -EINVAL;

	if (cpuinfo) {
		const char *line = cpuinfo;

		/* first "flags" line: the flags of CPU 0 */
		while (line && *line) {
			const char *eol = strchrnul(line, '\n');

			if (strncmp(line, "flags", 5) == 0) {
				_cleanup_free_ char *copy = strndup(line, (size_t)(eol - line));
				if (!copy)
					return -ENOMEM;
				c.constant_tsc = has_flag(copy, "constant_tsc");
				c.nonstop_tsc = has_flag(copy, "nonstop_tsc");
				break;
			}
			line = *eol ? eol + 1 : NULL;
		}
	}

	if (kmsg) {
		const char *line = kmsg;

		while (line && *line) {
			const char *eol = strchrnul(line, '\n'), *p;
			_cleanup_free_ char *copy = strndup(line, (size_t)(eol - line));
			uint64_t khz;

			if (!copy)
				return -ENOMEM;
			/* The refined calibration (against HPET/ACPI PM timer over ~1 s) beats
			 * the early "Detected" value (CPUID/MSR nominal or quick PIT). */
			if ((p = strstr(copy, "tsc: Refined TSC clocksource calibration: ")) &&
			    parse_mhz(p + strlen("tsc: Refined TSC clocksource calibration: "),
			              &khz)) {
				c.tsc_khz = khz;
				c.tsc_khz_ppm = 100;
				c.tsc_khz_source = "refined-calibration";
				refined = true;
			} else if (!refined && (p = strstr(copy, "tsc: Detected ")) &&
			           parse_mhz(p + strlen("tsc: Detected "), &khz)) {
				c.tsc_khz = khz;
				c.tsc_khz_ppm = 500;
				c.tsc_khz_source = "detected";
			}
			if (strstr(copy, "Marking TSC unstable"))
				marked_unstable = true;
			/* the clocksource the kernel settled on last: tsc only when it trusts it */
			p = strstr(copy, "clocksource: Switched to clocksource ");
			if (p)
				last_is_tsc =
				        strncmp(p + strlen("clocksource: Switched to clocksource "),
				                "tsc", 3) == 0;
			line = *eol ? eol + 1 : NULL;
		}
	}
	c.tsc_unstable = marked_unstable || last_is_tsc == 0;
	*ret = c;
	return 0;
}

/* PURGATORY_STAMPS_TSC_DIGITS lowercase hex digits, exactly (purgatory's writer). */
static int parse_tsc_field(const char *s, uint64_t *ret) {
	uint64_t v = 0;

	for (unsigned i = 0; i < PURGATORY_STAMPS_TSC_DIGITS; i++) {
		unsigned d;

		if (s[i] >= '0' && s[i] <= '9')
			d = (unsigned)(s[i] - '0');
		else if (s[i] >= 'a' && s[i] <= 'f')
			d = (unsigned)(s[i] - 'a' + 10);
		else
			return -EBADMSG;
		v = v << 4 | d;
	}
	*ret = v;
	return 0;
}

int timebase_stamps_from_cmdline(const char *cmdline, TimebaseStamps *ret) {
	static const char key[] = PURGATORY_STAMPS_KEY;
	const char *p = cmdline, *found = NULL;
	uint64_t v[PURGATORY_STAMPS_NR_TSC] = {};
	char mode, impl, end;
	size_t n;

	if (!cmdline || !ret)
		return -EINVAL;
	/* a whole word only; the last occurrence wins, as for the kernel's own parameters */
	for (; (p = strstr(p, key)); p += sizeof(key) - 1)
		if (p == cmdline || p[-1] == ' ' || p[-1] == '\t')
			found = p + sizeof(key) - 1;
	if (!found)
		return -ENOENT;

	/* 1. Exactly the field the loader reserved, and nothing glued to it. */
	n = strnlen(found, PURGATORY_STAMPS_FIELD_LEN + 1);
	if (n < PURGATORY_STAMPS_FIELD_LEN)
		return -EBADMSG;
	end = found[PURGATORY_STAMPS_FIELD_LEN];
	if (end != '\0' && end != ' ' && end != '\t' && end != '\n')
		return -EBADMSG;
	/* 2. The loader's placeholder, never overwritten: purgatory did not run. */
	if (strncmp(found, PURGATORY_STAMPS_TEMPLATE, PURGATORY_STAMPS_FIELD_LEN) == 0) {
		*ret = (TimebaseStamps){};
		return 0;
	}
	/* 3. Three TSC values, the mode, the implementation. */
	for (unsigned i = 0; i < PURGATORY_STAMPS_NR_TSC; i++) {
		const char *f = found + i * (PURGATORY_STAMPS_TSC_DIGITS + 1);

		if (parse_tsc_field(f, &v[i]) < 0 ||
		    f[PURGATORY_STAMPS_TSC_DIGITS] != PURGATORY_STAMPS_SEPARATOR)
			return -EBADMSG;
	}
	mode = found[PURGATORY_STAMPS_MODE_POS];
	impl = found[PURGATORY_STAMPS_IMPL_POS];
	if (found[PURGATORY_STAMPS_MODE_POS + 1] != PURGATORY_STAMPS_SEPARATOR)
		return -EBADMSG;
	if (!timebase_stamps_mode_to_string(mode) || !timebase_stamps_impl_to_string(impl))
		return -EBADMSG;
	/* Fast hashes nothing; verified and panic always hash. */
	if ((mode == PURGATORY_STAMPS_MODE_FAST) != (impl == PURGATORY_STAMPS_IMPL_NONE))
		return -EBADMSG;

	*ret = (TimebaseStamps){
		.entry = v[0], .verified = v[1], .jump = v[2], .mode = mode, .impl = impl
	};
	return 0;
}

const char *timebase_stamps_mode_to_string(char mode) {
	switch (mode) {
	case PURGATORY_STAMPS_MODE_VERIFIED:
		return handoff_mode_to_string(HANDOFF_MODE_VERIFIED);
	case PURGATORY_STAMPS_MODE_FAST:
		return handoff_mode_to_string(HANDOFF_MODE_FAST);
	case PURGATORY_STAMPS_MODE_PANIC:
		return "panic";
	default:
		return NULL;
	}
}

const char *timebase_stamps_impl_to_string(char impl) {
	switch (impl) {
	case PURGATORY_STAMPS_IMPL_SHANI:
		return "sha-ni";
	case PURGATORY_STAMPS_IMPL_AVX2:
		return "avx2";
	case PURGATORY_STAMPS_IMPL_GENERIC:
		return "generic";
	case PURGATORY_STAMPS_IMPL_SSE2:
		return "sse2";
	case PURGATORY_STAMPS_IMPL_NONE:
		return "none";
	default:
		return NULL;
	}
}

int timebase_purgatory_to_json(const TimebaseStamps *st, const TimebaseCpu *cpu,
                               uint64_t verified_bytes, struct json_object **ret) {
	struct json_object *o;
	const char *quality = "unknown";
	int k = 0;

	if (!st || !cpu || !ret)
		return -EINVAL;
	o = json_object_new_object();
	if (!o)
		return -ENOMEM;
	k |= add_str_or_null(o, "mode", timebase_stamps_mode_to_string(st->mode));
	k |= add_str_or_null(o, "implementation", timebase_stamps_impl_to_string(st->impl));
	k |= add_u64(o, "verified_bytes",
	             st->mode == PURGATORY_STAMPS_MODE_FAST ? 0 : verified_bytes);
	if (st->entry != 0 && st->verified >= st->entry && cpu->tsc_khz > 0) {
		uint64_t ticks = st->verified - st->entry;
		/* ticks / kHz = ms; keep ns without overflow for any sane span. */
		uint64_t ns = ticks / cpu->tsc_khz * 1000000 +
		              ticks % cpu->tsc_khz * 1000000 / cpu->tsc_khz;

		k |= add_u64(o, "verify_ns", ns);
		/* Exact when the TSC runs at a known, constant rate; under an emulator or
		 * with an unstable TSC the frequency only approximates purgatory's ticks. */
		quality = cpu->constant_tsc && cpu->nonstop_tsc && !cpu->tsc_unstable ? "measured"
		                                                                      : "estimated";
	} else
		k |= add_str_or_null(o, "verify_ns", NULL);
	k |= add_obj(o, "verify_time", json_object_new_string(quality));
	if (k) {
		json_object_put(o);
		return -ENOMEM;
	}
	*ret = o;
	return 0;
}

static uint64_t read_ns(clockid_t id) {
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

int timebase_sample_now(TimebaseSample *ret) {
	TimebaseSample best = { .skew_ns = UINT64_MAX };

	if (!ret)
		return -EINVAL;
	/* Bracket the TSC and realtime reads with two monotonic reads; keep the
	 * tightest of a few tries (a preemption in between widens one). */
	for (unsigned i = 0; i < 5; i++) {
		TimebaseSample s = {};
		uint64_t m0, m1, t0 = 0, t1 = 0;

		m0 = read_ns(CLOCK_MONOTONIC);
#if defined(__x86_64__) || defined(__i386__)
		t0 = __rdtsc();
#endif
		s.realtime_ns = read_ns(CLOCK_REALTIME);
#if defined(__x86_64__) || defined(__i386__)
		t1 = __rdtsc();
#endif
		m1 = read_ns(CLOCK_MONOTONIC);
		s.monotonic_ns = m0 + (m1 - m0) / 2;
		s.tsc = t0 + (t1 - t0) / 2;
		s.skew_ns = m1 - m0;
		if (s.skew_ns < best.skew_ns)
			best = s;
	}
	*ret = best;
	return 0;
}
