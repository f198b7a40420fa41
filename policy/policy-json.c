/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The policy itself: whether a path is below an allowed root, and the effective
 * configuration as JSON (the settings in effect, as Describe's "Policy" shows them).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "json-util.h"
#include "path-util.h"
#include "policy-internal.h"

bool policy_path_allowed(const Policy *p, const char *path) {
	return p && path && path_is_below_any(path, p->allowed_roots);
}

static json_object *json_strv(char *const *l) {
	json_object *a = json_object_new_array();

	for (char *const *i = l; a && i && *i; i++) {
		json_object *v = json_object_new_string(*i);

		if (!v || json_object_array_add(a, v) < 0) {
			json_object_put(v);
			json_object_put(a);
			return NULL;
		}
	}
	return a;
}

static json_object *json_limit(uint64_t v) {
	return v == UINT64_MAX ? json_object_new_string("infinity") : json_object_new_uint64(v);
}

static json_object *json_window(const PolicyWindow *w) {
	char buf[64];

	return json_object_new_string(policy_window_format(w, buf));
}

static int rule_to_json(const PolicyVmRule *r, json_object **ret) {
	_cleanup_json_ json_object *o = json_object_new_object();

	if (!o || json_add_take(o, "name", json_object_new_string(r->name)) < 0 ||
	    json_add_take(o, "match_name", json_strv(r->name_globs)) < 0 ||
	    json_add_take(o, "match_metadata", json_strv(r->metadata)) < 0 ||
	    json_add_take(o, "strategy",
	                  json_object_new_string(policy_vm_strategy_to_string(r->strategy))) < 0)
		return -ENOMEM;
	/* no condition: null */
	if ((r->memory_above == UINT64_MAX
	             ? json_object_object_add(o, "memory_above", NULL)
	             : json_add_take(o, "memory_above", json_object_new_uint64(r->memory_above))) <
	            0 ||
	    (r->memory_below == UINT64_MAX
	             ? json_object_object_add(o, "memory_below", NULL)
	             : json_add_take(o, "memory_below", json_object_new_uint64(r->memory_below))) <
	            0)
		return -ENOMEM;
	*ret = TAKE_PTR(o);
	return 0;
}

int policy_to_json(const Policy *p, json_object **ret) {
	_cleanup_json_ json_object *o = NULL, *h = NULL, *paths = NULL, *c = NULL, *vm = NULL,
	                           *rules = NULL, *metrics = NULL, *reports = NULL, *restore = NULL;
	char taint[32], margin[32];

	if (!p || !ret)
		return -EINVAL;
	o = json_object_new_object();
	h = json_object_new_object();
	paths = json_object_new_object();
	c = json_object_new_object();
	vm = json_object_new_object();
	rules = json_object_new_array();
	metrics = json_object_new_object();
	reports = json_object_new_object();
	restore = json_object_new_object();
	if (!o || !h || !paths || !c || !vm || !rules || !metrics || !reports || !restore)
		return -ENOMEM;
	if (p->margin_is_percent)
		snprintf(margin, sizeof(margin), "%" PRIu64 "%%", p->free_space_margin);
	else
		snprintf(margin, sizeof(margin), "%" PRIu64, p->free_space_margin);

	if (json_add_take(h, "mode",
	                  json_object_new_string(policy_handoff_mode_to_string(p->mode))) < 0 ||
	    json_add_take(h, "allow_fast", json_object_new_boolean(p->allow_fast)) < 0 ||
	    json_add_take(h, "allow_taint",
	                  json_object_new_string(policy_taint_to_string(p->allow_taint, taint))) <
	            0 ||
	    json_add_take(h, "shutdown",
	                  json_object_new_string(shutdown_mode_to_string(p->shutdown))) < 0 ||
	    json_add_take(h, "kdump_initrd",
	                  json_object_new_string(p->kdump_initrd_at_boot ? "boot" : "stage")) < 0 ||
	    json_add_take(paths, "allowed_roots", json_strv(p->allowed_roots)) < 0 ||
	    json_add_take(c, "maintenance_window", json_window(&p->window)) < 0 ||
	    json_add_take(c, "max_vms", json_limit(p->max_vms)) < 0 ||
	    json_add_take(c, "max_vm_memory", json_limit(p->max_vm_memory)) < 0 ||
	    json_add_take(c, "checkpoint_dir", json_object_new_string(p->checkpoint_dir)) < 0 ||
	    json_add_take(c, "free_space_margin", json_object_new_string(margin)) < 0 ||
	    json_add_take(vm, "default_strategy",
	                  json_object_new_string(
	                          policy_vm_strategy_to_string(p->default_strategy))) < 0 ||
	    json_add_take(vm, "shutdown_timeout_sec",
	                  json_object_new_uint64(p->shutdown_timeout_usec / 1000000)) < 0 ||
	    json_add_take(vm, "pause_timeout_sec",
	                  json_object_new_uint64(p->pause_timeout_usec / 1000000)) < 0 ||
	    json_add_take(vm, "save_parallel", json_object_new_uint64(p->save_parallel)) < 0 ||
	    json_add_take(vm, "keep_ram_digest",
	                  json_object_new_string(
	                          policy_keep_ram_digest_to_string(p->keep_ram_digest))) < 0 ||
	    json_add_take(vm, "keep_ram_fallback",
	                  json_object_new_string(p->keep_ram_fallback ? "checkpoint" : "none")) <
	            0 ||
	    json_add_take(vm, "sync_guest_clock", json_object_new_boolean(p->sync_guest_clock)) <
	            0 ||
	    (p->memory_backing_dir &&
	     json_add_take(vm, "memory_backing_dir",
	                   json_object_new_string(p->memory_backing_dir)) < 0) ||
	    json_add_take(metrics, "textfile_directory", json_object_new_string(p->metrics_dir)) <
	            0 ||
	    json_add_take(reports, "keep", json_limit(p->keep_reports)) < 0 ||
	    json_add_take(restore, "defer_until_restored", json_strv(p->defer_until_restored)) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_rules; i++) {
		json_object *r = NULL;

		if (rule_to_json(&p->rules[i], &r) < 0)
			return -ENOMEM;
		if (json_object_array_add(rules, r) < 0) {
			json_object_put(r);
			return -ENOMEM;
		}
	}
	if (json_add_take(o, "handoff", TAKE_PTR(h)) < 0 ||
	    json_add_take(o, "paths", TAKE_PTR(paths)) < 0 ||
	    json_add_take(o, "commit", TAKE_PTR(c)) < 0 ||
	    json_add_take(o, "vm", TAKE_PTR(vm)) < 0 ||
	    json_add_take(o, "metrics", TAKE_PTR(metrics)) < 0 ||
	    json_add_take(o, "reports", TAKE_PTR(reports)) < 0 ||
	    json_add_take(o, "restore", TAKE_PTR(restore)) < 0 ||
	    json_add_take(o, "rules", TAKE_PTR(rules)) < 0)
		return -ENOMEM;
	*ret = TAKE_PTR(o);
	return 0;
}
