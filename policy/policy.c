/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The decisions: handoff (verified or fast), per-VM strategy, commit
 * preconditions. Pure functions of (Policy, facts): no I/O, no clock, no globals,
 * so every combination can be tested exhaustively.
 */
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "policy-internal.h"

/* ---------- names ---------- */

static const char *const handoff_mode_table[_POLICY_HANDOFF_MODE_MAX] = {
	[POLICY_HANDOFF_MODE_VERIFIED] = "verified",
	[POLICY_HANDOFF_MODE_FAST] = "fast",
	[POLICY_HANDOFF_MODE_AUTO] = "auto",
};

static const char *const keep_ram_digest_table[_POLICY_KEEP_RAM_DIGEST_MAX] = {
	[POLICY_KEEP_RAM_DIGEST_MARK] = "mark",
	[POLICY_KEEP_RAM_DIGEST_SAMPLED] = "sampled",
	[POLICY_KEEP_RAM_DIGEST_FULL] = "full",
};

static const char *const strategy_table[_POLICY_VM_STRATEGY_MAX] = {
	[POLICY_VM_CHECKPOINT] = "checkpoint",
	[POLICY_VM_KEEP_RAM] = "keep-ram",
	[POLICY_VM_SHUTDOWN] = "shutdown",
	[POLICY_VM_IGNORE] = "ignore",
};

static const char *const severity_table[_POLICY_REASON_SEVERITY_MAX] = {
	[POLICY_REASON_INFO] = "info",
	[POLICY_REASON_WARNING] = "warning",
	[POLICY_REASON_BLOCKING] = "blocking",
};

static int table_lookup(const char *const *table, size_t n, const char *s) {
	for (size_t i = 0; s && i < n; i++)
		if (streq(table[i], s))
			return (int)i;
	return -1;
}

const char *policy_handoff_mode_to_string(PolicyHandoffMode m) {
	return (unsigned)m < _POLICY_HANDOFF_MODE_MAX ? handoff_mode_table[m] : NULL;
}

int policy_handoff_mode_from_string(const char *s) {
	return table_lookup(handoff_mode_table, _POLICY_HANDOFF_MODE_MAX, s);
}

const char *policy_keep_ram_digest_to_string(PolicyKeepRamDigest d) {
	return (unsigned)d < _POLICY_KEEP_RAM_DIGEST_MAX ? keep_ram_digest_table[d] : NULL;
}

int policy_keep_ram_digest_from_string(const char *s) {
	return table_lookup(keep_ram_digest_table, _POLICY_KEEP_RAM_DIGEST_MAX, s);
}

const char *policy_vm_strategy_to_string(PolicyVmStrategy s) {
	return (unsigned)s < _POLICY_VM_STRATEGY_MAX ? strategy_table[s] : NULL;
}

int policy_vm_strategy_from_string(const char *s) {
	return table_lookup(strategy_table, _POLICY_VM_STRATEGY_MAX, s);
}

const char *policy_reason_severity_to_string(PolicyReasonSeverity s) {
	return (unsigned)s < _POLICY_REASON_SEVERITY_MAX ? severity_table[s] : NULL;
}

/* ---------- reasons ---------- */

void policy_reasons_done(PolicyReasons *r) {
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++)
		free(r->items[i].text);
	free(r->items);
	*r = (PolicyReasons){};
}

int policy_reasons_add(PolicyReasons *r, const char *code, PolicyReasonSeverity severity,
                       const char *fmt, ...) {
	_cleanup_free_ char *text = NULL;
	PolicyReason *n;
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vasprintf(&text, fmt, ap);
	va_end(ap);
	if (k < 0)
		return -ENOMEM;
	n = realloc(r->items, sizeof(*n) * (r->n + 1));
	if (!n)
		return -ENOMEM;
	r->items = n;
	r->items[r->n++] =
	        (PolicyReason){ .code = code, .severity = severity, .text = TAKE_PTR(text) };
	return 0;
}

bool policy_reasons_has(const PolicyReasons *r, const char *code) {
	for (size_t i = 0; r && i < r->n; i++)
		if (streq(r->items[i].code, code))
			return true;
	return false;
}

static bool reasons_blocking(const PolicyReasons *r) {
	for (size_t i = 0; i < r->n; i++)
		if (r->items[i].severity == POLICY_REASON_BLOCKING)
			return true;
	return false;
}

int policy_reasons_to_json(const PolicyReasons *r, json_object **ret) {
	_cleanup_json_ json_object *a = NULL;

	if (!r || !ret)
		return -EINVAL;
	a = json_object_new_array();
	if (!a)
		return -ENOMEM;
	for (size_t i = 0; i < r->n; i++) {
		_cleanup_json_ json_object *o = json_object_new_object();

		if (!o || json_add_take(o, "code", json_object_new_string(r->items[i].code)) < 0 ||
		    json_add_take(o, "severity",
		                  json_object_new_string(policy_reason_severity_to_string(
		                          r->items[i].severity))) < 0 ||
		    json_add_take(o, "text", json_object_new_string(r->items[i].text)) < 0)
			return -ENOMEM;
		if (json_object_array_add(a, o) < 0)
			return -ENOMEM;
		o = NULL;
	}
	*ret = TAKE_PTR(a);
	return 0;
}

int policy_reasons_format(const PolicyReasons *r, const char *prefix, FILE *out) {
	if (!r || !out)
		return -EINVAL;
	for (size_t i = 0; i < r->n; i++)
		if (fprintf(out, "%s%s: %s: %s\n", strempty(prefix),
		            policy_reason_severity_to_string(r->items[i].severity),
		            r->items[i].code, r->items[i].text) < 0)
			return -EIO;
	return 0;
}

static const char *json_get_string(json_object *o, const char *key) {
	json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

int policy_reasons_format_json(json_object *reasons, const char *prefix, FILE *out) {
	size_t n;

	if (!out)
		return -EINVAL;
	if (!json_object_is_type(reasons, json_type_array))
		return -EBADMSG;
	n = json_object_array_length(reasons);
	/* check all before printing any, so bad input prints nothing */
	for (size_t i = 0; i < n; i++) {
		json_object *o = json_object_array_get_idx(reasons, i);

		if (!json_object_is_type(o, json_type_object) || !json_get_string(o, "code") ||
		    !json_get_string(o, "text") || !json_get_string(o, "severity"))
			return -EBADMSG;
	}
	for (size_t i = 0; i < n; i++) {
		json_object *o = json_object_array_get_idx(reasons, i);

		if (fprintf(out, "%s%s: %s: %s\n", strempty(prefix), json_get_string(o, "severity"),
		            json_get_string(o, "code"), json_get_string(o, "text")) < 0)
			return -EIO;
	}
	return 0;
}

/* {"<name>": <value>, ..., "reasons": [...]}: the common tail of every decision. */
static int json_finish(json_object *o, const PolicyReasons *r, json_object **ret) {
	json_object *reasons = NULL;
	int k;

	k = policy_reasons_to_json(r, &reasons);
	if (k < 0)
		return k;
	if (json_add_take(o, "reasons", reasons) < 0)
		return -ENOMEM;
	*ret = json_object_get(o);
	return 0;
}

/* ---------- handoff ---------- */

void policy_handoff_decision_done(HandoffDecision *d) {
	if (d)
		policy_reasons_done(&d->reasons);
}

/* " on this ARCH host" and ": WHY", each when known, for the hardware facts' reasons. */
static void hardware_context(const HandoffFacts *f, const char *why, char *buf, size_t size) {
	int n = 0;

	buf[0] = '\0';
	if (f->architecture)
		n = snprintf(buf, size, " on this %s host", f->architecture);
	if (why && n >= 0 && (size_t)n < size)
		snprintf(buf + n, size - (size_t)n, ": %s", why);
}

/* Hardware (x86_64: machine-check; arm64: GHES-reported SEA, SError, RAS) and EDAC
 * memory errors: known and zero, or a reason naming the architecture and, for an
 * unknown count, why. */
static int hardware_conditions(const HandoffFacts *f, PolicyReasonSeverity unknown,
                               PolicyReasons *r) {
	bool arm64 = streq_ptr(f->architecture, "arm64");
	const char *what = arm64 ? "hardware error" : "machine-check error";
	const char *source = arm64 ? " (SEA, SError, RAS through APEI GHES)" : "";
	char ctx[256];

	if (!f->have_mce) {
		hardware_context(f, f->mce_unknown, ctx, sizeof(ctx));
		if (policy_reasons_add(r, "mce-unknown", unknown,
		                       "The %s count%s since boot is unknown%s", what, source,
		                       ctx) < 0)
			return -ENOMEM;
	} else if (f->mce_errors > 0) {
		hardware_context(f, NULL, ctx, sizeof(ctx));
		if (policy_reasons_add(r, "mce-errors", POLICY_REASON_BLOCKING,
		                       "%" PRIu64 " %s%s%s logged since boot%s", f->mce_errors,
		                       what, f->mce_errors == 1 ? "" : "s", source, ctx) < 0)
			return -ENOMEM;
	}
	if (!f->have_edac) {
		hardware_context(f, f->edac_unknown, ctx, sizeof(ctx));
		if (policy_reasons_add(r, "edac-unknown", unknown,
		                       "The EDAC memory error count since boot is unknown%s",
		                       ctx) < 0)
			return -ENOMEM;
	} else if (f->edac_errors > 0) {
		hardware_context(f, NULL, ctx, sizeof(ctx));
		if (policy_reasons_add(r, "memory-errors", POLICY_REASON_BLOCKING,
		                       "%" PRIu64 " memory error%s (EDAC) logged since boot%s",
		                       f->edac_errors, f->edac_errors == 1 ? "" : "s", ctx) < 0)
			return -ENOMEM;
	}
	return 0;
}

/*
 * The safety conditions for skipping purgatory's SHA-256 check. Anything known
 * to be wrong blocks fast in every mode: the image is not the staged one, memory
 * or machine-check errors were logged, devices may DMA into the new kernel, the
 * kernel is tainted. A health fact the daemon could not establish (no EDAC
 * driver, unreadable counters) blocks it under Mode=auto and is only a warning
 * under Mode=fast: the operator vouches for what this host cannot measure.
 */
static int handoff_conditions(const Policy *p, const HandoffFacts *f, PolicyReasons *r) {
	PolicyReasonSeverity unknown = p->mode == POLICY_HANDOFF_MODE_FAST ? POLICY_REASON_WARNING
	                                                                   : POLICY_REASON_BLOCKING;
	uint64_t taint;
	char buf[32];

	if (!p->allow_fast &&
	    policy_reasons_add(
	            r, "fast-not-allowed", POLICY_REASON_BLOCKING,
	            "Fast handoff is not allowed on this host ([Handoff] AllowFast=no)") < 0)
		return -ENOMEM;
	if (!f->digests_at_stage &&
	    policy_reasons_add(r, "no-stage-digests", POLICY_REASON_BLOCKING,
	                       "The segment digests were not computed when the update was staged") <
	            0)
		return -ENOMEM;
	if (!f->files_unchanged &&
	    policy_reasons_add(r, "files-changed", POLICY_REASON_BLOCKING,
	                       "The staged kernel or initrd changed (or could not be re-checked) "
	                       "since staging") < 0)
		return -ENOMEM;
	if (!f->memory_map_unchanged &&
	    policy_reasons_add(r, "memory-map-changed", POLICY_REASON_BLOCKING,
	                       "The memory map changed (or is unknown) since the segments were "
	                       "placed") < 0)
		return -ENOMEM;

	if (hardware_conditions(f, unknown, r) < 0)
		return -ENOMEM;
	if (!f->iommu_enabled &&
	    policy_reasons_add(r, "iommu-off", POLICY_REASON_BLOCKING,
	                       "The IOMMU does not translate every device's DMA (off, or "
	                       "passthrough): a device could write into the new kernel") < 0)
		return -ENOMEM;
	if (!f->have_taint) {
		if (policy_reasons_add(r, "taint-unknown", unknown, "The kernel taint is unknown") <
		    0)
			return -ENOMEM;
	} else {
		taint = f->taint & ~p->allow_taint;
		if (taint != 0 &&
		    policy_reasons_add(r, "taint", POLICY_REASON_BLOCKING,
		                       "The kernel is tainted (%s, value %" PRIu64
		                       "); allow flags with [Handoff] AllowTaint=",
		                       policy_taint_to_string(taint, buf), f->taint) < 0)
			return -ENOMEM;
	}
	return 0;
}

int policy_decide_handoff(const Policy *p, const HandoffFacts *facts, HandoffDecision *ret) {
	HandoffDecision d = {};
	int r;

	if (!p || !facts || !ret)
		return -EINVAL;
	d.mode = p->mode;

	/* 1. The operator asked for verification. */
	if (p->mode == POLICY_HANDOFF_MODE_VERIFIED) {
		d.handoff = HANDOFF_MODE_VERIFIED;
		if (policy_reasons_add(&d.reasons, "mode-verified", POLICY_REASON_INFO,
		                       "[Handoff] Mode=verified") < 0)
			goto oom;
		*ret = d;
		return 0;
	}

	/* 2. fast or auto: fast only when nothing blocks it. */
	r = handoff_conditions(p, facts, &d.reasons);
	if (r < 0)
		goto oom;
	if (reasons_blocking(&d.reasons))
		d.handoff = HANDOFF_MODE_VERIFIED;
	else {
		d.handoff = HANDOFF_MODE_FAST;
		if (policy_reasons_add(
		            &d.reasons,
		            p->mode == POLICY_HANDOFF_MODE_AUTO ? "all-conditions-hold"
		                                                : "mode-fast",
		            POLICY_REASON_INFO,
		            p->mode == POLICY_HANDOFF_MODE_AUTO
		                    ? "Every safety condition for a fast handoff holds"
		                    : "[Handoff] Mode=fast and nothing known blocks it") < 0)
			goto oom;
	}
	*ret = d;
	return 0;
oom:
	policy_handoff_decision_done(&d);
	return -ENOMEM;
}

int policy_handoff_decision_to_json(const HandoffDecision *d, json_object **ret) {
	_cleanup_json_ json_object *o = NULL;

	if (!d || !ret)
		return -EINVAL;
	o = json_object_new_object();
	if (!o ||
	    json_add_take(o, "handoff",
	                  json_object_new_string(handoff_mode_to_string(d->handoff))) < 0 ||
	    json_add_take(o, "mode",
	                  json_object_new_string(policy_handoff_mode_to_string(d->mode))) < 0)
		return -ENOMEM;
	return json_finish(o, &d->reasons, ret);
}

/* ---------- VMs ---------- */

void policy_vm_decision_done(VmDecision *d) {
	if (!d)
		return;
	free(d->name);
	free(d->rule);
	policy_reasons_done(&d->reasons);
	*d = (VmDecision){};
}

static bool metadata_has(const VmFacts *f, const char *pair) {
	const char *eq = strchr(pair, '=');
	size_t klen = (size_t)(eq - pair);

	for (size_t i = 0; i < f->n_metadata; i++) {
		const char *k = f->metadata[i].key, *v = f->metadata[i].value;

		if (k && v && strlen(k) == klen && strncmp(k, pair, klen) == 0 && streq(v, eq + 1))
			return true;
	}
	return false;
}

static bool rule_matches(const PolicyVmRule *rule, const VmFacts *f) {
	if (rule->name_globs) {
		bool any = false;

		STRV_FOREACH (g, rule->name_globs) {
			if (fnmatch(*g, f->name, 0) == 0) {
				any = true;
				break;
			}
		}
		if (!any)
			return false;
	}
	STRV_FOREACH (m, rule->metadata) {
		if (!metadata_has(f, *m))
			return false;
	}
	if (rule->memory_above != UINT64_MAX && !(f->memory_bytes > rule->memory_above))
		return false;
	if (rule->memory_below != UINT64_MAX && !(f->memory_bytes < rule->memory_below))
		return false;
	return true;
}

/* Adds a blocking reason when the strategy cannot be applied to this VM. */
static int vm_refusals(const VmFacts *f, PolicyVmStrategy s, PolicyReasons *r) {
	switch (s) {
	case POLICY_VM_CHECKPOINT:
		if (f->has_hostdev)
			return policy_reasons_add(
			        r, "hostdev-checkpoint", POLICY_REASON_BLOCKING,
			        "VM '%s' has a passed-through host device: its state "
			        "cannot be checkpointed",
			        f->name);
		return 0;
	case POLICY_VM_KEEP_RAM:
		if (!f->memory_preserved)
			return policy_reasons_add(
			        r, "keep-ram-memory-lost", POLICY_REASON_BLOCKING,
			        "VM '%s' cannot keep its RAM across the update: its "
			        "memory does not survive the kexec on this host",
			        f->name);
		if (f->has_hostdev)
			return policy_reasons_add(
			        r, "hostdev-keep-ram", POLICY_REASON_BLOCKING,
			        "VM '%s' has a passed-through host device: the device "
			        "is reset by the new kernel",
			        f->name);
		return 0;
	case POLICY_VM_SHUTDOWN:
		if (!f->persistent)
			return policy_reasons_add(
			        r, "transient-shutdown", POLICY_REASON_BLOCKING,
			        "VM '%s' is transient: once shut down it cannot be "
			        "started again",
			        f->name);
		return 0;
	case POLICY_VM_IGNORE:
		return policy_reasons_add(r, "vm-lost", POLICY_REASON_WARNING,
		                          "VM '%s' is left alone: it stops with the old kernel",
		                          f->name);
	default:
		return -EINVAL;
	}
}

int policy_decide_vm(const Policy *p, const VmFacts *facts, VmDecision *ret) {
	VmDecision d = {};
	const PolicyVmRule *match = NULL;
	int r;

	if (!p || !facts || !facts->name || !ret || (facts->n_metadata > 0 && !facts->metadata))
		return -EINVAL;

	for (size_t i = 0; i < p->n_rules; i++)
		if (rule_matches(&p->rules[i], facts)) {
			match = &p->rules[i];
			break;
		}

	d.name = strdup(facts->name);
	if (!d.name)
		goto oom;
	d.memory_bytes = facts->memory_bytes;
	if (match) {
		d.strategy = match->strategy;
		d.rule = strdup(match->name);
		if (!d.rule ||
		    policy_reasons_add(&d.reasons, "rule", POLICY_REASON_INFO,
		                       "Rule [VMRule:%s] matched VM '%s': %s", match->name,
		                       facts->name, policy_vm_strategy_to_string(d.strategy)) < 0)
			goto oom;
	} else {
		d.strategy = p->default_strategy;
		if (policy_reasons_add(&d.reasons, "default-strategy", POLICY_REASON_INFO,
		                       "No rule matched VM '%s': [VM] DefaultStrategy=%s",
		                       facts->name, policy_vm_strategy_to_string(d.strategy)) < 0)
			goto oom;
	}

	r = vm_refusals(facts, d.strategy, &d.reasons);
	if (r == -ENOMEM)
		goto oom;
	if (r < 0) {
		policy_vm_decision_done(&d);
		return r;
	}
	d.refused = reasons_blocking(&d.reasons);
	*ret = d;
	return 0;
oom:
	policy_vm_decision_done(&d);
	return -ENOMEM;
}

int policy_vm_decision_to_json(const VmDecision *d, json_object **ret) {
	_cleanup_json_ json_object *o = NULL;

	if (!d || !ret)
		return -EINVAL;
	o = json_object_new_object();
	if (!o || json_add_take(o, "name", json_object_new_string(strempty(d->name))) < 0 ||
	    json_add_take(o, "strategy",
	                  json_object_new_string(policy_vm_strategy_to_string(d->strategy))) < 0 ||
	    json_add_take(o, "refused", json_object_new_boolean(d->refused)) < 0 ||
	    json_add_take(o, "memory_bytes", json_object_new_uint64(d->memory_bytes)) < 0)
		return -ENOMEM;
	/* json-c's null is a NULL object */
	if (d->rule ? json_add_take(o, "rule", json_object_new_string(d->rule)) < 0
	            : json_object_object_add(o, "rule", NULL) < 0)
		return -ENOMEM;
	return json_finish(o, &d->reasons, ret);
}

/* ---------- commit ---------- */

void policy_verdict_done(PolicyVerdict *v) {
	if (v)
		policy_reasons_done(&v->reasons);
}

static uint64_t add_sat(uint64_t a, uint64_t b) {
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t margin_of(const Policy *p, uint64_t bytes) {
	if (!p->margin_is_percent)
		return p->free_space_margin;
	/* bytes * pct / 100 without overflow: pct <= 1000 */
	return add_sat((bytes / 100) * p->free_space_margin,
	               (bytes % 100) * p->free_space_margin / 100);
}

static int commit_vms(const Policy *p, const CommitFacts *f, PolicyVerdict *v) {
	uint64_t n_kept = 0, kept_memory = 0;

	for (size_t i = 0; i < f->n_vms; i++) {
		const VmDecision *vm = &f->vms[i];

		if (vm->refused) {
			if (policy_reasons_add(
			            &v->reasons, "vm-refused", POLICY_REASON_BLOCKING,
			            "VM '%s' cannot be handled with strategy %s", strna(vm->name),
			            strna(policy_vm_strategy_to_string(vm->strategy))) < 0)
				return -ENOMEM;
			continue;
		}
		if (vm->strategy == POLICY_VM_CHECKPOINT)
			v->checkpoint_bytes = add_sat(v->checkpoint_bytes, vm->memory_bytes);
		if (vm->strategy == POLICY_VM_CHECKPOINT || vm->strategy == POLICY_VM_KEEP_RAM) {
			n_kept++;
			kept_memory = add_sat(kept_memory, vm->memory_bytes);
		}
	}
	if (p->max_vms != UINT64_MAX && n_kept > p->max_vms &&
	    policy_reasons_add(&v->reasons, "too-many-vms", POLICY_REASON_BLOCKING,
	                       "%" PRIu64 " VMs would be preserved, [Commit] MaxVMs=%" PRIu64,
	                       n_kept, p->max_vms) < 0)
		return -ENOMEM;
	if (p->max_vm_memory != UINT64_MAX && kept_memory > p->max_vm_memory &&
	    policy_reasons_add(&v->reasons, "too-much-vm-memory", POLICY_REASON_BLOCKING,
	                       "%" PRIu64 " bytes of VM memory would be preserved, [Commit] "
	                       "MaxVMMemory=%" PRIu64,
	                       kept_memory, p->max_vm_memory) < 0)
		return -ENOMEM;

	v->required_bytes = add_sat(v->checkpoint_bytes, margin_of(p, v->checkpoint_bytes));
	if (v->checkpoint_bytes == 0)
		return 0;
	if (!f->have_free_space)
		return policy_reasons_add(&v->reasons, "free-space-unknown", POLICY_REASON_BLOCKING,
		                          "The free space in %s is unknown", p->checkpoint_dir);
	if (f->checkpoint_free_bytes < v->required_bytes)
		return policy_reasons_add(&v->reasons, "insufficient-space", POLICY_REASON_BLOCKING,
		                          "Checkpoints need %" PRIu64 " bytes (with margin) in %s, "
		                          "%" PRIu64 " are free",
		                          v->required_bytes, p->checkpoint_dir,
		                          f->checkpoint_free_bytes);
	return 0;
}

int policy_check_commit(const Policy *p, const CommitFacts *facts, PolicyVerdict *ret) {
	PolicyVerdict v = {};

	if (!p || !facts || !ret || (facts->n_vms > 0 && !facts->vms))
		return -EINVAL;

	/* 1. The staged kernel is still what was staged, and still loaded. */
	if (!facts->staged) {
		if (policy_reasons_add(&v.reasons, "not-staged", POLICY_REASON_BLOCKING,
		                       "No update is staged") < 0)
			goto oom;
	} else {
		if (!facts->kernel_loaded &&
		    policy_reasons_add(
		            &v.reasons, "kernel-not-loaded", POLICY_REASON_BLOCKING,
		            "The staged kernel is no longer loaded (kexec_loaded is 0)") < 0)
			goto oom;
		if (!facts->staged_unchanged &&
		    policy_reasons_add(
		            &v.reasons, "staged-changed", POLICY_REASON_BLOCKING,
		            "The staged files were replaced, truncated or rewritten since "
		            "stage time") < 0)
			goto oom;
	}

	/* 2. VMs: refusals, limits, checkpoint space. */
	if (commit_vms(p, facts, &v) < 0)
		goto oom;

	/* 3. Maintenance window. */
	if (p->window.set) {
		if (!facts->have_time) {
			if (policy_reasons_add(&v.reasons, "time-unknown", POLICY_REASON_BLOCKING,
			                       "The local time is unknown: cannot check [Commit] "
			                       "MaintenanceWindow=") < 0)
				goto oom;
		} else if (!policy_window_contains(
		                   &p->window, facts->now.tm_wday,
		                   (unsigned)(facts->now.tm_hour * 60 + facts->now.tm_min)) &&
		           policy_reasons_add(&v.reasons, "outside-window", POLICY_REASON_BLOCKING,
		                              "%02d:%02d (weekday %d) is outside [Commit] "
		                              "MaintenanceWindow=",
		                              facts->now.tm_hour, facts->now.tm_min,
		                              facts->now.tm_wday) < 0)
			goto oom;
	}

	v.allowed = !reasons_blocking(&v.reasons);
	if (v.allowed && policy_reasons_add(&v.reasons, "preconditions-met", POLICY_REASON_INFO,
	                                    "Every commit precondition holds") < 0)
		goto oom;
	*ret = v;
	return 0;
oom:
	policy_verdict_done(&v);
	return -ENOMEM;
}

int policy_verdict_to_json(const PolicyVerdict *v, json_object **ret) {
	_cleanup_json_ json_object *o = NULL;

	if (!v || !ret)
		return -EINVAL;
	o = json_object_new_object();
	if (!o || json_add_take(o, "allowed", json_object_new_boolean(v->allowed)) < 0 ||
	    json_add_take(o, "checkpoint_bytes", json_object_new_uint64(v->checkpoint_bytes)) < 0 ||
	    json_add_take(o, "required_bytes", json_object_new_uint64(v->required_bytes)) < 0)
		return -ENOMEM;
	return json_finish(o, &v->reasons, ret);
}
