/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The VM steps the state machine runs (HookFunc): checkpoint before the handoff, rollback
 * when the commit fails, restore on the new kernel; each VM's progress and result go into
 * the update record (Update.vms) as they come.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libvirt/libvirt.h>

#include "json-util.h"
#include "job.h"
#include "measure.h"
#include "log.h"
#include "log-ids.h"
#include "string-util.h"
#include "vm.h"
#include "vm-steps.h"
#include "vm-steps-internal.h"
#include "vm-transfers.h"
#include "keep-ram.h"
#include "vm-steps-kept.h"

/* ---- per-VM progress and records ---- */

typedef struct Progress {
	Context *context;
	Update *update;
	VmWiring *wiring;
	bool restore;
} Progress;

/* The journal's MESSAGE_ID of a VM outcome an operator looks for (log-ids.h); NULL for the
 * steps in between (paused, saving, restoring). */
static const char *vm_outcome_mid(VmOutcome o) {
	switch (o) {
	case VM_OUTCOME_SAVED:
	case VM_OUTCOME_SHUT_DOWN:
		return LOG_MID_VM_SAVED;
	case VM_OUTCOME_RESUMED:
	case VM_OUTCOME_RESTORED:
	case VM_OUTCOME_ROLLED_BACK:
		return LOG_MID_VM_RESTORED;
	case VM_OUTCOME_FAILED:
		return LOG_MID_VM_FAILED;
	default:
		return NULL;
	}
}

/* Replaces (or appends) the record of r->name in u->vms and tells the bus. Runs on the
 * thread that called the VM library, with the state lock released (a job's worker): takes
 * it for the update. */
static void on_vm_progress(const VmResult *r, void *userdata) {
	Progress *p = userdata;
	VmResults one = { .items = (VmResult *)r, .n = 1 };
	_cleanup_(json_object_putp) json_object *arr = vm_results_to_json(&one);
	json_object *rec;
	size_t n;

	/* The journal says what happened to each VM, as it happens: pause, save, restore. */
	log_event(r->outcome == VM_OUTCOME_FAILED ? LOG_WARNING : LOG_INFO,
	          vm_outcome_mid(r->outcome), p->update->id, "VM %s (%s): %s%s%s", strna(r->name),
	          strna(vm_strategy_to_string(r->strategy)),
	          strna(vm_outcome_to_string(r->outcome)), r->error ? ": " : "",
	          strempty(r->error));
	if (p->wiring->measure)
		(void)measure_vm_outcome(p->wiring->measure, r->name,
		                         vm_outcome_to_string(r->outcome));
	if (!arr || json_object_array_length(arr) != 1)
		return;
	if (job_blocking_end() < 0)
		goto out; /* abandoned: the update is not ours any more */
	vm_transfers_result(p->wiring->transfers, p->update->id, r, p->restore);
	rec = json_object_get(json_object_array_get_idx(arr, 0));
	if (!p->update->vms)
		p->update->vms = json_object_new_array();
	if (!p->update->vms) {
		json_object_put(rec);
		goto out;
	}
	n = json_object_array_length(p->update->vms);
	for (size_t i = 0; i <= n; i++) {
		json_object *e = json_object_array_get_idx(p->update->vms, i), *name;

		if (i == n)
			json_object_array_add(p->update->vms, rec);
		else if (json_object_object_get_ex(e, "name", &name) &&
		         streq_ptr(json_object_get_string(name), r->name))
			json_object_array_put_idx(p->update->vms, i, rec);
		else
			continue;
		break;
	}
	context_notify(p->context, p->update);
out:
	job_blocking_begin();
}

/* plan.on_bytes: how far a save or restore got (same thread and lock rules). */
static void on_vm_bytes(const char *name, uint64_t done, uint64_t total, void *userdata) {
	Progress *p = userdata;

	if (job_blocking_end() >= 0) {
		vm_transfers_bytes(p->wiring->transfers, p->update->id, name, p->restore, done,
		                   total);
		context_notify(p->context, p->update);
	}
	job_blocking_begin();
}

/* Writes results into u->vms and persists the record before the step returns. */
int vms_store_results(Context *c, Update *u, const VmResults *res) {
	json_object *j = vm_results_to_json(res);

	if (!j)
		return -ENOMEM;
	json_object_put(u->vms);
	u->vms = j;
	return context_save(c, u);
}

static VmStrategy strategy_of(json_object *dec) {
	json_object *s;

	if (!json_object_object_get_ex(dec, "strategy", &s))
		return _VM_STRATEGY_INVALID;
	return vm_strategy_from_string(json_object_get_string(s));
}

static bool dec_bool(json_object *dec, const char *key) {
	json_object *b;

	return json_object_object_get_ex(dec, key, &b) && json_object_get_boolean(b);
}

const char *vms_dec_str(json_object *dec, const char *key) {
	json_object *s;

	return json_object_object_get_ex(dec, key, &s) ? json_object_get_string(s) : NULL;
}

json_object *vms_decided(const Update *u) {
	json_object *a;

	if (!u->decisions || !json_object_object_get_ex(u->decisions, "vms", &a) ||
	    !json_object_is_type(a, json_type_array))
		return NULL;
	return a;
}

/* The results a commit interrupted inside vm_checkpoint_all() would have had: every
 * active VM the policy decided to touch, in the state the decision saw. vm_rollback()
 * decides from each domain's current state, so this is enough to give them back. */
static int results_from_decisions(const Update *u, VmResults **ret) {
	json_object *a = vms_decided(u);
	VmResults *res;
	size_t n = a ? json_object_array_length(a) : 0;

	res = calloc(1, sizeof(*res));
	if (!res)
		return -ENOMEM;
	res->items = calloc(n ?: 1, sizeof(VmResult));
	if (!res->items) {
		free(res);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		json_object *dec = json_object_array_get_idx(a, i), *code;
		VmStrategy s = strategy_of(dec);
		VmResult *v = &res->items[res->n];
		const char *uuid = vms_dec_str(dec, "uuid");

		if (!dec_bool(dec, "active") || s < 0 || s == VM_STRATEGY_IGNORE || !uuid ||
		    strlen(uuid) >= sizeof(v->uuid))
			continue;
		*v = (VmResult){ .strategy = s,
			         .outcome = s == VM_STRATEGY_CHECKPOINT || s == VM_STRATEGY_KEEP_RAM
			                            ? VM_OUTCOME_SAVING
			                            : VM_OUTCOME_SHUTTING_DOWN,
			         .saved_bytes = -1 };
		v->name = strdup(strempty(vms_dec_str(dec, "name")));
		if (!v->name) {
			vm_results_free(res);
			return -ENOMEM;
		}
		strcpy(v->uuid, uuid);
		v->orig_state = json_object_object_get_ex(dec, "state_code", &code)
		                        ? json_object_get_int(code)
		                        : VIR_DOMAIN_RUNNING;
		res->n++;
	}
	*ret = res;
	return 0;
}

static int reason_from_results(const VmResults *res, const char *what, char **ret) {
	_cleanup_free_ char *text = NULL;

	/* The VMs that failed on their own first; "rolled back: ..." only repeats them. */
	for (int pass = 0; pass < 2 && !text; pass++)
		for (size_t i = 0; i < res->n; i++) {
			const VmResult *v = &res->items[i];

			if (!v->error || (pass == 0 && strncmp(v->error, "rolled back", 11) == 0))
				continue;
			if (vms_append_text(&text, "VM '%s': %s", v->name, v->error) < 0)
				return -ENOMEM;
		}
	if (asprintf(ret, "%s: %s", what, text ?: "see the per-VM results") < 0)
		return -ENOMEM;
	return 0;
}

/* Back under the state lock after vm_rollback() or vm_restore_all() returned r: persists the
 * results, and when r failed says which VMs failed and why, after what. */
static int finish_results(Context *c, Update *u, const VmResults *res, int r, const char *what,
                          char **ret_reason) {
	int s;

	s = job_blocking_end();
	if (s < 0)
		return s;
	s = vms_store_results(c, u, res);
	if (s == -ECANCELED)
		return s;
	if (r < 0) {
		if (reason_from_results(res, what, ret_reason) < 0)
			*ret_reason = NULL;
		return r;
	}
	return s < 0 ? s : 0;
}

static void plan_from_policy(Context *c, VmWiring *w, VmPlan *plan) {
	const Policy *p = context_policy(c);

	*plan = (VmPlan){ .on_event = vms_on_vm_event,
		          .event_userdata = w,
		          .on_bytes = on_vm_bytes,
		          .cancel = job_cancel_flag(job_current()) };
	if (p) {
		plan->parallel = p->save_parallel;
		plan->shutdown_timeout_usec = p->shutdown_timeout_usec;
		plan->pause_timeout_usec = p->pause_timeout_usec;
		plan->no_clock_sync = !p->sync_guest_clock;
	}
}

/* ---- the steps (HookFunc) ---- */

/* The plan's entries from u's decisions: every domain with a strategy (inactive ones too: the
 * library records them as ignored). The names point into u->decisions. */
static int plan_entries(const Update *u, VmPlanEntry **ret, size_t *ret_n) {
	json_object *a = vms_decided(u);
	size_t n = a ? json_object_array_length(a) : 0, k = 0;
	VmPlanEntry *e;

	e = calloc(n ?: 1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		json_object *dec = json_object_array_get_idx(a, i);

		/* Inactive domains too: the library records them as ignored. */
		if (strategy_of(dec) < 0)
			continue;
		e[k++] = (VmPlanEntry){ .name = vms_dec_str(dec, "name"),
			                .strategy = strategy_of(dec) };
	}
	*ret = e;
	*ret_n = k;
	return 0;
}

/* PRE_HANDOFF: pause all, checkpoint in parallel with the decided strategies. On
 * failure vm_checkpoint_all() has already given every VM back. */
int vms_hook_checkpoint(Context *c, Update *u, void *userdata, char **ret_reason) {
	VmWiring *w = userdata;
	_cleanup_conn_ virConnectPtr conn = NULL;
	_cleanup_(vm_results_freep) VmResults *res = NULL;
	_cleanup_free_ VmPlanEntry *e = NULL;
	Progress prog = { .context = c, .update = u, .wiring = w };
	_cleanup_(vms_kept_check_done) VmsKeptCheck kept = {};
	size_t k = 0;
	VmPlan plan;
	int r, s;

	r = plan_entries(u, &e, &k);
	if (r < 0)
		return r;
	if (k == 0)
		return 0;

	r = vms_connect_unlocked(w, &conn, ret_reason);
	if (r < 0)
		return r;
	/* A mark on disk before the first pause: a crash from here on finds "vms": [] and
	 * the rollback step gives back every VM the decisions named. */
	if (!u->vms) {
		u->vms = json_object_new_array();
		if (!u->vms)
			return -ENOMEM;
		r = context_save(c, u);
		if (r < 0)
			return r;
	}
	plan_from_policy(c, w, &plan);
	plan.entries = e;
	plan.n_entries = k;
	/* keep-ram: our paths under --root, the update id in each generation mark; libvirt's
	 * memory_backing_dir from its qemu.conf; a VM that cannot keep its RAM is checkpointed
	 * (the reason goes into its record) unless [VM] KeepRamFallback=none. */
	KeepRamConfig keep_ram = { .root = context_root(c),
		                   .update_id = u->id,
		                   .fallback_checkpoint = !context_policy(c) ||
		                                          context_policy(c)->keep_ram_fallback };
	if (context_policy(c))
		keep_ram.digest = keep_ram_digest_mode_from_string(
		        policy_keep_ram_digest_to_string(context_policy(c)->keep_ram_digest));
	/* Each keep-ram VM's RAM file must lie on the kept, DAX-mounted memory. */
	r = vms_kept_check_setup(c, u, &kept, &keep_ram);
	if (r < 0)
		return r;
	plan.keep_ram = &keep_ram;
	vms_measure_track(w, e, k);
	/* The saves run off the state lock: Describe, Cancel and the properties answer
	 * meanwhile; the progress callbacks take the lock for each change. */
	job_blocking_begin();
	r = vm_checkpoint_all(conn, &plan, on_vm_progress, &prog, &res);
	s = job_blocking_end();
	if (s < 0)
		return s;
	if (res) {
		s = vms_store_results(c, u, res);
		if (s == -ECANCELED)
			return s;
		if (s < 0 && r >= 0) {
			*ret_reason = strdup("cannot persist the VM checkpoint results");
			return s;
		}
	}
	if (r == -EINTR) {
		*ret_reason = strdup("cancelled during the VM checkpoint, every VM was resumed");
		return r;
	}
	if (r < 0) {
		if (!res || reason_from_results(res, "VM checkpoint failed, every VM was resumed",
		                                ret_reason) < 0)
			*ret_reason = strdup("VM checkpoint failed, every VM was resumed");
		return r;
	}
	/* The saved images on disk before this step is marked done: if the kernel
	 * panics from here on, the crash kernel hands over to the staged kernel,
	 * which restores them (docs/state-machine.md, "The panic path"). The sync
	 * after the handoff record then has little left to write. */
	job_blocking_begin();
	sync();
	return job_blocking_end();
}

static bool needs_rollback(const VmResults *res) {
	for (size_t i = 0; i < res->n; i++)
		switch (res->items[i].outcome) {
		case VM_OUTCOME_PENDING:
		case VM_OUTCOME_IGNORED:
		case VM_OUTCOME_ROLLED_BACK:
			break;
		default:
			return true;
		}
	return false;
}

/* ROLLBACK: every VM back as it was. Idempotent; also after a crash inside the
 * checkpoint, when only the decisions and the empty mark were on disk. */
int vms_hook_rollback(Context *c, Update *u, void *userdata, char **ret_reason) {
	VmWiring *w = userdata;
	_cleanup_conn_ virConnectPtr conn = NULL;
	_cleanup_(vm_results_freep) VmResults *res = NULL;
	Progress prog = { .context = c, .update = u, .wiring = w };
	int r;

	if (!u->vms)
		return 0; /* the checkpoint never started: no VM was touched */
	if (json_object_array_length(u->vms) > 0)
		r = vm_results_from_json(u->vms, &res);
	else
		r = results_from_decisions(u, &res);
	if (r < 0) {
		*ret_reason = strdup("the VM results in the update record are unreadable");
		return r;
	}
	if (!needs_rollback(res))
		return 0;
	/* Giving the VMs back waits for libvirt as the restore does: a rollback may run at the
	 * daemon's start (a commit a crash interrupted, a handoff that booted the old kernel),
	 * while libvirtd still starts. */
	r = vms_connect_wait(w, vm_libvirt_wait(), &conn, ret_reason);
	if (r < 0)
		return r;
	job_blocking_begin();
	r = vm_rollback(conn, res, u->error ?: "the commit failed", on_vm_progress, &prog);
	return finish_results(c, u, res, r, "VM rollback incomplete", ret_reason);
}

/* Whether the restore already stamped libvirt's answer in this boot: each stamp is taken once
 * per boot, the first answer (docs/report.md). */
static bool answered_in_boot(const Update *u, const char *boot_id) {
	for (size_t i = 0; i < u->n_stamps; i++)
		if (streq(u->stamps[i].name, "libvirt-answered") &&
		    streq_ptr(u->stamps[i].boot_id, boot_id))
			return true;
	return false;
}

/* POST_BOOT: restore every checkpointed VM; a failed one keeps its image. */
int vms_hook_restore(Context *c, Update *u, void *userdata, char **ret_reason) {
	VmWiring *w = userdata;
	_cleanup_conn_ virConnectPtr conn = NULL;
	_cleanup_(vm_results_freep) VmResults *res = NULL;
	Progress prog = { .context = c, .update = u, .wiring = w, .restore = true };
	VmPlan plan;
	int r;

	if (!u->vms)
		return 0;
	r = vm_results_from_json(u->vms, &res);
	if (r < 0) {
		*ret_reason = strdup("the VM results in the handoff record are unreadable");
		return r;
	}
	/* libvirtd may not answer yet: the restore waits for it, then starts. The stamp splits
	 * the report's post-boot phase (docs/report.md). */
	r = vms_connect_wait(w, vm_libvirt_wait(), &conn, ret_reason);
	if (r < 0)
		return r;
	if (!answered_in_boot(u, context_boot_id(c))) /* a restarted daemon restores again */
		(void)update_add_stamp(u, "libvirt-answered", false, context_boot_id(c));
	plan_from_policy(c, w, &plan);
	plan.cancel = NULL; /* after the handoff nothing is cancelled */
	job_blocking_begin();
	r = vm_restore_all(conn, &plan, res, on_vm_progress, &prog);
	return finish_results(c, u, res, r,
	                      "VM restore failed, the saved state is kept (retry with upgradectl "
	                      "restore-vm NAME)",
	                      ret_reason);
}
