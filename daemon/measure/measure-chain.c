/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The report's critical_path (docs/report.md): which units the restore waited for on
 * the new kernel, and which units were still stopping on the old kernel after the VMs
 * were saved. Each time is systemd's own CLOCK_MONOTONIC record of its boot, and also
 * placed on the report's axis: exact on the old kernel, estimated (the timebase's
 * +-) on the new one.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "measure-internal.h"
#include "systemd-record.h"

/* Adds start_ns/end_ns on the report's axis to each entry of a (null without one). */
static void place_on_axis(json_object *a, const char *from, const char *to, bool old_kernel,
                          const TimebaseInput *in, const Timebase *tb, bool have_axis) {
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *o = json_object_array_get_idx(a, i);
		json_object *f = measure_get_obj(o, from), *t = measure_get_obj(o, to);

		for (int k = 0; k < 2; k++) {
			json_object *v = k == 0 ? (f ?: t) : t;
			int64_t ns;

			if (!have_axis || !v) {
				json_object_object_add(o, k == 0 ? "start_ns" : "end_ns", NULL);
				continue;
			}
			ns = old_kernel ? timebase_old_to_axis(in, json_object_get_uint64(v))
			                : timebase_new_to_axis(tb, json_object_get_uint64(v));
			json_object_object_add(o, k == 0 ? "start_ns" : "end_ns",
			                       json_object_new_int64(ns));
		}
	}
}

/* libvirt's daemons a restore may wait for, in the order tried: the modular QEMU daemon,
 * then the monolithic one. */
static const char *const libvirt_units[] = { "virtqemud.service", "libvirtd.service" };

/* The chain of the unit the restore waited for: libvirt's daemon when it became active
 * after the daemon's own start (a daemon started before it, by D-Bus or by hand); otherwise
 * (libvirt was up first, as upgraded.service's ordering has it, or is no unit here) the
 * daemon's own unit. */
static int chain_read_waited(Measure *m, char **ret_unit, UnitChain *ret, uint64_t *ret_userspace,
                             char **ret_why) {
	int r;

	for (size_t i = 0; i < ELEMENTSOF(libvirt_units); i++) {
		_cleanup_free_ char *why = NULL;
		UnitChain c = {};
		uint64_t us = 0;

		if (systemd_unit_chain_read(m->bus_address, libvirt_units[i], &c, &us, &why) < 0)
			continue; /* not a unit here, or never active in this boot */
		if (c.n_links > 0 &&
		    c.links[c.n_links - 1].activated_us * 1000 > m->start.monotonic_ns) {
			*ret_unit = strdup(libvirt_units[i]);
			if (!*ret_unit) {
				unit_chain_done(&c);
				return -ENOMEM;
			}
			*ret = c;
			*ret_userspace = us;
			return 0;
		}
		unit_chain_done(&c);
		break;
	}
	r = systemd_own_unit(ret_unit);
	if (r < 0) {
		if (asprintf(ret_why, "the daemon does not run as a systemd service (%s)",
		             strerror(-r)) < 0)
			*ret_why = NULL;
		return r;
	}
	return systemd_unit_chain_read(m->bus_address, *ret_unit, ret, ret_userspace, ret_why);
}

static json_object *chain_new_kernel(Measure *m, const TimebaseInput *in, const Timebase *tb,
                                     bool have_tb, json_object *missing) {
	_cleanup_free_ char *unit = NULL, *why = NULL;
	UnitChain chain = {};
	uint64_t userspace = 0;
	json_object *o, *units = NULL;
	int r;

	r = chain_read_waited(m, &unit, &chain, &userspace, &why);
	if (r < 0) {
		measure_add_missing(missing, "critical_path_new", "%s", why ?: strerror(-r));
		return NULL;
	}
	o = json_object_new_object();
	if (!o || unit_chain_to_json(&chain, &units) < 0) {
		json_object_put(o);
		unit_chain_done(&chain);
		return NULL;
	}
	place_on_axis(units, "activating_ns", "activated_ns", false, in, tb, have_tb);
	json_object_object_add(o, "target", json_object_new_string(unit));
	json_object_object_add(o, "userspace_ns",
	                       userspace ? json_object_new_int64((int64_t)userspace * 1000) : NULL);
	json_object_object_add(o, "truncated", json_object_new_boolean(chain.truncated));
	json_object_object_add(o, "estimated", json_object_new_boolean(true));
	json_object_object_add(o, "units", units);
	unit_chain_done(&chain);
	return o;
}

static json_object *stops_old_kernel(Measure *m, const Update *u, const TimebaseInput *in,
                                     json_object *report, json_object *missing) {
	_cleanup_free_ char *why = NULL;
	UnitStops stops = {};
	json_object *o, *units = NULL;
	int r;

	if (json_object_get_type(measure_get_obj(report, "panic_path")) == json_type_object) {
		measure_add_missing(missing, "critical_path_old", "%s",
		                    "the old kernel crashed (panic path): it stopped no units");
		return NULL;
	}
	r = journal_unit_stops_read(m->root, u->handoff_boot_id, in->old_reboot.monotonic_ns / 1000,
	                            &stops, &why);
	if (r < 0) {
		measure_add_missing(missing, "critical_path_old", "%s", why ?: strerror(-r));
		return NULL;
	}
	o = json_object_new_object();
	if (!o || unit_stops_to_json(&stops, &units) < 0) {
		json_object_put(o);
		unit_stops_done(&stops);
		return NULL;
	}
	place_on_axis(units, "stopping_ns", "stopped_ns", true, in, NULL, true);
	json_object_object_add(o, "boot_id", json_object_new_string(u->handoff_boot_id));
	json_object_object_add(o, "after", json_object_new_string("reboot-request"));
	json_object_object_add(o, "truncated", json_object_new_boolean(stops.truncated));
	json_object_object_add(o, "estimated", json_object_new_boolean(false));
	json_object_object_add(o, "units", units);
	unit_stops_done(&stops);
	return o;
}

void measure_report_critical_path(Measure *m, const Update *u, const TimebaseInput *in,
                                  const Timebase *tb, bool have_tb, bool have_reboot,
                                  json_object *report, json_object *missing) {
	json_object *cp = json_object_new_object(), *old = NULL;

	if (!cp)
		return;
	if (!have_reboot || !u->handoff_boot_id)
		measure_add_missing(missing, "critical_path_old", "%s",
		                    "the handoff record has no reboot-request clock sample");
	else
		old = stops_old_kernel(m, u, in, report, missing);
	json_object_object_add(cp, "new_kernel", chain_new_kernel(m, in, tb, have_tb, missing));
	json_object_object_add(cp, "old_kernel", old);
	json_object_object_add(report, "critical_path", cp);
}
