/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>

#include "report.h"

static void add_str(json_object *o, const char *k, const char *v) {
	json_object_object_add(o, k, v ? json_object_new_string(v) : NULL);
}

int report_build(const Update *u, bool backend_test_only, json_object **ret) {
	json_object *o, *k, *h, *t, *a;
	const char *result;

	switch (u->state) {
	case UPDATE_DONE:
		result = "success";
		break;
	case UPDATE_FAILED:
		result = "failed";
		break;
	default:
		return -EINVAL;
	}

	o = json_object_new_object();
	if (!o)
		return -ENOMEM;
	json_object_object_add(o, "schema_version", json_object_new_int(REPORT_SCHEMA_VERSION));
	add_str(o, "id", u->id);
	add_str(o, "result", result);
	add_str(o, "reason", u->error);

	json_object_object_add(o, "backend", h = json_object_new_object());
	add_str(h, "name", u->backend);
	json_object_object_add(h, "test_only", json_object_new_boolean(backend_test_only));
	add_str(h, "reason", u->backend_reason);

	json_object_object_add(o, "handoff", h = json_object_new_object());
	add_str(h, "mode", u->handoff);
	add_str(h, "reason", u->handoff_reason);

	json_object_object_add(o, "old_kernel", k = json_object_new_object());
	add_str(k, "version", u->old_kernel);

	json_object_object_add(o, "new_kernel", k = json_object_new_object());
	add_str(k, "version", u->kernel_version);
	add_str(k, "version_source", u->kernel_version_source);
	add_str(k, "path", u->kernel.path);
	add_str(k, "sha256", u->kernel.sha256);
	json_object_object_add(k, "size", json_object_new_uint64(u->kernel.size));

	if (u->initrd.path) {
		json_object_object_add(o, "initrd", k = json_object_new_object());
		add_str(k, "path", u->initrd.path);
		add_str(k, "sha256", u->initrd.sha256);
		json_object_object_add(k, "size", json_object_new_uint64(u->initrd.size));
	} else
		json_object_object_add(o, "initrd", NULL);
	add_str(o, "cmdline", u->cmdline);
	add_str(o, "booted_kernel", u->booted_kernel);

	/* Timestamps: each phase carries the boot it was taken in; monotonic and TSC
	 * values compare only within one boot_id, realtime across boots (subject to
	 * the new kernel's clock being set from the RTC/NTP). */
	json_object_object_add(o, "timebase", t = json_object_new_object());
	add_str(t, "clocks",
	        "realtime_usec=CLOCK_REALTIME, monotonic_usec=CLOCK_MONOTONIC, "
	        "tsc=x86 time stamp counter (where taken)");
	add_str(t, "cross_boot",
	        "realtime_usec only; uncertainty is that of the new kernel's "
	        "initial wall clock (RTC second resolution until NTP)");

	json_object_object_add(o, "phases", a = json_object_new_array());
	for (size_t i = 0; i < u->n_stamps; i++) {
		json_object *s = json_object_new_object();

		add_str(s, "name", u->stamps[i].name);
		json_object_object_add(s, "realtime_usec",
		                       json_object_new_uint64(u->stamps[i].realtime_usec));
		json_object_object_add(s, "monotonic_usec",
		                       json_object_new_uint64(u->stamps[i].monotonic_usec));
		if (u->stamps[i].tsc)
			json_object_object_add(s, "tsc", json_object_new_uint64(u->stamps[i].tsc));
		add_str(s, "boot_id", u->stamps[i].boot_id);
		json_object_array_add(a, s);
	}

	/* ---- VMs and the policy's decisions (daemon/vms.c) ---- */
	json_object_object_add(o, "vms",
	                       u->vms ? json_object_get(u->vms) : json_object_new_array());
	json_object_object_add(o, "decisions", u->decisions ? json_object_get(u->decisions) : NULL);
	/* ---- end of VMs ---- */

	*ret = o;
	return 0;
}
