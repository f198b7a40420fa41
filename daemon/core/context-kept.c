/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Kept memory in the state machine: stage carries the running kernel's memmap=
 * regions over and records the kept-memory facts (daemon/pmem), commit gathers
 * them again, PlanCommit shows them.
 */

#include <errno.h>
#include <stdlib.h>

#include "cmdline.h"
#include "context-private.h"
#include "log.h"
#include "pmem.h"

int context_kept_memory(Context *c, const Update *u, const char *added, json_object **ret) {
	_cleanup_(pmem_facts_done) PmemFacts f = {};
	PmemOptions o = { .root = c->root,
		          .backing_dir = c->policy ? c->policy->memory_backing_dir : NULL,
		          .staged_cmdline = u->cmdline,
		          .cmdline_added = added,
		          .backend = c->backend->name };
	int r;

	r = pmem_facts_gather(&o, &f);
	if (r < 0)
		return r;
	for (size_t i = 0; i < f.reasons.n; i++)
		log_debug("Update %s: kept memory: %s: %s", u->id, f.reasons.items[i].code,
		          f.reasons.items[i].text);
	return pmem_facts_to_json(&f, ret);
}

void context_kept_memory_refresh(Context *c, Update *u) {
	json_object *km = NULL;

	if (context_kept_memory(c, u, NULL, &km) < 0)
		return; /* the facts of stage stay */
	json_object_put(u->kept_memory);
	u->kept_memory = km;
}

int context_carry_memmap(const char *running, char **cmdline, char **ret_added,
                         sd_bus_error *error) {
	_cleanup_free_ char *carried = NULL;
	int r;

	*ret_added = NULL;
	if (!running)
		return 0; /* nothing to carry that we can see */
	r = pmem_cmdline_carry(running, *cmdline, &carried, ret_added);
	if (r < 0 || !carried)
		return r;
	r = cmdline_validate(carried, error);
	if (r < 0) {
		free(*ret_added);
		*ret_added = NULL;
		return r;
	}
	log_info("Stage: carrying '%s' over from the running command line.", *ret_added);
	free(*cmdline);
	*cmdline = TAKE_PTR(carried);
	return 0;
}
