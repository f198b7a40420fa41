/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The configuration's sections and keys: which ones exist, what each one sets, what an
 * empty assignment resets; libinih's handler checks every KEY=VALUE against them.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "path-util.h"
#include "policy-config-internal.h"
#include "policy-internal.h"
#include "string-util.h"

#define RULE_SECTION_PREFIX      "VMRule:"
#define RULE_NAME_MAX            40
/* libinih truncates longer section names (MAX_SECTION): refuse them instead */
#define SECTION_NAME_MAX         48
#define MAX_SAVE_PARALLEL        64
#define MAX_SHUTDOWN_TIMEOUT_SEC (24 * 3600)
#define MAX_PAUSE_TIMEOUT_SEC    3600

static const Setting settings[] = {
	{ "Handoff", "Mode", SETTING_MODE, false },
	{ "Handoff", "AllowFast", SETTING_BOOL, false },
	{ "Handoff", "AllowTaint", SETTING_TAINT, true },
	{ "Handoff", "Shutdown", SETTING_SHUTDOWN, false },
	{ "Handoff", "KdumpInitrd", SETTING_KDUMP_INITRD, false },
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
	{ "VM", "KeepRamFallback", SETTING_KEEP_RAM_FALLBACK, false },
	{ "VM", "MemoryBackingDir", SETTING_BACKING_DIR, false },
	{ "VM", "SyncGuestClock", SETTING_SYNC_CLOCK, false },
	{ "Metrics", "TextfileDirectory", SETTING_PATH, false },
	{ "Reports", "Keep", SETTING_COUNT, false },
	{ "Restore", "DeferUntilRestored", SETTING_UNIT_LIST, true },
	{ NULL, "Name", SETTING_GLOB_LIST, true },
	{ NULL, "Metadata", SETTING_METADATA, true },
	{ NULL, "MemoryAbove", SETTING_SIZE_OR_NONE, false },
	{ NULL, "MemoryBelow", SETTING_SIZE_OR_NONE, false },
	{ NULL, "Strategy", SETTING_STRATEGY, false },
};

const Setting *policy_settings(size_t *ret_n) {
	*ret_n = ELEMENTSOF(settings);
	return settings;
}

static const char *const known_sections[] = { "Handoff", "Paths",   "Commit", "VM",
	                                      "Metrics", "Reports", "Restore" };

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

/* ---------- the policy_config_handler ---------- */

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
		policy_rule_done(n);
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

/* A list setting: appends every word of value to *l when valid() takes them all;
 * otherwise reports the first it refuses, as "KEY=: 'WORD' is not WHAT". */
static int parse_word_list(ParseContext *c, const char *key, const char *value, char ***l,
                           bool (*valid)(const char *), const char *what) {
	_cleanup_strv_free_ char **words = NULL;

	if (strv_extend_words(&words, value) < 0) {
		c->oom = true;
		return 1;
	}
	STRV_FOREACH (w, words) {
		if (!valid(*w))
			return context_error(c, "%s=: '%s' is not %s", key, *w, what);
	}
	STRV_FOREACH (w, words) {
		if (strv_extend(l, *w) < 0)
			c->oom = true;
	}
	return 1;
}

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

/* MaxVMs= (a count) and MaxVMMemory= (a size): a number, or "infinity". */
static int apply_limit(ParseContext *c, const Setting *s, const char *value) {
	Policy *p = c->policy;
	unsigned long long u;
	uint64_t v;

	if (s->kind == SETTING_COUNT) {
		/* [Commit] MaxVMs=, [Reports] Keep= (at least one: the newest report stays) */
		bool keep = streq(s->key, "Keep");
		uint64_t *target = keep ? &p->keep_reports : &p->max_vms;

		if (streq(value, "infinity")) {
			*target = UINT64_MAX;
			return 1;
		}
		if (safe_atou64(value, &u) < 0 || u >= UINT64_MAX || (keep && u == 0))
			return context_error(c, "%s=: '%s' is not a number%s or 'infinity'", s->key,
			                     value, keep ? " from 1" : "");
		*target = u;
		return 1;
	}
	if (streq(value, "infinity")) {
		p->max_vm_memory = UINT64_MAX;
		return 1;
	}
	if (policy_parse_size(value, &v) < 0 || v == UINT64_MAX)
		return context_error(c, "%s=: '%s' is not a size (e.g. 64G) or 'infinity'", s->key,
		                     value);
	p->max_vm_memory = v;
	return 1;
}

/* FreeSpaceMargin=: a percentage of the free space needed, or a size. */
static int apply_margin(ParseContext *c, const Setting *s, const char *value) {
	Policy *p = c->policy;
	unsigned long long u;
	uint64_t v;
	size_t n = strlen(value);

	if (n > 1 && value[n - 1] == '%') {
		_cleanup_free_ char *num = strndup(value, n - 1);

		if (!num) {
			c->oom = true;
			return 1;
		}
		if (safe_atou64(num, &u) < 0 || u > 1000)
			return context_error(c, "%s=: '%s' is not a percentage 0%%..1000%%", s->key,
			                     value);
		p->margin_is_percent = true;
		p->free_space_margin = u;
		return 1;
	}
	if (policy_parse_size(value, &v) < 0)
		return context_error(c, "%s=: '%s' is not a percentage (10%%) or a size (2G)",
		                     s->key, value);
	p->margin_is_percent = false;
	p->free_space_margin = v;
	return 1;
}

/* ShutdownTimeoutSec= and PauseTimeoutSec=: whole seconds, each with its limit. */
static int apply_seconds(ParseContext *c, const Setting *s, const char *value) {
	Policy *p = c->policy;
	unsigned long long u;
	bool pause = s->kind == SETTING_PAUSE_SECONDS;
	unsigned max = pause ? MAX_PAUSE_TIMEOUT_SEC : MAX_SHUTDOWN_TIMEOUT_SEC;

	if (safe_atou64(value, &u) < 0 || u == 0 || u > max)
		return context_error(c, "%s=: '%s' is not a number of seconds 1..%u", s->key, value,
		                     max);
	*(pause ? &p->pause_timeout_usec : &p->shutdown_timeout_usec) = u * 1000000ULL;
	return 1;
}

/* The conditions of a [VMRule:NAME]: Name=, Metadata=, MemoryAbove=, MemoryBelow=. */
static int apply_rule_condition(ParseContext *c, const Setting *s, PolicyVmRule *rule,
                                const char *value) {
	uint64_t v;

	switch (s->kind) {
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
	default:
		break;
	}
	return context_error(c, "internal error: unhandled setting %s=", s->key);
}

/* A setting of two words: *ret is whether value is yes_word. */
static int apply_either(ParseContext *c, const Setting *s, const char *value, const char *yes_word,
                        const char *no_word, bool *ret) {
	if (!streq(value, yes_word) && !streq(value, no_word))
		return context_error(c, "%s=: '%s' is not one of %s, %s", s->key, value, yes_word,
		                     no_word);
	*ret = streq(value, yes_word);
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
	case SETTING_SYNC_CLOCK:
		if (policy_parse_bool(value, &b) < 0)
			return context_error(c, "%s=: '%s' is not a boolean (yes/no)", s->key,
			                     value);
		*(s->kind == SETTING_BOOL ? &p->allow_fast : &p->sync_guest_clock) = b;
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
			                     s->key, value, policy_taint_letters);
		p->allow_taint |= v;
		return 1;
	case SETTING_PATH_LIST:
		return parse_word_list(c, s->key, value, &p->allowed_roots, path_is_normalized,
		                       "a normalized absolute path");
	case SETTING_WINDOW:
		if (policy_parse_window(value, &p->window) < 0)
			return context_error(c,
			                     "%s=: '%s' is not a window like 'Sat,Sun 02:00-04:00'",
			                     s->key, value);
		return 1;
	case SETTING_COUNT:
	case SETTING_SIZE_LIMIT:
		return apply_limit(c, s, value);
	case SETTING_PATH:
	case SETTING_BACKING_DIR:
		if (!path_is_normalized(value) || streq(value, "/"))
			return context_error(c, "%s=: '%s' is not a normalized absolute directory",
			                     s->key, value);
		return set_path(c, s, value);
	case SETTING_MARGIN:
		return apply_margin(c, s, value);
	case SETTING_SECONDS:
	case SETTING_PAUSE_SECONDS:
		return apply_seconds(c, s, value);
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
	case SETTING_KEEP_RAM_FALLBACK:
		return apply_either(c, s, value, "checkpoint", "none", &p->keep_ram_fallback);
	case SETTING_SHUTDOWN:
		r = shutdown_mode_from_string(value);
		if (r < 0)
			return context_error(c, "%s=: '%s' is not one of %s, %s", s->key, value,
			                     shutdown_mode_to_string(SHUTDOWN_MODE_FAST),
			                     shutdown_mode_to_string(SHUTDOWN_MODE_ORDERLY));
		p->shutdown = (ShutdownMode)r;
		return 1;
	case SETTING_KDUMP_INITRD:
		return apply_either(c, s, value, "boot", "stage", &p->kdump_initrd_at_boot);
	case SETTING_GLOB_LIST:
	case SETTING_METADATA:
	case SETTING_SIZE_OR_NONE:
		return apply_rule_condition(c, s, rule, value);
	case SETTING_UNIT_LIST:
		/* [Restore] DeferUntilRestored=: what upgraded-defer-generator accepts */
		return parse_word_list(c, s->key, value, &p->defer_until_restored,
		                       policy_unit_pattern_valid,
		                       "a .timer, .service, .path or .socket unit name or glob");
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
		if (streq(s->key, "Keep"))
			p->keep_reports = POLICY_KEEP_REPORTS_DEFAULT;
		else
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
	case SETTING_SHUTDOWN:
		p->shutdown = SHUTDOWN_MODE_ORDERLY;
		break;
	case SETTING_KDUMP_INITRD:
		p->kdump_initrd_at_boot = false;
		break;
	case SETTING_KEEP_RAM_FALLBACK:
		p->keep_ram_fallback = true;
		break;
	case SETTING_SYNC_CLOCK:
		p->sync_guest_clock = true;
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
	case SETTING_UNIT_LIST:
		strv_free(p->defer_until_restored);
		p->defer_until_restored = NULL;
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
int policy_config_handler(void *userdata, const char *section, const char *key, const char *value) {
	ParseContext *c = userdata;
	PolicyVmRule *rule = NULL;
	const char *rule_name = NULL;
	const Setting *s;
	size_t n_errors;

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
	n_errors = c->errors->n;
	if (value[0] == '\0')
		reset_setting(c, s, rule);
	else
		apply_setting(c, s, rule, value);
	/* Applied: this line is now where the setting comes from (or one of them, for a
	 * list appended to). */
	if (!c->oom && c->errors->n == n_errors &&
	    policy_origin_note(c->policy, section, key, c->file, c->line,
	                       s->list && value[0] != '\0') < 0)
		c->oom = true;
	return 1;
}

/* A policy_config_handler that accepts everything: used to find the lines libinih rejects. */
int policy_config_handler_null(void *userdata, const char *section, const char *key,
                               const char *value) {
	return 1;
}
