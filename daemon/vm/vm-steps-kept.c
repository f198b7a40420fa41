/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>

#include "vm-steps-kept.h"

bool vms_host_keeps_memory(const Update *u) {
	json_object *ready;

	if (!u || !u->kept_memory || !json_object_object_get_ex(u->kept_memory, "ready", &ready) ||
	    !json_object_is_type(ready, json_type_boolean))
		return false;
	return json_object_get_boolean(ready);
}

int vms_kept_check_setup(Context *c, const Update *u, VmsKeptCheck *k, KeepRamConfig *cfg) {
	const Policy *p = context_policy(c);
	PmemOptions o = { .root = context_root(c),
		          .backing_dir = p ? p->memory_backing_dir : NULL,
		          .staged_cmdline = u->cmdline,
		          .backend = context_backend(c)->name };
	int r;

	*k = (VmsKeptCheck){};
	r = pmem_facts_gather(&o, &k->facts);
	if (r < 0)
		return r;
	k->check = (PmemKeptCheck){ .facts = &k->facts, .root = context_root(c) };
	cfg->on_kept_memory = pmem_on_kept_memory;
	cfg->userdata = &k->check;
	return 0;
}

void vms_kept_check_done(VmsKeptCheck *k) {
	if (k)
		pmem_facts_done(&k->facts);
}
