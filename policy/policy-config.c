/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Configuration: upgraded.conf and its drop-ins, parsed with libinih. Every
 * problem is collected with its file:line, and any problem fails the load.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <ini.h>

#include "fileio.h"
#include "log.h"
#include "path-util.h"
#include "policy-internal.h"
#include "string-util.h"

#define RULE_SECTION_PREFIX "VMRule:"
#define RULE_NAME_MAX       40
/* libinih truncates longer section names (MAX_SECTION): refuse them instead */
#define SECTION_NAME_MAX    48
/* A line inih cannot deliver is replaced with one of these. */
#define BLANK_LINE          "\n"
#define BLANK_SECTION       "[#invalid]\n"

/* One assignment already made in the current file: duplicates are errors. */
typedef struct Seen {
	char *section;
	char *key;
	unsigned line;
} Seen;

typedef struct ParseContext {
	Policy *policy;
	const char *file;
	PolicyErrors *errors;
	size_t n_errors_before;

	/* the reader */
	const char *data;
	size_t size, pos;
	unsigned line;
	bool report;            /* final pass: report reader-level problems */
	bool in_broken_section; /* the last section header was replaced by BLANK_SECTION */
	unsigned *bad_lines;    /* sorted: lines inih rejected */
	size_t n_bad_lines;

	Seen *seen;
	size_t n_seen;
	char *unknown_section; /* last unknown section reported, to report it once */
	bool oom;
} ParseContext;

typedef enum SettingKind {
	SETTING_BOOL,
	SETTING_MODE,
	SETTING_STRATEGY,
	SETTING_TAINT,
	SETTING_PATH_LIST,
	SETTING_WINDOW,
	SETTING_COUNT,      /* unsigned, or "infinity" */
	SETTING_SIZE_LIMIT, /* size, or "infinity" */
	SETTING_PATH,
	SETTING_BACKING_DIR, /* a directory, or empty: libvirt's qemu.conf says */
	SETTING_MARGIN,
	SETTING_SECONDS,
	SETTING_PAUSE_SECONDS,
	SETTING_PARALLEL,
	SETTING_KEEP_RAM_DIGEST,
	SETTING_GLOB_LIST,
	SETTING_METADATA,
	SETTING_SIZE_OR_NONE,
} SettingKind;

typedef struct Setting {
	const char *section; /* NULL: a [VMRule:NAME] key */
	const char *key;
	SettingKind kind;
	bool list; /* may repeat: appends; empty assignment clears */
} Setting;

static const Setting settings[] = {
	{ "Handoff", "Mode", SETTING_MODE, false },
	{ "Handoff", "AllowFast", SETTING_BOOL, false },
	{ "Handoff", "AllowTaint", SETTING_TAINT, true },
	{ "Paths", "AllowedRoots", SETTING_PATH_LIST, true },
	{ "Commit", "MaintenanceWindow", SETTING_WINDOW, false },
	{ "Commit", "MaxVMs", SETTING_COUNT, false },
	{ "Commit", "MaxVMMemory", SETTING_SIZE_LIMIT, false },
	{ "Commit", "CheckpointDir", SETTING_PATH, false },
	{ "Commit", "FreeSpaceMargin", SETTING_MARGIN, false },
	{ "VM", "DefaultStrategy", SETTING_STRATEGY, false },
	{ "VM", "ShutdownTimeoutSec", SETTING_SECONDS, false },
	{ "VM", "PauseTimeoutSec", SETTING_PAUSE_SECONDS, false },
	{ "VM", "SaveParallel", SETTING_PARALLEL, false },
	{ "VM", "KeepRamDigest", SETTING_KEEP_RAM_DIGEST, false },
	{ "VM", "MemoryBackingDir", SETTING_BACKING_DIR, false },
	{ "Metrics", "TextfileDirectory", SETTING_PATH, false },
	{ NULL, "Name", SETTING_GLOB_LIST, true },
	{ NULL, "Metadata", SETTING_METADATA, true },
	{ NULL, "MemoryAbove", SETTING_SIZE_OR_NONE, false },
	{ NULL, "MemoryBelow", SETTING_SIZE_OR_NONE, false },
	{ NULL, "Strategy", SETTING_STRATEGY, false },
};

static const char *const known_sections[] = { "Handoff", "Paths", "Commit", "VM", "Metrics" };

/* libvirt's QEMU driver writes managed-save images (the checkpoints) here. */
#define DEFAULT_CHECKPOINT_DIR "/var/lib/libvirt/qemu/save"
/* Debian's prometheus-node-exporter: its textfile collector's directory. */
#define DEFAULT_METRICS_DIR    "/var/lib/prometheus/node-exporter"
static const char *const default_allowed_roots[] = { "/boot", "/var/lib/upgraded/images" };
#define DEFAULT_MARGIN_PERCENT   10
#define DEFAULT_SHUTDOWN_TIMEOUT 120
#define DEFAULT_SAVE_PARALLEL    2
#define MAX_SAVE_PARALLEL        64
#define MAX_SHUTDOWN_TIMEOUT_SEC (24 * 3600)
#define DEFAULT_PAUSE_TIMEOUT    10
#define MAX_PAUSE_TIMEOUT_SEC    3600

/* ---------- constructors and destructors ---------- */

static void rule_done(PolicyVmRule *r) {
	free(r->name);
	strv_free(r->name_globs);
	strv_free(r->metadata);
	free(r->file);
}

void policy_free(Policy *p) {
	if (!p)
		return;
	strv_free(p->allowed_roots);
	free(p->checkpoint_dir);
	free(p->memory_backing_dir);
	free(p->metrics_dir);
	for (size_t i = 0; i < p->n_rules; i++)
		rule_done(&p->rules[i]);
	free(p->rules);
	free(p);
}

static int set_default_roots(Policy *p) {
	strv_free(p->allowed_roots);
	p->allowed_roots = NULL;
	for (size_t i = 0; i < ELEMENTSOF(default_allowed_roots); i++)
		if (strv_extend(&p->allowed_roots, default_allowed_roots[i]) < 0)
			return -ENOMEM;
	return 0;
}

int policy_new_default(Policy **ret) {
	_cleanup_(policy_freep) Policy *p = NULL;

	if (!ret)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->mode = POLICY_HANDOFF_MODE_AUTO;
	p->allow_fast = false;
	p->allow_taint = 0;
	if (set_default_roots(p) < 0)
		return -ENOMEM;
	p->window = (PolicyWindow){};
	p->max_vms = UINT64_MAX;
	p->max_vm_memory = UINT64_MAX;
	p->checkpoint_dir = strdup(DEFAULT_CHECKPOINT_DIR);
	p->metrics_dir = strdup(DEFAULT_METRICS_DIR);
	if (!p->checkpoint_dir || !p->metrics_dir)
		return -ENOMEM;
	p->margin_is_percent = true;
	p->free_space_margin = DEFAULT_MARGIN_PERCENT;
	p->default_strategy = POLICY_VM_CHECKPOINT;
	p->shutdown_timeout_usec = DEFAULT_SHUTDOWN_TIMEOUT * 1000000ULL;
	p->pause_timeout_usec = DEFAULT_PAUSE_TIMEOUT * 1000000ULL;
	p->save_parallel = DEFAULT_SAVE_PARALLEL;
	p->keep_ram_digest = POLICY_KEEP_RAM_DIGEST_MARK;
	*ret = TAKE_PTR(p);
	return 0;
}

void policy_errors_done(PolicyErrors *e) {
	if (!e)
		return;
	for (size_t i = 0; i < e->n; i++) {
		free(e->items[i].file);
		free(e->items[i].message);
	}
	free(e->items);
	*e = (PolicyErrors){};
}

int policy_errors_addv(PolicyErrors *e, const char *file, unsigned line, const char *fmt,
                       va_list ap) {
	_cleanup_free_ char *f = NULL, *m = NULL;
	PolicyError *n;

	if (!e)
		return 0;
	f = strdup(strempty(file));
	if (!f || vasprintf(&m, fmt, ap) < 0)
		return -ENOMEM;
	n = realloc(e->items, sizeof(*n) * (e->n + 1));
	if (!n)
		return -ENOMEM;
	e->items = n;
	e->items[e->n++] =
	        (PolicyError){ .file = TAKE_PTR(f), .line = line, .message = TAKE_PTR(m) };
	return 0;
}

int policy_errors_add(PolicyErrors *e, const char *file, unsigned line, const char *fmt, ...) {
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = policy_errors_addv(e, file, line, fmt, ap);
	va_end(ap);
	return r;
}

void policy_errors_print(const PolicyErrors *e, FILE *out) {
	for (size_t i = 0; e && i < e->n; i++) {
		if (e->items[i].file[0] == '\0')
			fprintf(out, "%s\n", e->items[i].message);
		else if (e->items[i].line > 0)
			fprintf(out, "%s:%u: %s\n", e->items[i].file, e->items[i].line,
			        e->items[i].message);
		else
			fprintf(out, "%s: %s\n", e->items[i].file, e->items[i].message);
	}
}

static void context_done(ParseContext *c) {
	for (size_t i = 0; i < c->n_seen; i++) {
		free(c->seen[i].section);
		free(c->seen[i].key);
	}
	free(c->seen);
	free(c->bad_lines);
	free(c->unknown_section);
}

/* ---------- value parsers ---------- */

int policy_parse_bool(const char *s, bool *ret) {
	static const char *const yes[] = { "1", "yes", "y", "true", "t", "on" };
	static const char *const no[] = { "0", "no", "n", "false", "f", "off" };

	for (size_t i = 0; i < ELEMENTSOF(yes); i++)
		if (strcasecmp(s, yes[i]) == 0) {
			*ret = true;
			return 0;
		}
	for (size_t i = 0; i < ELEMENTSOF(no); i++)
		if (strcasecmp(s, no[i]) == 0) {
			*ret = false;
			return 0;
		}
	return -EINVAL;
}

int policy_parse_size(const char *s, uint64_t *ret) {
	static const struct {
		const char *suffix;
		unsigned shift;
	} units[] = {
		{ "", 0 },     { "B", 0 },  { "K", 10 },   { "KiB", 10 }, { "M", 20 },
		{ "MiB", 20 }, { "G", 30 }, { "GiB", 30 }, { "T", 40 },   { "TiB", 40 },
	};
	unsigned long long v;
	const char *end;
	int r;

	r = safe_atou64_prefix(s, &v, &end);
	if (r < 0)
		return r;
	for (size_t i = 0; i < ELEMENTSOF(units); i++)
		if (streq(end, units[i].suffix)) {
			if (units[i].shift > 0 && v > (UINT64_MAX >> units[i].shift))
				return -ERANGE;
			*ret = (uint64_t)v << units[i].shift;
			return 0;
		}
	return -EINVAL;
}

static int parse_day(const char *s, size_t n) {
	static const char *const days[] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };

	for (size_t i = 0; i < ELEMENTSOF(days); i++)
		if (n == 3 && strncasecmp(s, days[i], 3) == 0)
			return (int)i;
	return -EINVAL;
}

/* "HH:MM" with 00 <= HH <= 24 (24:00 only as an end). */
static int parse_clock(const char *s, size_t n, unsigned *ret) {
	unsigned h, m;

	if (n != 5 || !isdigit((unsigned char)s[0]) || !isdigit((unsigned char)s[1]) ||
	    s[2] != ':' || !isdigit((unsigned char)s[3]) || !isdigit((unsigned char)s[4]))
		return -EINVAL;
	h = (unsigned)(s[0] - '0') * 10 + (unsigned)(s[1] - '0');
	m = (unsigned)(s[3] - '0') * 10 + (unsigned)(s[4] - '0');
	if (m > 59 || h > 24 || (h == 24 && m != 0))
		return -EINVAL;
	*ret = h * 60 + m;
	return 0;
}

static int parse_days(const char *s, size_t n, uint8_t *ret) {
	uint8_t days = 0;

	while (n > 0) {
		const char *comma = memchr(s, ',', n);
		size_t len = comma ? (size_t)(comma - s) : n;
		int a, b;

		if (len == 7 && s[3] == '-') {
			a = parse_day(s, 3);
			b = parse_day(s + 4, 3);
		} else
			a = b = parse_day(s, len);
		if (a < 0 || b < 0)
			return -EINVAL;
		for (int d = a;; d = (d + 1) % 7) {
			days |= (uint8_t)(1u << d);
			if (d == b)
				break;
		}
		if (!comma)
			break;
		n -= len + 1;
		s = comma + 1;
		if (n == 0)
			return -EINVAL; /* trailing comma */
	}
	*ret = days;
	return 0;
}

int policy_parse_window(const char *s, PolicyWindow *ret) {
	const char *sp, *times, *dash;
	PolicyWindow w = { .set = true, .days = 0x7f };
	unsigned start, end;

	if (!s)
		return -EINVAL;
	sp = strchr(s, ' ');
	if (sp) {
		if (sp == s || parse_days(s, (size_t)(sp - s), &w.days) < 0)
			return -EINVAL;
		times = sp + 1;
		while (*times == ' ')
			times++;
	} else
		times = s;
	dash = strchr(times, '-');
	if (!dash || parse_clock(times, (size_t)(dash - times), &start) < 0 ||
	    parse_clock(dash + 1, strlen(dash + 1), &end) < 0)
		return -EINVAL;
	if (start >= 24 * 60)
		return -EINVAL; /* 24:00 only ends a window */
	if (start == end)
		return -EINVAL; /* empty window: use no window instead */
	w.start = start;
	w.end = end;
	*ret = w;
	return 0;
}

bool policy_window_contains(const PolicyWindow *w, int wday, unsigned minute) {
	int yesterday = (wday + 6) % 7;

	if (!w->set)
		return true;
	if (wday < 0 || wday > 6 || minute >= 24 * 60)
		return false;
	if (w->start < w->end) /* within one day ("22:00-24:00" too) */
		return (w->days & (1u << wday)) && minute >= w->start && minute < w->end;
	/* wraps past midnight: belongs to the day it started */
	return ((w->days & (1u << wday)) && minute >= w->start) ||
	       ((w->days & (1u << yesterday)) && minute < w->end);
}

/* Documentation/admin-guide/tainted-kernels.rst: bit n is taint_letters[n]. */
static const char taint_letters[] = "PFSRMBUDAWCIOELKXTN";

int policy_parse_taint(const char *s, uint64_t *ret) {
	uint64_t mask = 0;

	for (const char *c = s; *c; c++) {
		const char *l;

		if (*c == ' ' || *c == '\t')
			continue;
		l = strchr(taint_letters, *c);
		if (!l)
			return -EINVAL;
		mask |= UINT64_C(1) << (l - taint_letters);
	}
	*ret = mask;
	return 0;
}

const char *policy_taint_to_string(uint64_t taint, char buf[static 32]) {
	size_t n = 0;

	for (size_t i = 0; i < sizeof(taint_letters) - 1; i++)
		if (taint & (UINT64_C(1) << i))
			buf[n++] = taint_letters[i];
	if (taint >> (sizeof(taint_letters) - 1))
		buf[n++] = '?'; /* bits this version does not name */
	buf[n] = '\0';
	return buf;
}

static bool rule_name_valid(const char *s) {
	size_t n = strlen(s);

	if (n == 0 || n > RULE_NAME_MAX)
		return false;
	for (const char *c = s; *c; c++)
		if (!isalnum((unsigned char)*c) && !strchr("_.-", *c))
			return false;
	return true;
}

/* Splits on whitespace and appends every word to *l. */
static int strv_extend_words(char ***l, const char *s) {
	_cleanup_free_ char *copy = strdup(s);
	char *save = NULL;

	if (!copy)
		return -ENOMEM;
	for (char *w = strtok_r(copy, " \t", &save); w; w = strtok_r(NULL, " \t", &save))
		if (strv_extend(l, w) < 0)
			return -ENOMEM;
	return 0;
}

/* ---------- the handler ---------- */

static int context_error(ParseContext *c, const char *fmt, ...) _printf_(2, 3);
static int context_error(ParseContext *c, const char *fmt, ...) {
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = policy_errors_addv(c->errors, c->file, c->line, fmt, ap);
	va_end(ap);
	if (r < 0)
		c->oom = true;
	return 1; /* keep parsing: every error is reported */
}

static const Setting *setting_find(const char *section, const char *key) {
	for (size_t i = 0; i < ELEMENTSOF(settings); i++)
		if (streq_ptr(settings[i].section, section) && streq(settings[i].key, key))
			return &settings[i];
	return NULL;
}

static PolicyVmRule *rule_get(ParseContext *c, const char *name) {
	PolicyVmRule *n;
	Policy *p = c->policy;

	for (size_t i = 0; i < p->n_rules; i++)
		if (streq(p->rules[i].name, name))
			return &p->rules[i];
	n = realloc(p->rules, sizeof(*n) * (p->n_rules + 1));
	if (!n)
		return NULL;
	p->rules = n;
	n = &p->rules[p->n_rules];
	*n = (PolicyVmRule){
		.name = strdup(name),
		.file = strdup(c->file),
		.line = c->line,
		.memory_above = UINT64_MAX,
		.memory_below = UINT64_MAX,
	};
	if (!n->name || !n->file) {
		rule_done(n);
		return NULL;
	}
	p->n_rules++;
	return n;
}

/* Scalar settings may be assigned once per file; returns false (and reports)
 * on a duplicate. */
static bool context_first_assignment(ParseContext *c, const char *section, const char *key) {
	Seen *n;

	for (size_t i = 0; i < c->n_seen; i++)
		if (streq(c->seen[i].section, section) && streq(c->seen[i].key, key)) {
			context_error(c, "%s= is set twice in [%s] (first on line %u)", key,
			              section, c->seen[i].line);
			return false;
		}
	n = realloc(c->seen, sizeof(*n) * (c->n_seen + 1));
	if (!n) {
		c->oom = true;
		return false;
	}
	c->seen = n;
	n[c->n_seen] = (Seen){ .section = strdup(section), .key = strdup(key), .line = c->line };
	if (!n[c->n_seen].section || !n[c->n_seen].key) {
		free(n[c->n_seen].section);
		free(n[c->n_seen].key);
		c->oom = true;
		return false;
	}
	c->n_seen++;
	return true;
}

static int parse_path_list(ParseContext *c, const char *key, const char *value, char ***l) {
	_cleanup_strv_free_ char **words = NULL;

	if (strv_extend_words(&words, value) < 0) {
		c->oom = true;
		return 1;
	}
	STRV_FOREACH (w, words) {
		if (!path_is_normalized(*w))
			return context_error(c, "%s=: '%s' is not a normalized absolute path", key,
			                     *w);
	}
	STRV_FOREACH (w, words) {
		if (strv_extend(l, *w) < 0)
			c->oom = true;
	}
	return 1;
}

/* A directory setting (SETTING_PATH) to value, or to its default when value is NULL. */
/* The directory settings: value, or NULL for the setting's default (none for
 * MemoryBackingDir=, where libvirt's qemu.conf decides). */
static int set_path(ParseContext *c, const Setting *s, const char *value) {
	Policy *p = c->policy;
	char **field;
	const char *def;
	char *d = NULL;

	if (s->kind == SETTING_BACKING_DIR) {
		field = &p->memory_backing_dir;
		def = NULL;
	} else if (streq(s->key, "TextfileDirectory")) {
		field = &p->metrics_dir;
		def = DEFAULT_METRICS_DIR;
	} else {
		field = &p->checkpoint_dir;
		def = DEFAULT_CHECKPOINT_DIR;
	}
	if (value ?: def) {
		d = strdup(value ?: def);
		if (!d) {
			c->oom = true;
			return 1;
		}
	}
	free(*field);
	*field = d;
	return 1;
}

static int apply_setting(ParseContext *c, const Setting *s, PolicyVmRule *rule, const char *value) {
	Policy *p = c->policy;
	unsigned long long u;
	uint64_t v;
	bool b;
	int r;

	switch (s->kind) {
	case SETTING_BOOL:
		if (policy_parse_bool(value, &b) < 0)
			return context_error(c, "%s=: '%s' is not a boolean (yes/no)", s->key,
			                     value);
		p->allow_fast = b;
		return 1;
	case SETTING_MODE:
		r = policy_handoff_mode_from_string(value);
		if (r < 0)
			return context_error(c, "%s=: '%s' is not one of verified, fast, auto",
			                     s->key, value);
		p->mode = (PolicyHandoffMode)r;
		return 1;
	case SETTING_STRATEGY:
		r = policy_vm_strategy_from_string(value);
		if (r < 0)
			return context_error(
			        c, "%s=: '%s' is not one of checkpoint, keep-ram, shutdown, ignore",
			        s->key, value);
		if (rule) {
			rule->strategy = (PolicyVmStrategy)r;
			rule->have_strategy = true;
		} else
			p->default_strategy = (PolicyVmStrategy)r;
		return 1;
	case SETTING_TAINT:
		if (policy_parse_taint(value, &v) < 0)
			return context_error(c,
			                     "%s=: '%s' is not a list of kernel taint letters (%s)",
			                     s->key, value, taint_letters);
		p->allow_taint |= v;
		return 1;
	case SETTING_PATH_LIST:
		return parse_path_list(c, s->key, value, &p->allowed_roots);
	case SETTING_WINDOW:
		if (policy_parse_window(value, &p->window) < 0)
			return context_error(c,
			                     "%s=: '%s' is not a window like 'Sat,Sun 02:00-04:00'",
			                     s->key, value);
		return 1;
	case SETTING_COUNT:
		if (streq(value, "infinity")) {
			p->max_vms = UINT64_MAX;
			return 1;
		}
		if (safe_atou64(value, &u) < 0 || u >= UINT64_MAX)
			return context_error(c, "%s=: '%s' is not a number or 'infinity'", s->key,
			                     value);
		p->max_vms = u;
		return 1;
	case SETTING_SIZE_LIMIT:
		if (streq(value, "infinity")) {
			p->max_vm_memory = UINT64_MAX;
			return 1;
		}
		if (policy_parse_size(value, &v) < 0 || v == UINT64_MAX)
			return context_error(c, "%s=: '%s' is not a size (e.g. 64G) or 'infinity'",
			                     s->key, value);
		p->max_vm_memory = v;
		return 1;
	case SETTING_PATH:
	case SETTING_BACKING_DIR:
		if (!path_is_normalized(value) || streq(value, "/"))
			return context_error(c, "%s=: '%s' is not a normalized absolute directory",
			                     s->key, value);
		return set_path(c, s, value);
	case SETTING_MARGIN: {
		size_t n = strlen(value);

		if (n > 1 && value[n - 1] == '%') {
			_cleanup_free_ char *num = strndup(value, n - 1);

			if (!num) {
				c->oom = true;
				return 1;
			}
			if (safe_atou64(num, &u) < 0 || u > 1000)
				return context_error(c, "%s=: '%s' is not a percentage 0%%..1000%%",
				                     s->key, value);
			p->margin_is_percent = true;
			p->free_space_margin = u;
			return 1;
		}
		if (policy_parse_size(value, &v) < 0)
			return context_error(c,
			                     "%s=: '%s' is not a percentage (10%%) or a size (2G)",
			                     s->key, value);
		p->margin_is_percent = false;
		p->free_space_margin = v;
		return 1;
	}
	case SETTING_SECONDS:
	case SETTING_PAUSE_SECONDS: {
		bool pause = s->kind == SETTING_PAUSE_SECONDS;
		unsigned max = pause ? MAX_PAUSE_TIMEOUT_SEC : MAX_SHUTDOWN_TIMEOUT_SEC;

		if (safe_atou64(value, &u) < 0 || u == 0 || u > max)
			return context_error(c, "%s=: '%s' is not a number of seconds 1..%u",
			                     s->key, value, max);
		*(pause ? &p->pause_timeout_usec : &p->shutdown_timeout_usec) = u * 1000000ULL;
		return 1;
	}
	case SETTING_PARALLEL:
		if (safe_atou64(value, &u) < 0 || u == 0 || u > MAX_SAVE_PARALLEL)
			return context_error(c, "%s=: '%s' is not a number 1..%u", s->key, value,
			                     MAX_SAVE_PARALLEL);
		p->save_parallel = (unsigned)u;
		return 1;
	case SETTING_KEEP_RAM_DIGEST:
		r = policy_keep_ram_digest_from_string(value);
		if (r < 0)
			return context_error(c, "%s=: '%s' is not one of mark, sampled, full",
			                     s->key, value);
		p->keep_ram_digest = (PolicyKeepRamDigest)r;
		return 1;
	case SETTING_GLOB_LIST:
		if (strv_extend_words(&rule->name_globs, value) < 0)
			c->oom = true;
		return 1;
	case SETTING_METADATA: {
		const char *eq = strchr(value, '=');

		if (!eq || eq == value || string_has_cc(value))
			return context_error(c, "%s=: '%s' is not KEY=VALUE", s->key, value);
		if (strv_extend(&rule->metadata, value) < 0)
			c->oom = true;
		return 1;
	}
	case SETTING_SIZE_OR_NONE:
		if (policy_parse_size(value, &v) < 0 || v == UINT64_MAX)
			return context_error(c, "%s=: '%s' is not a size (e.g. 8G)", s->key, value);
		if (streq(s->key, "MemoryAbove"))
			rule->memory_above = v;
		else
			rule->memory_below = v;
		return 1;
	}
	return context_error(c, "internal error: unhandled setting %s=", s->key);
}

/* An empty assignment resets a setting to its default, or clears a list. */
static int reset_setting(ParseContext *c, const Setting *s, PolicyVmRule *rule) {
	Policy *p = c->policy;

	switch (s->kind) {
	case SETTING_BOOL:
		p->allow_fast = false;
		break;
	case SETTING_MODE:
		p->mode = POLICY_HANDOFF_MODE_AUTO;
		break;
	case SETTING_STRATEGY:
		if (rule)
			rule->have_strategy = false;
		else
			p->default_strategy = POLICY_VM_CHECKPOINT;
		break;
	case SETTING_TAINT:
		p->allow_taint = 0;
		break;
	case SETTING_PATH_LIST:
		strv_free(p->allowed_roots);
		p->allowed_roots = NULL;
		break;
	case SETTING_WINDOW:
		p->window = (PolicyWindow){};
		break;
	case SETTING_COUNT:
		p->max_vms = UINT64_MAX;
		break;
	case SETTING_SIZE_LIMIT:
		p->max_vm_memory = UINT64_MAX;
		break;
	case SETTING_PATH:
	case SETTING_BACKING_DIR:
		return set_path(c, s, NULL);
	case SETTING_MARGIN:
		p->margin_is_percent = true;
		p->free_space_margin = DEFAULT_MARGIN_PERCENT;
		break;
	case SETTING_SECONDS:
		p->shutdown_timeout_usec = DEFAULT_SHUTDOWN_TIMEOUT * 1000000ULL;
		break;
	case SETTING_PAUSE_SECONDS:
		p->pause_timeout_usec = DEFAULT_PAUSE_TIMEOUT * 1000000ULL;
		break;
	case SETTING_PARALLEL:
		p->save_parallel = DEFAULT_SAVE_PARALLEL;
		break;
	case SETTING_KEEP_RAM_DIGEST:
		p->keep_ram_digest = POLICY_KEEP_RAM_DIGEST_MARK;
		break;
	case SETTING_GLOB_LIST:
		strv_free(rule->name_globs);
		rule->name_globs = NULL;
		break;
	case SETTING_METADATA:
		strv_free(rule->metadata);
		rule->metadata = NULL;
		break;
	case SETTING_SIZE_OR_NONE:
		if (streq(s->key, "MemoryAbove"))
			rule->memory_above = UINT64_MAX;
		else
			rule->memory_below = UINT64_MAX;
		break;
	}
	return 1;
}

static bool section_known(const char *section) {
	for (size_t i = 0; i < ELEMENTSOF(known_sections); i++)
		if (streq(section, known_sections[i]))
			return true;
	return false;
}

/* Reports an unknown or invalid section once per run of keys inside it. */
static int context_section_error(ParseContext *c, const char *section, const char *fmt, ...)
        _printf_(3, 4);
static int context_section_error(ParseContext *c, const char *section, const char *fmt, ...) {
	va_list ap;

	if (c->unknown_section && streq(c->unknown_section, section))
		return 1;
	free(c->unknown_section);
	c->unknown_section = strdup(section);
	if (!c->unknown_section)
		c->oom = true;
	va_start(ap, fmt);
	if (policy_errors_addv(c->errors, c->file, c->line, fmt, ap) < 0)
		c->oom = true;
	va_end(ap);
	return 1;
}

/* libinih calls this for every KEY=VALUE; c->line is the line it came from. */
static int handler(void *userdata, const char *section, const char *key, const char *value) {
	ParseContext *c = userdata;
	PolicyVmRule *rule = NULL;
	const char *rule_name = NULL;
	const Setting *s;

	if (c->oom)
		return 1;
	if (c->in_broken_section)
		return 1; /* below a broken section header, already reported */
	/* names end up in messages printed to terminals: no control characters */
	if (string_has_cc(section))
		return context_section_error(c, section,
		                             "Section name contains control characters");
	if (string_has_cc(key))
		return context_error(c, "Key name contains control characters");
	if (section[0] == '\0')
		return context_error(c, "%s= is outside of any section", key);
	if (strlen(section) >= SECTION_NAME_MAX)
		return context_section_error(c, section, "Section name [%s...] is too long",
		                             section);
	if (strncmp(section, RULE_SECTION_PREFIX, strlen(RULE_SECTION_PREFIX)) == 0) {
		rule_name = section + strlen(RULE_SECTION_PREFIX);
		if (!rule_name_valid(rule_name))
			return context_section_error(c, section,
			                             "Invalid rule name in [%s]: use 1..%d "
			                             "letters, digits, '_', '.', '-'",
			                             section, RULE_NAME_MAX);
	} else if (!section_known(section))
		return context_section_error(c, section, "Unknown section [%s]", section);

	if (key[0] == '\0')
		return context_error(c, "Assignment without a key in [%s]", section);
	s = setting_find(rule_name ? NULL : section, key);
	if (!s)
		return context_error(c, "Unknown key %s= in [%s]", key, section);
	if (string_has_cc(value))
		return context_error(c, "%s=: value contains control characters", key);
	if (!s->list && !context_first_assignment(c, section, key))
		return 1;
	if (rule_name) {
		rule = rule_get(c, rule_name);
		if (!rule) {
			c->oom = true;
			return 1;
		}
	}
	if (value[0] == '\0')
		return reset_setting(c, s, rule);
	return apply_setting(c, s, rule, value);
}

/* A handler that accepts everything: used to find the lines libinih rejects. */
static int handler_null(void *userdata, const char *section, const char *key, const char *value) {
	return 1;
}

/* ---------- the reader ---------- */

static bool context_line_is_bad(const ParseContext *c, unsigned line) {
	for (size_t i = 0; i < c->n_bad_lines; i++)
		if (c->bad_lines[i] == line)
			return true;
	return false;
}

/* libinih silently drops what follows "]" on a section line ("[Handoff] Mode=fast"):
 * only blanks and a comment may follow. */
static bool section_has_trailing_text(const char *s, size_t n) {
	const char *end = memchr(s, ']', n);

	if (!end)
		return false; /* libinih rejects the line itself */
	for (const char *t = end + 1; t < s + n; t++) {
		if (*t == ';' || *t == '#')
			return false;
		if (!isspace((unsigned char)*t))
			return true;
	}
	return false;
}

static void reader_report(ParseContext *c, const char *fmt, ...) _printf_(2, 3);
static void reader_report(ParseContext *c, const char *fmt, ...) {
	va_list ap;

	if (!c->report)
		return;
	va_start(ap, fmt);
	if (policy_errors_addv(c->errors, c->file, c->line, fmt, ap) < 0)
		c->oom = true;
	va_end(ap);
}

/*
 * Hands libinih exactly one physical line per call, so its line count and ours
 * agree. Leading blanks are dropped (no multi-line continuation values); lines
 * libinih cannot take whole (too long, NUL bytes) and lines it rejected in an
 * earlier pass are replaced by an empty line or an invalid section marker, after
 * being reported.
 */
static char *reader(char *str, int num, void *stream) {
	ParseContext *c = stream;
	const char *s, *nl;
	size_t n;
	bool section;

	if (c->pos >= c->size || num < (int)sizeof(BLANK_SECTION))
		return NULL;
	s = c->data + c->pos;
	nl = memchr(s, '\n', c->size - c->pos);
	n = nl ? (size_t)(nl - s) + 1 : c->size - c->pos;
	c->pos += n;
	c->line++;

	while (n > 0 && *s != '\n' && isspace((unsigned char)*s)) {
		s++;
		n--;
	}
	/* libinih takes every line starting with '[' as a section header */
	section = n > 0 && *s == '[';
	if (section)
		c->in_broken_section = false;

	if (context_line_is_bad(c, c->line)) {
		if (section)
			reader_report(c, "Invalid section header (expected [Name])");
		else
			reader_report(c, "Expected KEY=VALUE, [Section], or a comment");
	} else if (memchr(s, '\0', n))
		reader_report(c, "Line contains a NUL byte");
	else if (num < 2 || n > (size_t)num - 1)
		reader_report(c, "Line is too long (at most %d characters)", num - 2);
	else if (section && section_has_trailing_text(s, n))
		reader_report(c, "Unexpected text after the section header");
	else {
		memcpy(str, s, n);
		str[n] = '\0';
		return str;
	}
	/* libinih's buffer holds INI_MAX_LINE bytes, more than either replacement */
	strcpy(str, section ? BLANK_SECTION : BLANK_LINE);
	if (section)
		c->in_broken_section = true; /* and it still ends the previous section */
	return str;
}

static void context_rewind(ParseContext *c) {
	c->pos = 0;
	c->line = 0;
	c->in_broken_section = false;
}

static int context_mark_bad(ParseContext *c, unsigned line) {
	unsigned *n = realloc(c->bad_lines, sizeof(*n) * (c->n_bad_lines + 1));

	if (!n)
		return -ENOMEM;
	c->bad_lines = n;
	n[c->n_bad_lines++] = line;
	return 0;
}

/* ---------- public entry points ---------- */

int policy_parse_buffer(Policy *p, const char *file, const char *data, size_t size,
                        PolicyErrors *errors) {
	ParseContext c = {
		.policy = p,
		.file = file,
		.errors = errors,
		.n_errors_before = errors ? errors->n : 0,
		.data = data,
		.size = size,
	};
	PolicyErrors local = {};
	bool too_many = false;
	int r;

	if (!p || !file || (!data && size > 0))
		return -EINVAL;
	if (!c.errors)
		c.errors = &local; /* still count them */

	/* 1. Find every line libinih rejects (it reports only the first one per run). */
	for (;;) {
		context_rewind(&c);
		r = ini_parse_stream(reader, &c, handler_null, &c);
		if (r == 0)
			break;
		if (r < 0) {
			r = -ENOMEM;
			goto out;
		}
		if (context_line_is_bad(&c, (unsigned)r) ||
		    c.n_bad_lines >= POLICY_MAX_SYNTAX_ERRORS) {
			too_many = true;
			break;
		}
		if (context_mark_bad(&c, (unsigned)r) < 0) {
			r = -ENOMEM;
			goto out;
		}
	}

	/* 2. Apply the file, with the rejected lines reported and blanked. */
	context_rewind(&c);
	c.report = true;
	r = ini_parse_stream(reader, &c, handler, &c);
	if (r < 0 || c.oom) {
		r = -ENOMEM;
		goto out;
	}
	if (too_many && policy_errors_add(c.errors, file, 0,
	                                  "Too many syntax errors: only the first %d are reported",
	                                  POLICY_MAX_SYNTAX_ERRORS) < 0) {
		r = -ENOMEM;
		goto out;
	}
	r = c.errors->n > c.n_errors_before ? -EBADMSG : 0;
out:
	context_done(&c);
	policy_errors_done(&local);
	log_debug("policy: parsed '%s': %d", file, r);
	return r;
}

int policy_finish(Policy *p, PolicyErrors *errors) {
	PolicyErrors local = {};
	PolicyErrors *e = errors ?: &local;
	size_t before = e->n;
	int r = 0;

	if (!p)
		return -EINVAL;
	for (size_t i = 0; i < p->n_rules && r >= 0; i++) {
		const PolicyVmRule *rule = &p->rules[i];

		if (!rule->have_strategy)
			r = policy_errors_add(e, rule->file, rule->line,
			                      "[VMRule:%s] has no Strategy=", rule->name);
		if (r >= 0 && !rule->name_globs && !rule->metadata &&
		    rule->memory_above == UINT64_MAX && rule->memory_below == UINT64_MAX)
			r = policy_errors_add(
			        e, rule->file, rule->line,
			        "[VMRule:%s] has no Name=, Metadata=, MemoryAbove= or "
			        "MemoryBelow= condition (use [VM] DefaultStrategy=)",
			        rule->name);
		if (r >= 0 && rule->memory_above != UINT64_MAX &&
		    rule->memory_below != UINT64_MAX && rule->memory_above >= rule->memory_below)
			r = policy_errors_add(
			        e, rule->file, rule->line,
			        "[VMRule:%s] can never match: MemoryAbove= is not below "
			        "MemoryBelow=",
			        rule->name);
	}
	if (r >= 0 && !p->allowed_roots)
		r = policy_errors_add(e, "", 0,
		                      "[Paths] AllowedRoots= is empty: no kernel could be staged");
	if (r >= 0)
		r = e->n > before ? -EBADMSG : 0;
	policy_errors_done(&local);
	return r;
}

static int name_cmp(const void *a, const void *b) {
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.conf entries of dir in byte order; a missing directory is empty. */
static int list_dropins(const char *dir, char ***ret) {
	_cleanup_strv_free_ char **l = NULL;
	DIR *d;
	struct dirent *de;

	d = opendir(dir);
	if (!d) {
		if (errno == ENOENT || errno == ENOTDIR) {
			*ret = NULL;
			return 0;
		}
		return -errno;
	}
	errno = 0;
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name);

		if (de->d_name[0] == '.' || n <= 5 || !streq(de->d_name + n - 5, ".conf"))
			continue;
		if (strv_extend(&l, de->d_name) < 0) {
			closedir(d);
			return -ENOMEM;
		}
	}
	closedir(d);
	if (l)
		qsort(l, strv_length(l), sizeof(char *), name_cmp);
	*ret = TAKE_PTR(l);
	return 0;
}

/* Reads and applies one file. Missing: 0. */
static int load_file(Policy *p, const char *path, bool may_be_missing, PolicyErrors *errors) {
	_cleanup_free_ char *data = NULL;
	struct stat st;
	size_t size;
	int r;

	if (stat(path, &st) < 0) {
		if (errno == ENOENT && may_be_missing)
			return 0;
		r = -errno;
		policy_errors_add(errors, path, 0, "Cannot access: %s", strerror(-r));
		return r;
	}
	if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3))
		return 0; /* a drop-in linked to /dev/null is masked */
	if (!S_ISREG(st.st_mode)) {
		policy_errors_add(errors, path, 0, "Not a regular file");
		return -EBADMSG;
	}
	r = read_file_full(path, POLICY_CONFIG_MAX_SIZE, &data, &size);
	if (r < 0) {
		policy_errors_add(errors, path, 0, "Cannot read: %s",
		                  r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
		return r;
	}
	return policy_parse_buffer(p, path, data, size, errors);
}

int policy_load(const char *root, Policy **ret, PolicyErrors *ret_errors) {
	_cleanup_(policy_freep) Policy *p = NULL;
	_cleanup_free_ char *main_path = NULL, *dir = NULL;
	_cleanup_strv_free_ char **dropins = NULL;
	PolicyErrors local = {};
	PolicyErrors *e = ret_errors ?: &local;
	int r, ret_r = 0;

	if (!ret)
		return -EINVAL;
	r = policy_new_default(&p);
	if (r < 0)
		return r;
	if (path_prefix_root(root, POLICY_CONFIG_FILE, &main_path) < 0 ||
	    path_prefix_root(root, POLICY_CONFIG_DROPIN_DIR, &dir) < 0)
		return -ENOMEM;

	r = load_file(p, main_path, true, e);
	if (r == -ENOMEM)
		goto out;
	if (r < 0)
		ret_r = r;

	r = list_dropins(dir, &dropins);
	if (r < 0) {
		policy_errors_add(e, dir, 0, "Cannot list drop-ins: %s", strerror(-r));
		ret_r = ret_r ?: r;
	}
	STRV_FOREACH (name, dropins) {
		_cleanup_free_ char *path = NULL;

		if (path_join(dir, *name, &path) < 0) {
			r = -ENOMEM;
			goto out;
		}
		r = load_file(p, path, true, e);
		if (r == -ENOMEM)
			goto out;
		if (r < 0 && ret_r == 0)
			ret_r = r;
	}

	r = policy_finish(p, e);
	if (r == -ENOMEM)
		goto out;
	if (r < 0 && ret_r == 0)
		ret_r = r;
	r = ret_r;
	if (r == 0)
		*ret = TAKE_PTR(p);
out:
	policy_errors_done(&local);
	return r;
}

int policy_check_config(const char *root, FILE *out) {
	_cleanup_(policy_freep) Policy *p = NULL;
	PolicyErrors e = {};
	int r;

	r = policy_load(root, &p, &e);
	policy_errors_print(&e, out);
	if (r >= 0)
		fprintf(out, "configuration OK\n");
	else if (e.n > 0)
		fprintf(out, "%zu error%s: the configuration would not be loaded\n", e.n,
		        e.n == 1 ? "" : "s");
	else
		fprintf(out, "cannot load the configuration: %s\n", strerror(-r));
	policy_errors_done(&e);
	return r;
}
