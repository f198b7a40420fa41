/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The commit check (CommitCheck in context.h): the domains, the policy's decision for each
 * (with the domain's policy metadata) and the preconditions on the facts gathered here.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include "image.h"
#include "json-util.h"
#include "job.h"
#include "path-util.h"
#include "string-util.h"
#include "vm.h"
#include "vm-steps.h"
#include "vm-steps-internal.h"
#include "vm-steps-kept.h"

#define VM_METADATA_NS  "urn:upgraded:policy:1"
#define VM_METADATA_MAX 64 /* entries per domain; more are ignored */

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
_printf_(2, 3) int vms_append_text(char **text, const char *fmt, ...) {
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
		k = vms_append_text(text, "%s%s (%s)", strempty(who), r->items[i].text,
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

/* The policy's decision for domain v, its entry in the decisions (appended to a) and, for an
 * active domain the policy would checkpoint but libvirt cannot, the refusal's sentence. On
 * success *ret is the decision, the caller's to keep or to drop. */
static int decide_domain(const Policy *p, const Update *u, virConnectPtr conn, const VmInfo *v,
                         json_object *a, char **refusal, VmDecision *ret) {
	VmDecision dec = {};
	Metadata md;
	VmFacts f = {
		.name = v->name,
		.memory_bytes = v->memory_kib * 1024,
		.has_hostdev = v->checkpoint_blocker && strstr(v->checkpoint_blocker, "hostdev"),
		.persistent = v->persistent,
		/* The host's kept-memory facts (daemon/pmem), gathered again for
		 * this commit; each VM's RAM file is checked at its save. */
		.memory_preserved = vms_host_keeps_memory(u),
	};
	json_object *j;
	int r;

	job_blocking_begin();
	read_metadata(conn, v->name, &md);
	r = job_blocking_end();
	if (r < 0) {
		metadata_done(&md);
		return r;
	}
	f.metadata = md.items;
	f.n_metadata = md.n;
	r = policy_decide_vm(p, &f, &dec);
	metadata_done(&md);
	if (r < 0)
		return r;
	/* A blocker the policy's facts do not name still stops a checkpoint. */
	if (dec.strategy == POLICY_VM_CHECKPOINT && !v->checkpoint_possible && !dec.refused)
		dec.refused = true;
	r = policy_vm_decision_to_json(&dec, &j);
	if (r < 0) {
		policy_vm_decision_done(&dec);
		return r;
	}
	json_object_object_add(j, "uuid", json_object_new_string(v->uuid));
	json_object_object_add(j, "state", json_object_new_string(state_name(v->state)));
	json_object_object_add(j, "state_code", json_object_new_int(v->state));
	json_object_object_add(j, "active", json_object_new_boolean(v->active));
	json_object_object_add(j, "checkpoint_blocker",
	                       v->checkpoint_blocker ? json_object_new_string(v->checkpoint_blocker)
	                                             : NULL);
	json_object_array_add(a, j);
	if (v->active && dec.strategy == POLICY_VM_CHECKPOINT && !v->checkpoint_possible &&
	    !f.has_hostdev) {
		r = vms_append_text(refusal, "VM '%s' cannot be checkpointed: %s", v->name,
		                    strna(v->checkpoint_blocker));
		if (r < 0) {
			policy_vm_decision_done(&dec);
			return r;
		}
	}
	*ret = dec;
	return 0;
}

/* The preconditions on the facts gathered here and the n decisions d of the active domains:
 * the verdict (and its JSON in *ret_verdict), its blocking reasons and those of each refused
 * VM appended to the refusal. */
static int check_preconditions(Context *c, const Update *u, const Policy *p, const VmDecision *d,
                               size_t n_active, PolicyVerdict *verdict, json_object **ret_verdict,
                               char **refusal) {
	CommitFacts facts = {};
	time_t now;
	int r;

	facts = (CommitFacts){ .vms = d, .n_vms = n_active, .staged = true };
	facts.have_free_space =
	        free_bytes(context_root(c), p->checkpoint_dir, &facts.checkpoint_free_bytes) >= 0;
	facts.kernel_loaded = context_backend(c)->is_loaded(context_root(c), 0) > 0;
	facts.staged_unchanged = image_unchanged(context_root(c), &u->kernel) &&
	                         image_unchanged(context_root(c), &u->initrd);
	now = time(NULL);
	facts.have_time = localtime_r(&now, &facts.now) != NULL;
	r = policy_check_commit(p, &facts, verdict);
	if (r < 0)
		return r;
	r = policy_verdict_to_json(verdict, ret_verdict);
	if (r < 0)
		return r;
	r = append_blocking(refusal, &verdict->reasons, NULL);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n_active; i++) {
		_cleanup_free_ char *who = NULL;

		if (!d[i].refused)
			continue;
		if (asprintf(&who, "VM '%s': ", d[i].name) < 0)
			return -ENOMEM;
		r = append_blocking(refusal, &d[i].reasons, who);
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * The commit check (CommitCheck in context.h): inventory -> policy_decide_vm() for
 * every domain -> policy_check_commit() with the facts gathered here. Every domain
 * is listed in the decisions; only active ones count for the preconditions (a shut
 * off VM has no state to lose).
 */
int vms_commit_check(Context *c, Update *u, void *userdata, json_object **ret_decisions,
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
	size_t n_active = 0;
	int r, k;

	/* 1. Facts: the domains (off the state lock: libvirt may take its time). */
	r = vms_connect_unlocked(w, &conn, ret_refusal);
	if (r < 0)
		return r;
	job_blocking_begin();
	r = vm_inventory(conn, &inv);
	k = job_blocking_end();
	if (k < 0)
		return k;
	if (r < 0) {
		if (asprintf(ret_refusal, "cannot list the domains at '%s': %s", w->uri,
		             vms_libvirt_error()) < 0)
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
		VmDecision dec;

		r = decide_domain(p, u, conn, v, a, &refusal, &dec);
		if (r < 0)
			goto out;
		if (v->active)
			d[n_active++] = dec;
		else
			policy_vm_decision_done(&dec);
	}

	/* 3. The preconditions. */
	r = check_preconditions(c, u, p, d, n_active, &verdict, &vj, &refusal);
	if (r < 0)
		goto out;

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
