/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * VM inventory, per-VM records and their JSON form. The orchestration lives in vm-checkpoint.c,
 * vm-rollback.c and vm-restore.c, on the worker threads of vm-orchestrate.c.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "vm.h"
#include "vm-internal.h"
#include "keep-ram.h"
#include "macros.h"

static const char *const strategy_table[_VM_STRATEGY_MAX] = {
	[VM_STRATEGY_CHECKPOINT] = "checkpoint",
	[VM_STRATEGY_KEEP_RAM] = "keep-ram",
	[VM_STRATEGY_SHUTDOWN] = "shutdown",
	[VM_STRATEGY_IGNORE] = "ignore",
};

static const char *const outcome_table[_VM_OUTCOME_MAX] = {
	[VM_OUTCOME_PENDING] = "pending",
	[VM_OUTCOME_PAUSED] = "paused",
	[VM_OUTCOME_SAVING] = "saving",
	[VM_OUTCOME_SAVED] = "saved",
	[VM_OUTCOME_SHUTTING_DOWN] = "shutting-down",
	[VM_OUTCOME_SHUT_DOWN] = "shut-down",
	[VM_OUTCOME_IGNORED] = "ignored",
	[VM_OUTCOME_ROLLED_BACK] = "rolled-back",
	[VM_OUTCOME_RESTORING] = "restoring",
	[VM_OUTCOME_RESUMED] = "resumed",
	[VM_OUTCOME_RESTORED] = "restored",
	[VM_OUTCOME_FAILED] = "failed",
};

static const char *const event_table[_VM_EVENT_MAX] = {
	[VM_EVENT_PAUSING] = "pausing",   [VM_EVENT_PAUSED] = "paused",
	[VM_EVENT_RESTORED] = "restored", [VM_EVENT_RESUMING] = "resuming",
	[VM_EVENT_RESUMED] = "resumed",
};

#define VM_DOMAIN_STATE_MAX (VIR_DOMAIN_PMSUSPENDED + 1)

static const char *const state_table[VM_DOMAIN_STATE_MAX] = {
	[VIR_DOMAIN_NOSTATE] = "nostate",   [VIR_DOMAIN_RUNNING] = "running",
	[VIR_DOMAIN_BLOCKED] = "blocked",   [VIR_DOMAIN_PAUSED] = "paused",
	[VIR_DOMAIN_SHUTDOWN] = "shutdown", [VIR_DOMAIN_SHUTOFF] = "shutoff",
	[VIR_DOMAIN_CRASHED] = "crashed",   [VIR_DOMAIN_PMSUSPENDED] = "pmsuspended",
};

static const VmOps default_ops = {
	.connect_open = virConnectOpen,
	.suspend = virDomainSuspend,
	.resume = virDomainResume,
	.managed_save = virDomainManagedSave,
	.managed_save_remove = virDomainManagedSaveRemove,
	.has_managed_save = virDomainHasManagedSaveImage,
	.create = virDomainCreateWithFlags,
	.shutdown = virDomainShutdown,
	.abort_job = virDomainAbortJob,
	.get_state = virDomainGetState,
};

const VmOps *vm_ops = &default_ops;

const VmOps *vm_ops_default(void) {
	return &default_ops;
}

void vm_set_ops(const VmOps *ops) {
	vm_ops = ops ?: &default_ops;
}

usec_t vm_connect_retry_usec = VM_CONNECT_RETRY_DEFAULT;

void vm_set_connect_retry(usec_t usec) {
	vm_connect_retry_usec = usec;
}

static int lookup_table(const char *const *table, int n, const char *s) {
	if (!s)
		return -EINVAL;
	for (int i = 0; i < n; i++)
		if (table[i] && streq(table[i], s))
			return i;
	return -EINVAL;
}

const char *vm_strategy_to_string(VmStrategy s) {
	return s >= 0 && s < _VM_STRATEGY_MAX ? strategy_table[s] : NULL;
}

VmStrategy vm_strategy_from_string(const char *s) {
	return (VmStrategy)lookup_table(strategy_table, _VM_STRATEGY_MAX, s);
}

const char *vm_outcome_to_string(VmOutcome o) {
	return o >= 0 && o < _VM_OUTCOME_MAX ? outcome_table[o] : NULL;
}

VmOutcome vm_outcome_from_string(const char *s) {
	return (VmOutcome)lookup_table(outcome_table, _VM_OUTCOME_MAX, s);
}

const char *vm_event_to_string(VmEvent e) {
	return e >= 0 && e < _VM_EVENT_MAX ? event_table[e] : NULL;
}

const char *vm_state_to_string(int state) {
	return state >= 0 && state < VM_DOMAIN_STATE_MAX ? state_table[state] : NULL;
}

int vm_state_from_string(const char *s) {
	return lookup_table(state_table, VM_DOMAIN_STATE_MAX, s);
}

usec_t vm_now(clockid_t clock) {
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (usec_t)ts.tv_sec * 1000000ULL + (usec_t)ts.tv_nsec / 1000ULL;
}

const char *vm_last_error(void) {
	/* libvirt keeps the last error per thread; "unknown error" when there is none. */
	return virGetLastErrorMessage();
}

/* Replaces r->error with a formatted message. */
void vm_result_set_error(VmResult *r, const char *fmt, ...) {
	va_list ap;
	char *s = NULL;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	free(r->error);
	r->error = s ?: strdup("out of memory");
}

static void vm_info_done(VmInfo *i) {
	free(i->name);
	free(i->checkpoint_blocker);
}

void vm_list_free(VmList *l) {
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		vm_info_done(&l->vms[i]);
	free(l->vms);
	free(l);
}

static void vm_result_done(VmResult *r) {
	free(r->name);
	free(r->error);
	free(r->clock_sync_reason);
	kept_ram_free(r->kept_ram);
}

void vm_results_free(VmResults *r) {
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++)
		vm_result_done(&r->items[i]);
	free(r->items);
	free(r);
}

VmResults *vm_results_new(size_t n) {
	VmResults *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->items = calloc(n ?: 1, sizeof(VmResult));
	if (!r->items) {
		free(r);
		return NULL;
	}
	r->n = n;
	for (size_t i = 0; i < n; i++)
		r->items[i].saved_bytes = -1;
	return r;
}

const VmInfo *vm_list_find(const VmList *l, const char *name) {
	if (!l || !name)
		return NULL;
	for (size_t i = 0; i < l->n; i++)
		if (streq(l->vms[i].name, name))
			return &l->vms[i];
	return NULL;
}

const VmResult *vm_results_find(const VmResults *r, const char *name) {
	if (!r || !name)
		return NULL;
	for (size_t i = 0; i < r->n; i++)
		if (streq_ptr(r->items[i].name, name))
			return &r->items[i];
	return NULL;
}

usec_t vm_result_downtime(const VmResult *r) {
	if (!r->paused_at || !r->resumed_at || r->resumed_at < r->paused_at)
		return 0;
	return r->resumed_at - r->paused_at;
}

/*
 * Why a managed save cannot preserve this domain, or NULL. Scans the live XML for the devices
 * QEMU refuses to migrate (a managed save is a migration to a file). Element names are matched
 * as "<name": libvirt escapes '<' in text and attributes, so that only matches markup; foreign
 * metadata uses prefixed names. libvirt's own error at save time stays the final word.
 */
char *vm_checkpoint_blocker(virDomainPtr dom) {
	static const struct {
		const char *needle;
		const char *reason;
	} blockers[] = {
		{ "<hostdev", "host device passed through (<hostdev>)" },
		{ "<shmem", "shared memory device (<shmem>) cannot be migrated" },
		{ "name='invtsc'", "invariant TSC (invtsc) pins the domain to this host" },
	};
	_cleanup_free_ char *xml = NULL;
	int persistent;

	persistent = virDomainIsPersistent(dom);
	if (persistent == 0)
		return strdup("transient domain (a managed save needs a persistent definition)");
	xml = virDomainGetXMLDesc(dom, 0);
	if (persistent < 0 || !xml) {
		char *s = NULL;
		if (asprintf(&s, "cannot read the domain: %s", vm_last_error()) < 0)
			return NULL;
		return s;
	}
	for (size_t i = 0; i < ELEMENTSOF(blockers); i++)
		if (strstr(xml, blockers[i].needle))
			return strdup(blockers[i].reason);
	return NULL;
}

static int vm_info_fill(virDomainPtr dom, VmInfo *ret) {
	virDomainInfo info;
	VmInfo i = {};
	const char *name;
	int autostart = 0;

	name = virDomainGetName(dom);
	if (!name || virDomainGetUUIDString(dom, i.uuid) < 0 || virDomainGetInfo(dom, &info) < 0)
		return -EIO;
	i.name = strdup(name);
	if (!i.name)
		return -ENOMEM;
	i.state = info.state;
	i.active = virDomainIsActive(dom) == 1;
	i.persistent = virDomainIsPersistent(dom) == 1;
	if (i.persistent && virDomainGetAutostart(dom, &autostart) == 0)
		i.autostart = autostart;
	i.has_managed_save = i.persistent && virDomainHasManagedSaveImage(dom, 0) == 1;
	i.memory_kib = info.memory;
	i.vcpus = info.nrVirtCpu;
	i.checkpoint_blocker = vm_checkpoint_blocker(dom);
	i.checkpoint_possible = !i.checkpoint_blocker;
	*ret = i;
	return 0;
}

int vm_inventory(virConnectPtr conn, VmList **ret_list) {
	virDomainPtr *doms = NULL;
	VmList *l;
	int n, r = 0;

	if (!conn || !ret_list)
		return -EINVAL;
	n = virConnectListAllDomains(conn, &doms, 0);
	if (n < 0)
		return -EIO;
	l = calloc(1, sizeof(*l));
	if (l)
		l->vms = calloc(n ?: 1, sizeof(VmInfo));
	if (!l || !l->vms)
		r = -ENOMEM;
	for (int i = 0; i < n; i++) {
		if (r == 0) {
			/* A domain undefined while we list it is simply not in the inventory. */
			int k = vm_info_fill(doms[i], &l->vms[l->n]);
			if (k == 0)
				l->n++;
			else if (k == -ENOMEM)
				r = k;
		}
		virDomainFree(doms[i]);
	}
	free(doms);
	if (r < 0) {
		vm_list_free(l);
		return r;
	}
	*ret_list = l;
	return 0;
}

struct json_object *vm_list_to_json(const VmList *l) {
	struct json_object *a = json_object_new_array();

	for (size_t i = 0; a && l && i < l->n; i++) {
		const VmInfo *v = &l->vms[i];
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "name", json_object_new_string(v->name));
		json_object_object_add(o, "uuid", json_object_new_string(v->uuid));
		json_object_object_add(o, "state",
		                       json_object_new_string(strna(vm_state_to_string(v->state))));
		json_object_object_add(o, "persistent", json_object_new_boolean(v->persistent));
		json_object_object_add(o, "autostart", json_object_new_boolean(v->autostart));
		json_object_object_add(o, "memory_kib",
		                       json_object_new_int64((int64_t)v->memory_kib));
		json_object_object_add(o, "vcpus", json_object_new_int((int)v->vcpus));
		json_object_object_add(o, "has_managed_save",
		                       json_object_new_boolean(v->has_managed_save));
		json_object_object_add(o, "checkpoint_possible",
		                       json_object_new_boolean(v->checkpoint_possible));
		json_object_object_add(o, "checkpoint_blocker",
		                       v->checkpoint_blocker
		                               ? json_object_new_string(v->checkpoint_blocker)
		                               : NULL);
		json_object_array_add(a, o);
	}
	return a;
}

static struct json_object *usec_or_null(usec_t u) {
	return u ? json_object_new_int64((int64_t)u) : NULL;
}

/* The VM's "clock_sync" object (vm-clock.c), none before the restore tried. */
static void clock_sync_to_json(const VmResult *r, struct json_object *o) {
	struct json_object *c;

	if (r->clock_sync == VM_CLOCK_SYNC_NONE)
		return;
	c = json_object_new_object();
	json_object_object_add(c, "synced",
	                       json_object_new_boolean(r->clock_sync == VM_CLOCK_SYNC_DONE));
	json_object_object_add(
	        c, "synced_at",
	        r->clock_synced_at ? json_object_new_int64((int64_t)r->clock_synced_at) : NULL);
	json_object_object_add(
	        c, "sync_time",
	        r->clock_sync_time ? json_object_new_int64((int64_t)r->clock_sync_time) : NULL);
	json_object_object_add(
	        c, "behind", r->clock_behind_known ? json_object_new_int64(r->clock_behind) : NULL);
	json_object_object_add(c, "reason",
	                       r->clock_sync_reason ? json_object_new_string(r->clock_sync_reason)
	                                            : NULL);
	json_object_object_add(o, "clock_sync", c);
}

struct json_object *vm_results_to_json(const VmResults *r) {
	struct json_object *a = json_object_new_array();

	for (size_t i = 0; a && r && i < r->n; i++) {
		const VmResult *v = &r->items[i];
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "name", json_object_new_string(strempty(v->name)));
		json_object_object_add(o, "uuid", json_object_new_string(v->uuid));
		json_object_object_add(
		        o, "strategy",
		        json_object_new_string(strna(vm_strategy_to_string(v->strategy))));
		json_object_object_add(
		        o, "result",
		        json_object_new_string(strna(vm_outcome_to_string(v->outcome))));
		json_object_object_add(
		        o, "original_state",
		        json_object_new_string(strna(vm_state_to_string(v->orig_state))));
		json_object_object_add(o, "paused_at", usec_or_null(v->paused_at));
		json_object_object_add(o, "saved_at", usec_or_null(v->save_finished_at));
		json_object_object_add(o, "saved_bytes",
		                       v->saved_bytes >= 0 ? json_object_new_int64(v->saved_bytes)
		                                           : NULL);
		json_object_object_add(o, "save_time", usec_or_null(v->save_time));
		json_object_object_add(o, "restore_time", usec_or_null(v->restore_time));
		json_object_object_add(o, "resumed_at", usec_or_null(v->resumed_at));
		json_object_object_add(o, "downtime", usec_or_null(vm_result_downtime(v)));
		json_object_object_add(o, "error",
		                       v->error ? json_object_new_string(v->error) : NULL);
		kept_ram_add_json(v->kept_ram, o);
		clock_sync_to_json(v, o);
		json_object_array_add(a, o);
	}
	return a;
}

/* Reads an optional non-negative integer field; missing or null is 0. */
static int json_get_usec(struct json_object *o, const char *key, usec_t *ret) {
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !v) {
		*ret = 0;
		return 0;
	}
	if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0)
		return -EBADMSG;
	*ret = (usec_t)json_object_get_int64(v);
	return 0;
}

static int json_get_string(struct json_object *o, const char *key, bool required,
                           const char **ret) {
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !v) {
		*ret = NULL;
		return required ? -EBADMSG : 0;
	}
	if (!json_object_is_type(v, json_type_string))
		return -EBADMSG;
	*ret = json_object_get_string(v);
	return 0;
}

static int clock_sync_from_json(struct json_object *o, VmResult *r) {
	struct json_object *c, *synced, *reason, *behind;

	if (!json_object_object_get_ex(o, "clock_sync", &c) || !c)
		return 0;
	if (!json_object_is_type(c, json_type_object) ||
	    !json_object_object_get_ex(c, "synced", &synced) ||
	    !json_object_is_type(synced, json_type_boolean) ||
	    json_get_usec(c, "synced_at", &r->clock_synced_at) < 0 ||
	    json_get_usec(c, "sync_time", &r->clock_sync_time) < 0)
		return -EBADMSG;
	r->clock_sync = json_object_get_boolean(synced) ? VM_CLOCK_SYNC_DONE : VM_CLOCK_SYNC_FAILED;
	if (json_object_object_get_ex(c, "behind", &behind) && behind) {
		if (!json_object_is_type(behind, json_type_int))
			return -EBADMSG;
		r->clock_behind = json_object_get_int64(behind);
		r->clock_behind_known = true;
	}
	if (json_object_object_get_ex(c, "reason", &reason) && reason) {
		if (!json_object_is_type(reason, json_type_string))
			return -EBADMSG;
		r->clock_sync_reason = strdup(json_object_get_string(reason));
		if (!r->clock_sync_reason)
			return -ENOMEM;
	}
	return 0;
}

static int vm_result_from_json(struct json_object *o, VmResult *v) {
	const char *name, *uuid, *strategy, *result, *state, *error;
	usec_t bytes = 0, saved_at;
	struct json_object *b;
	int k;

	if (!json_object_is_type(o, json_type_object))
		return -EBADMSG;
	if (json_get_string(o, "name", true, &name) < 0 || !*name ||
	    json_get_string(o, "uuid", true, &uuid) < 0 ||
	    strlen(uuid) != VIR_UUID_STRING_BUFLEN - 1 ||
	    json_get_string(o, "strategy", true, &strategy) < 0 ||
	    json_get_string(o, "result", true, &result) < 0 ||
	    json_get_string(o, "original_state", true, &state) < 0 ||
	    json_get_string(o, "error", false, &error) < 0)
		return -EBADMSG;
	v->strategy = vm_strategy_from_string(strategy);
	v->outcome = vm_outcome_from_string(result);
	k = vm_state_from_string(state);
	if (v->strategy < 0 || v->outcome < 0 || k < 0)
		return -EBADMSG;
	v->orig_state = k;
	if (json_get_usec(o, "paused_at", &v->paused_at) < 0 ||
	    json_get_usec(o, "saved_at", &saved_at) < 0 ||
	    json_get_usec(o, "save_time", &v->save_time) < 0 ||
	    json_get_usec(o, "restore_time", &v->restore_time) < 0 ||
	    json_get_usec(o, "resumed_at", &v->resumed_at) < 0)
		return -EBADMSG;
	v->save_finished_at = saved_at;
	v->saved_bytes = -1;
	if (json_object_object_get_ex(o, "saved_bytes", &b) && b) {
		if (json_get_usec(o, "saved_bytes", &bytes) < 0)
			return -EBADMSG;
		v->saved_bytes = (int64_t)bytes;
	}
	k = kept_ram_from_vm_json(o, &v->kept_ram);
	if (k < 0)
		return k;
	memcpy(v->uuid, uuid, VIR_UUID_STRING_BUFLEN);
	v->name = strdup(name);
	if (error)
		v->error = strdup(error);
	if (!v->name || (error && !v->error))
		return -ENOMEM;
	return clock_sync_from_json(o, v);
}

int vm_results_from_json(struct json_object *j, VmResults **ret_results) {
	VmResults *r;
	size_t n;

	if (!ret_results || !j || !json_object_is_type(j, json_type_array))
		return -EBADMSG;
	n = json_object_array_length(j);
	r = vm_results_new(n);
	if (!r)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		int k = vm_result_from_json(json_object_array_get_idx(j, i), &r->items[i]);
		if (k < 0) {
			vm_results_free(r);
			return k;
		}
		for (size_t p = 0; p < i; p++)
			if (streq(r->items[p].name, r->items[i].name)) {
				vm_results_free(r);
				return -EBADMSG;
			}
	}
	*ret_results = r;
	return 0;
}
