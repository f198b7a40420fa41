/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * `upgraded --check-config --show`: the settings in effect, each as the KEY=VALUE line that
 * would set it, and where it came from (policy_show()).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "policy-config-internal.h"
#include "path-util.h"
#include "policy-internal.h"
#include "string-util.h"

/* Values are at most a path list; longer lines are printed whole. */
#define VALUE_MAX    4096
#define ORIGIN_COLON 40

static const char *limit_format(uint64_t v, char buf[static 32]) {
	if (v == UINT64_MAX)
		return "infinity";
	snprintf(buf, 32, "%" PRIu64, v);
	return buf;
}

static void strv_join_into(char *const *l, char *buf, size_t size) {
	size_t n = 0;

	buf[0] = '\0';
	for (; l && *l && n < size; l++)
		n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? " " : "", *l);
}

/* A [VMRule:NAME] key's value into buf; false when the rule does not set it. */
static bool rule_value(const PolicyVmRule *r, const Setting *s, char *buf, size_t size) {
	char num[32];

	switch (s->kind) {
	case SETTING_GLOB_LIST:
		strv_join_into(r->name_globs, buf, size);
		return r->name_globs;
	case SETTING_SIZE_OR_NONE: {
		uint64_t v = streq(s->key, "MemoryAbove") ? r->memory_above : r->memory_below;

		snprintf(buf, size, "%s", limit_format(v, num));
		return v != UINT64_MAX;
	}
	case SETTING_STRATEGY:
		snprintf(buf, size, "%s", policy_vm_strategy_to_string(r->strategy));
		return r->have_strategy;
	default:
		return false; /* Metadata= prints one line per pair (show_rule()) */
	}
}

static const char *scalar_text(const Policy *p, const Setting *s, char num[static 64]) {
	switch (s->kind) {
	case SETTING_BOOL:
		return p->allow_fast ? "yes" : "no";
	case SETTING_MODE:
		return policy_handoff_mode_to_string(p->mode);
	case SETTING_STRATEGY:
		return policy_vm_strategy_to_string(p->default_strategy);
	case SETTING_TAINT:
		return policy_taint_to_string(p->allow_taint, num);
	case SETTING_WINDOW:
		return policy_window_format(&p->window, num);
	case SETTING_COUNT:
		return limit_format(streq(s->key, "Keep") ? p->keep_reports : p->max_vms, num);
	case SETTING_SIZE_LIMIT:
		return limit_format(p->max_vm_memory, num);
	case SETTING_PATH:
		return streq(s->key, "TextfileDirectory") ? p->metrics_dir : p->checkpoint_dir;
	case SETTING_BACKING_DIR:
		return strempty(p->memory_backing_dir);
	case SETTING_MARGIN:
		snprintf(num, 64, "%" PRIu64 "%s", p->free_space_margin,
		         p->margin_is_percent ? "%" : "");
		return num;
	case SETTING_SECONDS:
	case SETTING_PAUSE_SECONDS:
		snprintf(num, 64, "%" PRIu64,
		         (s->kind == SETTING_SECONDS ? p->shutdown_timeout_usec
		                                     : p->pause_timeout_usec) /
		                 1000000);
		return num;
	case SETTING_PARALLEL:
		snprintf(num, 64, "%u", p->save_parallel);
		return num;
	case SETTING_KEEP_RAM_DIGEST:
		return policy_keep_ram_digest_to_string(p->keep_ram_digest);
	case SETTING_KEEP_RAM_FALLBACK:
		return p->keep_ram_fallback ? "checkpoint" : "none";
	case SETTING_SYNC_CLOCK:
		return p->sync_guest_clock ? "yes" : "no";
	case SETTING_SHUTDOWN:
		return shutdown_mode_to_string(p->shutdown);
	case SETTING_KDUMP_INITRD:
		return p->kdump_initrd_at_boot ? "boot" : "stage";
	default:
		return "";
	}
}

static void show_line(FILE *out, const char *key, const char *value, const char *origin) {
	int n = fprintf(out, "%s=%s", key, value);

	fprintf(out, "%*s# %s\n", n < ORIGIN_COLON ? ORIGIN_COLON - n : 1, "", origin);
}

static void show_rule(const Policy *p, const PolicyVmRule *r, const Setting *settings, size_t n,
                      FILE *out) {
	_cleanup_free_ char *section = NULL;
	char value[VALUE_MAX];

	if (asprintf(&section, "VMRule:%s", r->name) < 0)
		return;
	fprintf(out, "\n[%s]\n", section);
	for (size_t i = 0; i < n; i++) {
		const Setting *s = &settings[i];

		if (s->section)
			continue;
		if (s->kind == SETTING_METADATA) {
			STRV_FOREACH (m, r->metadata)
				show_line(out, s->key, *m, policy_origin(p, section, s->key));
		} else if (rule_value(r, s, value, sizeof(value)))
			show_line(out, s->key, value, policy_origin(p, section, s->key));
	}
}

int policy_show(const Policy *p, FILE *out) {
	const char *section = NULL;
	char value[VALUE_MAX];
	size_t n;
	const Setting *settings = policy_settings(&n);

	if (!p || !out)
		return -EINVAL;
	fprintf(out, "# The settings in effect: the built-in defaults, then the files read, in "
	             "order\n# (a later assignment wins; a list setting appends).\n");
	if (!p->origins || !p->origins->files)
		fprintf(out, "# No file read: every setting is the default.\n");
	STRV_FOREACH (f, p->origins ? p->origins->files : NULL)
		fprintf(out, "# Read: %s\n", *f);
	for (size_t i = 0; i < n; i++) {
		const Setting *s = &settings[i];
		char num[64];
		const char *v;

		if (!s->section)
			continue;
		if (!section || !streq(section, s->section))
			fprintf(out, "\n[%s]\n", s->section);
		section = s->section;
		if (s->kind == SETTING_PATH_LIST || s->kind == SETTING_UNIT_LIST) {
			strv_join_into(s->kind == SETTING_PATH_LIST ? p->allowed_roots
			                                            : p->defer_until_restored,
			               value, sizeof(value));
			v = value;
		} else
			v = scalar_text(p, s, num);
		show_line(out, s->key, v, policy_origin(p, s->section, s->key));
	}
	for (size_t i = 0; i < p->n_rules; i++)
		show_rule(p, &p->rules[i], settings, n, out);
	return ferror(out) ? -EIO : 0;
}

/* A configuration directory that is not there is no error (the defaults apply), but it may
 * be a typo in --root=: say so. */
static void warn_missing_dir(const char *root, FILE *err) {
	_cleanup_free_ char *dir = NULL;
	struct stat st;

	if (path_prefix_root(root, POLICY_CONFIG_DIR, &dir) < 0)
		return;
	if (stat(dir, &st) < 0)
		fprintf(err,
		        "warning: configuration directory %s: %s: the built-in defaults apply.\n",
		        dir, strerror(errno));
	else if (!S_ISDIR(st.st_mode))
		fprintf(err, "warning: %s is not a directory: the built-in defaults apply.\n", dir);
}

int policy_check_config(const char *root, bool show, FILE *out, FILE *err) {
	_cleanup_(policy_freep) Policy *p = NULL;
	PolicyErrors e = {};
	int r;

	warn_missing_dir(root, err ?: out);
	r = policy_load(root, &p, &e);
	policy_errors_print(&e, out);
	if (r >= 0 && show)
		r = policy_show(p, out);
	if (r >= 0)
		fprintf(out, "%sconfiguration OK\n", show ? "\n# " : "");
	else if (e.n > 0)
		fprintf(out, "%zu error%s: the configuration would not be loaded\n", e.n,
		        e.n == 1 ? "" : "s");
	else
		fprintf(out, "cannot load the configuration: %s\n", strerror(-r));
	policy_errors_done(&e);
	return r;
}
