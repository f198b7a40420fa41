/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include "fileio.h"
#include "image.h"
#include "json-util.h"
#include "job.h"
#include "measure.h"
#include "log.h"
#include "path-util.h"
#include "string-util.h"
#include "upgrade-bus.h"
#include "vm.h"
#include "vm-steps.h"
#include "vm-transfers.h"
#include "keep-ram.h"
#include "vm-steps-kept.h"

#define VM_NAME_MAX     256
#define VM_METADATA_NS  "urn:upgraded:policy:1"
#define VM_METADATA_MAX 64 /* entries per domain; more are ignored */

struct VmWiring {
	Context *context;
	char *uri;
	/* The shared connection: opened, checked and replaced under conn_lock (jobs use it
	 * concurrently, each with a reference of its own). */
	pthread_mutex_t conn_lock;
	virConnectPtr conn;
	VmTransfers *transfers; /* Update.VMTransfers (state lock) */
};

/* ---- constructors / destructors ---- */

VmWiring *vms_free(VmWiring *w) {
	if (!w)
		return NULL;
	if (w->conn)
		virConnectClose(w->conn);
	pthread_mutex_destroy(&w->conn_lock);
	vm_transfers_free(w->transfers);
	free(w->uri);
	free(w);
	return NULL;
}

/* ---- helpers ---- */

/* libvirt reports every error here instead of printing it to stderr. */
static void on_libvirt_error(void *userdata, virErrorPtr e) {
	if (e && e->message)
		log_debug("libvirt: %s", e->message);
}

static const char *libvirt_error(void) {
	virErrorPtr e = virGetLastError();

	return e && e->message ? e->message : "unknown libvirt error";
}

/* Whether conn still reaches libvirtd. Without an event loop for libvirt, a connection whose
 * libvirtd went away (killed, restarted) looks alive until it is used: one round trip tells. */
static bool connection_usable(virConnectPtr conn) {
	unsigned long version;

	return virConnectIsAlive(conn) == 1 && virConnectGetLibVersion(conn, &version) == 0;
}

/* The connection, opened on first use and again after libvirtd went away; *ret is a reference
 * of the caller's (virConnectClose() it). Every libvirt call here is bounded (vm_connect()):
 * call it between job_blocking_begin() and job_blocking_end(). */
static int wiring_connect(VmWiring *w, virConnectPtr *ret, char **ret_reason) {
	_cleanup_free_ char *why = NULL;
	int r = 0;

	pthread_mutex_lock(&w->conn_lock);
	if (w->conn && !connection_usable(w->conn)) {
		log_info("The connection to libvirt at '%s' was lost, opening it again.", w->uri);
		virConnectClose(w->conn);
		w->conn = NULL;
	}
	if (!w->conn)
		r = vm_connect(w->uri, &w->conn, &why);
	if (r >= 0) {
		virConnectRef(w->conn);
		*ret = w->conn;
	}
	pthread_mutex_unlock(&w->conn_lock);
	if (r < 0 && ret_reason &&
	    asprintf(ret_reason, "cannot connect to libvirt at '%s': %s", w->uri,
	             why ?: libvirt_error()) < 0)
		*ret_reason = NULL;
	return r == -ETIMEDOUT ? r : r < 0 ? -ECONNREFUSED : 0;
}

/* wiring_connect() off the state lock: the loop answers meanwhile. -ETIMEDOUT also when
 * the job was abandoned meanwhile (then nothing may be touched). */
static int wiring_connect_unlocked(VmWiring *w, virConnectPtr *ret, char **ret_reason) {
	int r, k;

	job_blocking_begin();
	r = wiring_connect(w, ret, ret_reason);
	k = job_blocking_end();
	if (k < 0 && r >= 0) {
		virConnectClose(*ret);
		*ret = NULL;
	}
	return k < 0 ? k : r;
}

static void conn_closep(virConnectPtr *c) {
	if (*c)
		virConnectClose(*c);
}
#define _cleanup_conn_ _cleanup_(conn_closep)

static const char *state_name(int state) {
	switch (state) {
	case VIR_DOMAIN_RUNNING:
		return "running";
	case VIR_DOMAIN_BLOCKED:
		return "blocked";
	case VIR_DOMAIN_PAUSED:
		return "paused";
	case VIR_DOMAIN_SHUTDOWN:
		return "shutting-down";
	case VIR_DOMAIN_SHUTOFF:
		return "shutoff";
	case VIR_DOMAIN_CRASHED:
		return "crashed";
	case VIR_DOMAIN_PMSUSPENDED:
		return "pmsuspended";
	default:
		return "unknown";
	}
}

/* Free bytes of the file system that holds dir, or of its nearest existing parent
 * (the checkpoint directory may not exist before the first checkpoint). */
static int free_bytes(const char *root, const char *dir, uint64_t *ret) {
	_cleanup_free_ char *p = NULL;
	struct statvfs sv;
	int r;

	r = path_prefix_root(root, dir, &p);
	if (r < 0)
		return r;
	for (;;) {
		char *slash;

		if (statvfs(p, &sv) >= 0) {
			*ret = (uint64_t)sv.f_bavail * sv.f_frsize;
			return 0;
		}
		if (errno != ENOENT)
			return -errno;
		slash = strrchr(p, '/');
		if (!slash || slash == p)
			return -ENOENT;
		*slash = '\0';
	}
}

/* Appends "; <formatted>" (or just <formatted> to an empty text). */
_printf_(2, 3) static int append_text(char **text, const char *fmt, ...) {
	_cleanup_free_ char *add = NULL;
	va_list ap;
	char *n;
	int k;

	va_start(ap, fmt);
	k = vasprintf(&add, fmt, ap);
	va_end(ap);
	if (k < 0)
		return -ENOMEM;
	if (asprintf(&n, "%s%s%s", strempty(*text), *text ? "; " : "", add) < 0)
		return -ENOMEM;
	free(*text);
	*text = n;
	return 0;
}

static int append_blocking(char **text, const PolicyReasons *r, const char *who) {
	for (size_t i = 0; i < r->n; i++) {
		int k;

		if (r->items[i].severity != POLICY_REASON_BLOCKING)
			continue;
		k = append_text(text, "%s%s (%s)", strempty(who), r->items[i].text,
		                r->items[i].code);
		if (k < 0)
			return k;
	}
	return 0;
}

typedef struct Metadata {
	PolicyMetadata items[VM_METADATA_MAX];
	size_t n;
	xmlDoc *doc;
	xmlChar *values[VM_METADATA_MAX];
} Metadata;

static void metadata_done(Metadata *m) {
	for (size_t i = 0; i < m->n; i++)
		xmlFree(m->values[i]);
	xmlFreeDoc(m->doc);
	*m = (Metadata){};
}

/* The domain's <metadata> element in urn:upgraded:policy:1: child element name = key,
 * text = value (docs/policy.md). None (or unreadable) = no entries: a rule that needs
 * metadata then does not match, which the reasons show. */
static void read_metadata(virConnectPtr conn, const char *name, Metadata *ret) {
	_cleanup_free_ char *xml = NULL;
	virDomainPtr dom;
	xmlNode *root;

	*ret = (Metadata){};
	dom = virDomainLookupByName(conn, name);
	if (!dom)
		return;
	xml = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, VM_METADATA_NS, 0);
	virDomainFree(dom);
	if (!xml)
		return;
	ret->doc = xmlReadMemory(xml, (int)strlen(xml), NULL, NULL,
	                         XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
	root = ret->doc ? xmlDocGetRootElement(ret->doc) : NULL;
	for (xmlNode *n = root ? root->children : NULL; n && ret->n < VM_METADATA_MAX;
	     n = n->next) {
		if (n->type != XML_ELEMENT_NODE)
			continue;
		ret->values[ret->n] = xmlNodeGetContent(n);
		ret->items[ret->n] = (PolicyMetadata){
			.key = (const char *)n->name,
			.value = ret->values[ret->n] ? (const char *)ret->values[ret->n] : "",
		};
		ret->n++;
	}
}

/*
 * The commit check (CommitCheck in context.h): inventory -> policy_decide_vm() for
 * every domain -> policy_check_commit() with the facts gathered here. Every domain
 * is listed in the decisions; only active ones count for the preconditions (a shut
 * off VM has no state to lose).
 */
static int vms_commit_check(Context *c, Update *u, void *userdata, json_object **ret_decisions,
                            char **ret_refusal) {
	VmWiring *w = userdata;
	_cleanup_conn_ virConnectPtr conn = NULL;
	_cleanup_(vm_list_freep) VmList *inv = NULL;
	_cleanup_(policy_freep) Policy *fallback = NULL;
	_cleanup_(json_object_putp) json_object *o = NULL, *a = NULL, *vj = NULL;
	_cleanup_free_ VmDecision *d = NULL;
	_cleanup_free_ char *refusal = NULL;
	const Policy *p = context_policy(c);
	PolicyVerdict verdict = {};
	CommitFacts facts = {};
	size_t n_active = 0;
	time_t now;
	int r, k;

	/* 1. Facts: the domains (off the state lock: libvirt may take its time). */
	r = wiring_connect_unlocked(w, &conn, ret_refusal);
	if (r < 0)
		return r;
	job_blocking_begin();
	r = vm_inventory(conn, &inv);
	k = job_blocking_end();
	if (k < 0)
		return k;
	if (r < 0) {
		if (asprintf(ret_refusal, "cannot list the domains at '%s': %s", w->uri,
		             libvirt_error()) < 0)
			*ret_refusal = NULL;
		return r;
	}
	if (!p) {
		r = policy_new_default(&fallback);
		if (r < 0)
			return r;
		p = fallback;
	}

	/* 2. One decision per domain. */
	d = calloc(inv->n ?: 1, sizeof(*d));
	a = json_object_new_array();
	if (!d || !a)
		return -ENOMEM;
	for (size_t i = 0; i < inv->n; i++) {
		const VmInfo *v = &inv->vms[i];
		VmDecision dec = {};
		Metadata md;
		VmFacts f = {
			.name = v->name,
			.memory_bytes = v->memory_kib * 1024,
			.has_hostdev =
			        v->checkpoint_blocker && strstr(v->checkpoint_blocker, "hostdev"),
			.persistent = v->persistent,
			/* The host's kept-memory facts (daemon/pmem), gathered again for
			 * this commit; each VM's RAM file is checked at its save. */
			.memory_preserved = vms_host_keeps_memory(u),
		};
		json_object *j;

		job_blocking_begin();
		read_metadata(conn, v->name, &md);
		r = job_blocking_end();
		if (r < 0) {
			metadata_done(&md);
			goto out;
		}
		f.metadata = md.items;
		f.n_metadata = md.n;
		r = policy_decide_vm(p, &f, &dec);
		metadata_done(&md);
		if (r < 0)
			goto out;
		/* A blocker the policy's facts do not name still stops a checkpoint. */
		if (dec.strategy == POLICY_VM_CHECKPOINT && !v->checkpoint_possible && !dec.refused)
			dec.refused = true;
		r = policy_vm_decision_to_json(&dec, &j);
		if (r < 0) {
			policy_vm_decision_done(&dec);
			goto out;
		}
		json_object_object_add(j, "uuid", json_object_new_string(v->uuid));
		json_object_object_add(j, "state", json_object_new_string(state_name(v->state)));
		json_object_object_add(j, "state_code", json_object_new_int(v->state));
		json_object_object_add(j, "active", json_object_new_boolean(v->active));
		json_object_object_add(j, "checkpoint_blocker",
		                       v->checkpoint_blocker
		                               ? json_object_new_string(v->checkpoint_blocker)
		                               : NULL);
		json_object_array_add(a, j);
		if (v->active && dec.strategy == POLICY_VM_CHECKPOINT && !v->checkpoint_possible &&
		    !f.has_hostdev) {
			r = append_text(&refusal, "VM '%s' cannot be checkpointed: %s", v->name,
			                strna(v->checkpoint_blocker));
			if (r < 0) {
				policy_vm_decision_done(&dec);
				goto out;
			}
		}
		if (v->active)
			d[n_active++] = dec;
		else
			policy_vm_decision_done(&dec);
	}

	/* 3. The preconditions. */
	facts = (CommitFacts){ .vms = d, .n_vms = n_active, .staged = true };
	facts.have_free_space =
	        free_bytes(context_root(c), p->checkpoint_dir, &facts.checkpoint_free_bytes) >= 0;
	facts.kernel_loaded = context_backend(c)->is_loaded(context_root(c), 0) > 0;
	facts.staged_unchanged = image_unchanged(context_root(c), &u->kernel) &&
	                         image_unchanged(context_root(c), &u->initrd);
	now = time(NULL);
	facts.have_time = localtime_r(&now, &facts.now) != NULL;
	r = policy_check_commit(p, &facts, &verdict);
	if (r < 0)
		goto out;
	r = policy_verdict_to_json(&verdict, &vj);
	if (r < 0)
		goto out;
	r = append_blocking(&refusal, &verdict.reasons, NULL);
	if (r < 0)
		goto out;
	for (size_t i = 0; i < n_active; i++) {
		_cleanup_free_ char *who = NULL;

		if (!d[i].refused)
			continue;
		if (asprintf(&who, "VM '%s': ", d[i].name) < 0) {
			r = -ENOMEM;
			goto out;
		}
		r = append_blocking(&refusal, &d[i].reasons, who);
		if (r < 0)
			goto out;
	}

	o = json_object_new_object();
	if (!o) {
		r = -ENOMEM;
		goto out;
	}
	json_object_object_add(o, "libvirt_uri", json_object_new_string(w->uri));
	json_object_object_add(o, "vms", TAKE_PTR(a));
	json_object_object_add(o, "verdict", TAKE_PTR(vj));
	r = verdict.allowed ? 1 : 0;
	if (r == 0 && !refusal)
		refusal = strdup("a precondition failed");
	*ret_decisions = TAKE_PTR(o);
	if (ret_refusal)
		*ret_refusal = TAKE_PTR(refusal);
out:
	for (size_t i = 0; i < n_active; i++)
		policy_vm_decision_done(&d[i]);
	policy_verdict_done(&verdict);
	return r;
}

/* ---- the measurement (daemon/measure/measure.c) ---- */

/* The Measure attached to the context, or NULL when the daemon runs without it. */
static Measure *context_measure(Context *c) {
	return context_measure_userdata(c);
}

/* QEMU's pid of a running domain, which libvirt's QEMU driver keeps in
 * /run/libvirt/qemu/<name>.pid. -ENOENT without it (another driver, tests): that VM
 * simply has no vCPU figures. The file is libvirt's, like the connection's URI: not
 * under --root (and /proc, where the probe finds the threads, is not either). */
static int qemu_pid(const char *name, pid_t *ret) {
	_cleanup_free_ char *path = NULL, *data = NULL;
	unsigned long long pid;
	int r;

	if (!name || !*name || strchr(name, '/'))
		return -EINVAL;
	if (asprintf(&path, "/run/libvirt/qemu/%s.pid", name) < 0)
		return -ENOMEM;
	r = read_file_full(path, 64, &data, NULL);
	if (r < 0)
		return r;
	if (safe_atou64(strstrip(data), &pid) < 0 || pid == 0 || pid > INT32_MAX)
		return -EBADMSG;
	*ret = (pid_t)pid;
	return 0;
}

/* Before the first pause: the probe follows each VM's vCPU threads. */
static void measure_track_vms(Context *c, const VmPlanEntry *e, size_t n) {
	Measure *m = context_measure(c);
	pid_t pid;

	if (!m)
		return;
	for (size_t i = 0; i < n; i++)
		if (qemu_pid(e[i].name, &pid) >= 0)
			(void)measure_vm_tracking(m, e[i].name, pid);
}

/* The VM library's exact moments (VmEvent), on whichever thread does the step: the
 * probe window opens right before each pause and each resume; on the new kernel the
 * restored QEMU's vCPU threads are tracked before the resume lets them run. */
static void on_vm_event(const VmResult *r, VmEvent e, void *userdata) {
	Context *c = userdata;
	Measure *m = context_measure(c);
	pid_t pid;

	if (!m)
		return;
	switch (e) {
	case VM_EVENT_PAUSING:
	case VM_EVENT_RESUMING:
		(void)measure_window_start(m, r->name);
		break;
	case VM_EVENT_PAUSED:
		(void)measure_mark(m, r->name, PROBE_MARK_PAUSE);
		break;
	case VM_EVENT_RESTORED:
		(void)measure_mark(m, r->name, PROBE_MARK_RESTORE);
		if (qemu_pid(r->name, &pid) >= 0)
			(void)measure_vm_tracking(m, r->name, pid);
		break;
	case VM_EVENT_RESUMED:
		(void)measure_mark(m, r->name, PROBE_MARK_RESUME);
		break;
	default:
		break;
	}
}

/* ---- per-VM progress and records ---- */

typedef struct Progress {
	Context *context;
	Update *update;
	VmWiring *wiring;
	bool restore;
} Progress;

/* Replaces (or appends) the record of r->name in u->vms and tells the bus. Runs on the
 * thread that called the VM library, with the state lock released (a job's worker): takes
 * it for the update. */
static void on_vm_progress(const VmResult *r, void *userdata) {
	Progress *p = userdata;
	VmResults one = { .items = (VmResult *)r, .n = 1 };
	_cleanup_(json_object_putp) json_object *arr = vm_results_to_json(&one);
	json_object *rec;
	size_t n;

	if (context_measure(p->context))
		(void)measure_vm_outcome(context_measure(p->context), r->name,
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
static int store_results(Context *c, Update *u, const VmResults *res) {
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

static const char *dec_str(json_object *dec, const char *key) {
	json_object *s;

	return json_object_object_get_ex(dec, key, &s) ? json_object_get_string(s) : NULL;
}

static json_object *decided_vms(const Update *u) {
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
	json_object *a = decided_vms(u);
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
		const char *uuid = dec_str(dec, "uuid");

		if (!dec_bool(dec, "active") || s < 0 || s == VM_STRATEGY_IGNORE || !uuid ||
		    strlen(uuid) >= sizeof(v->uuid))
			continue;
		*v = (VmResult){ .strategy = s,
			         .outcome = s == VM_STRATEGY_CHECKPOINT || s == VM_STRATEGY_KEEP_RAM
			                            ? VM_OUTCOME_SAVING
			                            : VM_OUTCOME_SHUTTING_DOWN,
			         .saved_bytes = -1 };
		v->name = strdup(strempty(dec_str(dec, "name")));
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
			if (append_text(&text, "VM '%s': %s", v->name, v->error) < 0)
				return -ENOMEM;
		}
	if (asprintf(ret, "%s: %s", what, text ?: "see the per-VM results") < 0)
		return -ENOMEM;
	return 0;
}

static void plan_from_policy(Context *c, VmPlan *plan) {
	const Policy *p = context_policy(c);

	*plan = (VmPlan){ .on_event = on_vm_event,
		          .event_userdata = c,
		          .on_bytes = on_vm_bytes,
		          .cancel = job_cancel_flag(job_current()) };
	if (p) {
		plan->parallel = p->save_parallel;
		plan->shutdown_timeout_usec = p->shutdown_timeout_usec;
		plan->pause_timeout_usec = p->pause_timeout_usec;
	}
}

/* ---- the steps (HookFunc) ---- */

/* PRE_HANDOFF: pause all, checkpoint in parallel with the decided strategies. On
 * failure vm_checkpoint_all() has already given every VM back. */
static int hook_checkpoint(Context *c, Update *u, void *userdata, char **ret_reason) {
	VmWiring *w = userdata;
	_cleanup_conn_ virConnectPtr conn = NULL;
	_cleanup_(vm_results_freep) VmResults *res = NULL;
	_cleanup_free_ VmPlanEntry *e = NULL;
	Progress prog = { .context = c, .update = u, .wiring = w };
	_cleanup_(vms_kept_check_done) VmsKeptCheck kept = {};
	json_object *a = decided_vms(u);
	size_t n = a ? json_object_array_length(a) : 0, k = 0;
	VmPlan plan;
	int r, s;

	e = calloc(n ?: 1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		json_object *dec = json_object_array_get_idx(a, i);

		/* Inactive domains too: the library records them as ignored. */
		if (strategy_of(dec) < 0)
			continue;
		e[k++] =
		        (VmPlanEntry){ .name = dec_str(dec, "name"), .strategy = strategy_of(dec) };
	}
	if (k == 0)
		return 0;

	r = wiring_connect_unlocked(w, &conn, ret_reason);
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
	plan_from_policy(c, &plan);
	plan.entries = e;
	plan.n_entries = k;
	/* keep-ram: our paths under --root, the update id in each generation mark; libvirt's
	 * memory_backing_dir from its qemu.conf; a VM that cannot keep its RAM is checkpointed
	 * (the reason goes into its record). */
	KeepRamConfig keep_ram = { .root = context_root(c),
		                   .update_id = u->id,
		                   .fallback_checkpoint = true };
	if (context_policy(c))
		keep_ram.digest = keep_ram_digest_mode_from_string(
		        policy_keep_ram_digest_to_string(context_policy(c)->keep_ram_digest));
	/* Each keep-ram VM's RAM file must lie on the kept, DAX-mounted memory. */
	r = vms_kept_check_setup(c, u, &kept, &keep_ram);
	if (r < 0)
		return r;
	plan.keep_ram = &keep_ram;
	measure_track_vms(c, e, k);
	/* The saves run off the state lock: Describe, Cancel and the properties answer
	 * meanwhile; the progress callbacks take the lock for each change. */
	job_blocking_begin();
	r = vm_checkpoint_all(conn, &plan, on_vm_progress, &prog, &res);
	s = job_blocking_end();
	if (s < 0)
		return s;
	if (res) {
		s = store_results(c, u, res);
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
static int hook_rollback(Context *c, Update *u, void *userdata, char **ret_reason) {
	VmWiring *w = userdata;
	_cleanup_conn_ virConnectPtr conn = NULL;
	_cleanup_(vm_results_freep) VmResults *res = NULL;
	Progress prog = { .context = c, .update = u, .wiring = w };
	int r, s;

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
	r = wiring_connect_unlocked(w, &conn, ret_reason);
	if (r < 0)
		return r;
	job_blocking_begin();
	r = vm_rollback(conn, res, u->error ?: "the commit failed", on_vm_progress, &prog);
	s = job_blocking_end();
	if (s < 0)
		return s;
	s = store_results(c, u, res);
	if (s == -ECANCELED)
		return s;
	if (r < 0) {
		if (reason_from_results(res, "VM rollback incomplete", ret_reason) < 0)
			*ret_reason = NULL;
		return r;
	}
	return s < 0 ? s : 0;
}

/* POST_BOOT: restore every checkpointed VM; a failed one keeps its image. */
static int hook_restore(Context *c, Update *u, void *userdata, char **ret_reason) {
	VmWiring *w = userdata;
	_cleanup_conn_ virConnectPtr conn = NULL;
	_cleanup_(vm_results_freep) VmResults *res = NULL;
	Progress prog = { .context = c, .update = u, .wiring = w, .restore = true };
	VmPlan plan;
	int r, s;

	if (!u->vms)
		return 0;
	r = vm_results_from_json(u->vms, &res);
	if (r < 0) {
		*ret_reason = strdup("the VM results in the handoff record are unreadable");
		return r;
	}
	r = wiring_connect_unlocked(w, &conn, ret_reason);
	if (r < 0)
		return r;
	plan_from_policy(c, &plan);
	plan.cancel = NULL; /* after the handoff nothing is cancelled */
	job_blocking_begin();
	r = vm_restore_all(conn, &plan, res, on_vm_progress, &prog);
	s = job_blocking_end();
	if (s < 0)
		return s;
	s = store_results(c, u, res);
	if (s == -ECANCELED)
		return s;
	if (r < 0) {
		if (reason_from_results(res,
		                        "VM restore failed, the saved state is kept (retry with "
		                        "upgradectl restore-vm NAME)",
		                        ret_reason) < 0)
			*ret_reason = NULL;
		return r;
	}
	return s < 0 ? s : 0;
}

/* ---- public entry points ---- */

int vms_attach(Context *c, const char *uri, VmWiring **ret) {
	_cleanup_(vms_freep) VmWiring *w = NULL;
	int r;

	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->context = c;
	pthread_mutex_init(&w->conn_lock, NULL);
	w->uri = strdup(uri ?: VMS_LIBVIRT_URI_DEFAULT);
	if (!w->uri || vm_transfers_new(&w->transfers) < 0)
		return -ENOMEM;
	virSetErrorFunc(NULL, on_libvirt_error);

	if ((r = context_add_hook(c, HOOK_PRE_HANDOFF, "vm-checkpoint", hook_checkpoint, w)) < 0 ||
	    (r = context_add_hook(c, HOOK_ROLLBACK, "vm-rollback", hook_rollback, w)) < 0 ||
	    (r = context_add_hook(c, HOOK_POST_BOOT, "vm-restore", hook_restore, w)) < 0)
		return r;
	context_set_commit_check(c, vms_commit_check, w);
	*ret = TAKE_PTR(w);
	return 0;
}

int vms_restore_one(VmWiring *w, const char *name, sd_bus_error *error) {
	_cleanup_conn_ virConnectPtr conn = NULL;
	_cleanup_(vm_results_freep) VmResults *res = NULL;
	_cleanup_free_ char *why = NULL;
	Context *c = w->context;
	Update *const *updates;
	size_t n;
	Update *u = NULL, *active;
	VmResult *rec = NULL;
	int r, k;

	/* 1. Validate. While an update commits or completes its VMs' images belong to it:
	 * restored now, a VM would be killed by the kexec with no saved state left, or would
	 * race the new kernel's own restore. */
	if (!name || !*name || strlen(name) > VM_NAME_MAX || string_has_cc(name))
		return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_VM_NAME,
		                         "'%s' is not a VM name.", QUOTE_CUT(name, 64));
	active = context_active(c);
	if (active && (active->state == UPDATE_COMMITTING || active->state == UPDATE_COMPLETING))
		return sd_bus_error_setf(
		        error, UPGRADE_ERROR_BAD_STATE,
		        "Update %s is %s (phase %s): its VMs' saved state is in use "
		        "and is kept; retry when it has finished.",
		        active->id, update_state_to_string(active->state), active->phase);
	r = wiring_connect_unlocked(w, &conn, &why);
	if (r < 0)
		return sd_bus_error_setf(error,
		                         r == -ETIMEDOUT ? UPGRADE_ERROR_LIBVIRT_TIMEOUT
		                                         : UPGRADE_ERROR_VM_FAILED,
		                         "%s.", why ?: "cannot connect to libvirt");

	/* 2. Its record in the newest update that has one. */
	updates = context_updates(c, &n);
	for (size_t i = n; i > 0 && !rec; i--) {
		Update *cand = updates[i - 1];
		VmResults *cr = NULL;

		if (!cand->vms || vm_results_from_json(cand->vms, &cr) < 0)
			continue;
		rec = (VmResult *)vm_results_find(cr, name);
		if (rec) {
			u = cand;
			res = cr;
		} else
			vm_results_free(cr);
	}

	/* 3. Restore, off the state lock. */
	job_blocking_begin();
	r = vm_restore_one(conn, name, rec);
	k = job_blocking_end();
	if (k < 0)
		return k;
	switch (r) {
	case 0:
		break;
	case -ENOENT:
		return sd_bus_error_setf(error, UPGRADE_ERROR_NO_SUCH_VM, "No VM '%s' at %s.", name,
		                         w->uri);
	case -EBUSY:
		return sd_bus_error_setf(error, UPGRADE_ERROR_VM_RUNNING,
		                         "VM '%s' is running: there is nothing to restore.", name);
	case -ENODATA:
		return sd_bus_error_setf(error, UPGRADE_ERROR_NO_SAVED_STATE,
		                         "VM '%s' has no saved state to restore.", name);
	default:
		return sd_bus_error_setf(error, UPGRADE_ERROR_VM_FAILED,
		                         "Restoring VM '%s' failed: %s.", name,
		                         rec && rec->error ? rec->error : strerror(-r));
	}
	log_info("VM '%s' restored from its saved state.", name);

	/* 4. The record says so. */
	if (u) {
		r = store_results(c, u, res);
		if (r < 0)
			log_warning_errno(
			        r, "Failed to record the restore of VM '%s', ignoring: %m", name);
	}
	return 0;
}

int vms_append_property(const Update *u, sd_bus_message *reply) {
	json_object *a = u->vms ?: decided_vms(u);
	size_t n = a ? json_object_array_length(a) : 0;
	int r;

	r = sd_bus_message_open_container(reply, 'a', "(sss)");
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		json_object *e = json_object_array_get_idx(a, i);
		const char *res = u->vms ? dec_str(e, "result") : "pending";

		r = sd_bus_message_append(reply, "(sss)", strempty(dec_str(e, "name")),
		                          strempty(dec_str(e, "strategy")), strempty(res));
		if (r < 0)
			return r;
	}
	return sd_bus_message_close_container(reply);
}

int vms_append_transfers(const VmWiring *w, const Update *u, sd_bus_message *reply) {
	return vm_transfers_append(w ? w->transfers : NULL, u->id, reply);
}
