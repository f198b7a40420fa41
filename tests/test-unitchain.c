/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "unitchain.h"

/*
 * Provenance: unit times of the lab host's new kernel after an update (the lab's
 * boot-timeline-new.txt, seconds -> microseconds of CLOCK_MONOTONIC), with the After=
 * lists of Debian 12's units cut to what matters here. Added by hand where a case needs
 * it: the never-active, failed and restarted units.
 */
typedef struct Rec {
	const char *unit;
	uint64_t activating_us, activated_us;
	const char *after[8];
} Rec;

static const Rec lab_boot[] = {
	{ "upgraded.service",
	  16755000,
	  18769000,
	  { "libvirtd.service", "virtqemud.service", "libvirtd.socket", "virtqemud.socket",
	    "dbus.socket", "basic.target", "sysinit.target", "system.slice" } },
	{ "libvirtd.service",
	  14798000,
	  16411000,
	  { "dbus.service", "systemd-machined.service", "systemd-logind.service", "local-fs.target",
	    "remote-fs.target", "basic.target", "libvirtd.socket", "apparmor.service" } },
	{ "systemd-logind.service",
	  11715000,
	  14680000,
	  { "basic.target", "dbus.socket", "nss-user-lookup.target", "modprobe@drm.service",
	    "systemd-remount-fs.service", "user.slice", "sysinit.target" } },
	{ "systemd-machined.service", 11884000, 14239000, { "basic.target", "dbus.socket" } },
	{ "dbus.service", 11467000, 12816000, { "basic.target", "dbus.socket", "sysinit.target" } },
	{ "basic.target",
	  11400000,
	  11400000,
	  { "sockets.target", "paths.target", "timers.target", "sysinit.target" } },
	{ "sockets.target",
	  11334000,
	  11334000,
	  { "dbus.socket", "libvirtd.socket", "virtlogd-admin.socket", "virtlogd.socket" } },
	{ "virtlogd-admin.socket", 11331000, 11331000, { "sysinit.target", "virtlogd.socket" } },
	{ "virtlogd.socket", 11315000, 11315000, { "sysinit.target" } },
	{ "libvirtd.socket", 11270000, 11270000, { "sysinit.target" } },
	{ "dbus.socket", 11257000, 11257000, { "sysinit.target" } },
	{ "timers.target", 11252000, 11252000, { "sysinit.target" } },
	{ "sysinit.target",
	  11237000,
	  11237000,
	  { "local-fs.target", "systemd-tmpfiles-setup.service", "swap.target" } },
	{ "systemd-tmpfiles-setup.service",
	  10672000,
	  10952000,
	  { "local-fs.target", "systemd-journald.service" } },
	{ "local-fs.target", 10633000, 10633000, { "systemd-remount-fs.service" } },
	{ "systemd-remount-fs.service", 8819000, 9572000, { "systemd-journald.socket" } },
	{ "systemd-journald.service", 8647000, 10149000, { "systemd-journald.socket" } },
	{ "systemd-journald.socket", 7937000, 7937000, { NULL } },
	{ "paths.target", 7909000, 7909000, { NULL } },
	{ "remote-fs.target", 7909000, 7909000, { NULL } },
	{ "swap.target", 7910000, 7910000, { NULL } },
	/* Oneshots without RemainAfterExit never become active: 0. */
	{ "modprobe@drm.service", 8311000, 0, { NULL } },
	{ "system.slice", 0, 5500000, { NULL } },
	{ NULL },
};

typedef struct Lookup {
	const Rec *recs;
	int fail_on_call; /* > 0: that call fails with -ETIMEDOUT */
	int calls;
} Lookup;

static int lookup_rec(const char *unit, UnitTimes *ret, void *userdata) {
	Lookup *l = userdata;
	size_t n = 0;

	if (++l->calls == l->fail_on_call)
		return -ETIMEDOUT;
	for (const Rec *r = l->recs; r->unit; r++) {
		if (strcmp(r->unit, unit) != 0)
			continue;
		while (n < ELEMENTSOF(r->after) && r->after[n])
			n++;
		*ret = (UnitTimes){ .activating_us = r->activating_us,
			            .activated_us = r->activated_us,
			            .after = calloc(n + 1, sizeof(char *)) };
		assert_non_null(ret->after);
		for (size_t i = 0; i < n; i++)
			assert_non_null(ret->after[i] = strdup(r->after[i]));
		return 0;
	}
	return -ENOENT;
}

static void assert_chain(const UnitChain *c, const char *const *expect) {
	size_t n = 0;

	while (expect[n])
		n++;
	for (size_t i = 0; i < c->n_links && i < n; i++)
		assert_string_equal(c->links[i].unit, expect[i]);
	assert_int_equal(c->n_links, n);
}

static void test_chain_lab_boot(void **state) {
	static const char *const expect[] = { "systemd-journald.socket",
		                              "systemd-remount-fs.service",
		                              "local-fs.target",
		                              "systemd-tmpfiles-setup.service",
		                              "sysinit.target",
		                              "virtlogd.socket",
		                              "virtlogd-admin.socket",
		                              "sockets.target",
		                              "basic.target",
		                              "systemd-logind.service",
		                              "libvirtd.service",
		                              "upgraded.service",
		                              NULL };
	Lookup l = { .recs = lab_boot };
	UnitChain c = {};
	const UnitChainLink *longest;
	(void)state;

	assert_int_equal(unit_chain_build("upgraded.service", lookup_rec, &l, &c), 0);
	/* The walk skips what never ran (modprobe@drm, not loaded apparmor) and takes, at
	 * each step, the dependency that became active last: libvirtd, then logind (14.680
	 * s, later than machined and dbus), then basic.target. */
	assert_chain(&c, expect);
	assert_false(c.truncated);
	assert_int_equal(c.links[11].activating_us, 16755000);
	assert_int_equal(c.links[11].activated_us, 18769000);
	longest = unit_chain_longest(&c);
	assert_string_equal(longest->unit, "systemd-logind.service"); /* 2.965 s */
	unit_chain_done(&c);
}

static void test_chain_json(void **state) {
	Lookup l = { .recs = lab_boot };
	UnitChain c = {};
	json_object *a = NULL, *o;
	(void)state;

	assert_int_equal(unit_chain_build("libvirtd.service", lookup_rec, &l, &c), 0);
	assert_int_equal(unit_chain_to_json(&c, &a), 0);
	assert_int_equal(json_object_array_length(a), c.n_links);
	o = json_object_array_get_idx(a, c.n_links - 1);
	assert_string_equal(json_object_get_string(json_object_object_get(o, "unit")),
	                    "libvirtd.service");
	assert_int_equal(json_object_get_int64(json_object_object_get(o, "activating_ns")),
	                 14798000000LL);
	assert_int_equal(json_object_get_int64(json_object_object_get(o, "activated_ns")),
	                 16411000000LL);
	assert_int_equal(json_object_get_int64(json_object_object_get(o, "time_ns")), 1613000000LL);
	json_object_put(a);
	unit_chain_done(&c);
}

/* A dependency restarted after the unit began starting did not hold it up; a failed one
 * never became active; a unit without an activating record (activating 0) is bounded
 * by its own activation. */
static void test_chain_restarted_failed(void **state) {
	static const Rec recs[] = {
		{ "t.service",
		  5000,
		  6000,
		  { "restarted.service", "failed.service", "early.service" } },
		{ "restarted.service", 9000, 9500, { NULL } }, /* its last start came later */
		{ "failed.service", 4000, 0, { NULL } },
		{ "early.service", 0, 3000, { "earliest.service" } },
		{ "earliest.service", 100, 200, { NULL } },
		{ NULL },
	};
	static const char *const expect[] = { "earliest.service", "early.service", "t.service",
		                              NULL };
	Lookup l = { .recs = recs };
	UnitChain c = {};
	(void)state;

	assert_int_equal(unit_chain_build("t.service", lookup_rec, &l, &c), 0);
	assert_chain(&c, expect);
	assert_int_equal(c.links[1].activating_us, 0);
	unit_chain_done(&c);
}

static void test_chain_errors(void **state) {
	static const Rec recs[] = {
		{ "a.service", 10, 20, { "b.service" } },
		{ "b.service", 5, 8, { "a.service" } }, /* a cycle: followed once */
		{ "never.service", 0, 0, { NULL } },
		{ NULL },
	};
	static const char *const expect[] = { "b.service", "a.service", NULL };
	Lookup l = { .recs = recs };
	UnitChain c = {};
	(void)state;

	assert_int_equal(unit_chain_build("missing.service", lookup_rec, &l, &c), -ENOENT);
	assert_int_equal(unit_chain_build("never.service", lookup_rec, &l, &c), -ENODATA);
	assert_int_equal(unit_chain_build("a.service", lookup_rec, &l, &c), 0);
	assert_chain(&c, expect);
	unit_chain_done(&c);

	/* A lookup that fails (not -ENOENT) ends the walk with its error, nothing leaks. */
	l = (Lookup){ .recs = lab_boot, .fail_on_call = 5 };
	assert_int_equal(unit_chain_build("upgraded.service", lookup_rec, &l, &c), -ETIMEDOUT);
	assert_int_equal(c.n_links, 0);
}

static void test_chain_truncated(void **state) {
	enum { N = UNIT_CHAIN_MAX + 10 };
	static Rec recs[N + 1];
	static char names[N][32];
	Lookup l = { .recs = recs };
	UnitChain c = {};
	(void)state;

	for (int i = 0; i < N; i++)
		snprintf(names[i], sizeof(names[i]), "u%d.service", i);
	for (int i = 0; i < N; i++) /* u0 waits for u1, ... */
		recs[i] = (Rec){ names[i],
			         (uint64_t)(N - i) * 10,
			         (uint64_t)(N - i) * 10 + 5,
			         { i + 1 < N ? names[i + 1] : NULL } };
	assert_int_equal(unit_chain_build("u0.service", lookup_rec, &l, &c), 0);
	assert_true(c.truncated);
	assert_int_equal(c.n_links, UNIT_CHAIN_MAX);
	assert_string_equal(c.links[UNIT_CHAIN_MAX - 1].unit, "u0.service");
	unit_chain_done(&c);
}

/*
 * Provenance: the old kernel's shutdown in the lab (journal-old.txt of an upgrade run,
 * seconds -> microseconds); the reboot request was at 54.300 s. Added by hand: a unit
 * stopped twice, a stop that began but never ended, and one that ended before the cut.
 */
static const UnitStopEntry lab_shutdown[] = {
	{ "early.service", UNIT_STOP_BEGIN, 50000000 },
	{ "early.service", UNIT_STOP_END, 50100000 },
	{ "lab-sampler.service", UNIT_STOP_BEGIN, 54458367 },
	{ "lab-sampler.service", UNIT_STOP_END, 54517903 },
	{ "libvirtd.service", UNIT_STOP_BEGIN, 54540580 },
	{ "libvirtd.service", UNIT_STOP_END, 54627710 },
	{ "remote-fs.target", UNIT_STOP_END, 54639877 },
	{ "dbus.service", UNIT_STOP_BEGIN, 54659961 },
	{ "systemd-logind.service", UNIT_STOP_BEGIN, 54681756 },
	{ "dbus.service", UNIT_STOP_END, 54719976 },
	{ "systemd-logind.service", UNIT_STOP_END, 54778417 },
	{ "systemd-update-utmp.service", UNIT_STOP_BEGIN, 54867815 },
	{ "systemd-update-utmp.service", UNIT_STOP_END, 55039203 },
	{ "dbus.service", UNIT_STOP_BEGIN, 55100000 }, /* stopped again, later */
	{ "dbus.service", UNIT_STOP_END, 55150000 },
	{ "systemd-kexec.service", UNIT_STOP_BEGIN, 55467227 }, /* never "Stopped" */
};

static void test_stops_lab_shutdown(void **state) {
	static const char *const order[] = { "lab-sampler.service",
		                             "libvirtd.service",
		                             "remote-fs.target",
		                             "systemd-logind.service",
		                             "systemd-update-utmp.service",
		                             "dbus.service" };
	UnitStops s = {};
	json_object *a = NULL, *o;
	(void)state;

	assert_int_equal(unit_stops_build(lab_shutdown, ELEMENTSOF(lab_shutdown), 54300000, &s), 0);
	assert_int_equal(s.n_stops, ELEMENTSOF(order));
	for (size_t i = 0; i < s.n_stops; i++)
		assert_string_equal(s.stops[i].unit, order[i]);
	/* A target logs no "Stopping": no begin, zero length. */
	assert_false(s.stops[2].has_begin);
	assert_int_equal(s.stops[2].begin_us, s.stops[2].end_us);
	/* The last stop of a unit stopped twice, paired with its own "Stopping". */
	assert_int_equal(s.stops[5].begin_us, 55100000);
	assert_int_equal(s.stops[5].end_us, 55150000);
	assert_string_equal(unit_stops_longest(&s)->unit, "systemd-update-utmp.service");

	assert_int_equal(unit_stops_to_json(&s, &a), 0);
	o = json_object_array_get_idx(a, 2);
	assert_null(json_object_object_get(o, "stopping_ns"));
	assert_int_equal(json_object_get_int64(json_object_object_get(o, "time_ns")), 0);
	o = json_object_array_get_idx(a, 1);
	assert_int_equal(json_object_get_int64(json_object_object_get(o, "stopping_ns")),
	                 54540580000LL);
	assert_int_equal(json_object_get_int64(json_object_object_get(o, "time_ns")), 87130000LL);
	json_object_put(a);
	unit_stops_done(&s);

	/* Nothing after the cut: an empty list, not an error. */
	assert_int_equal(unit_stops_build(lab_shutdown, ELEMENTSOF(lab_shutdown), 60000000, &s), 0);
	assert_int_equal(s.n_stops, 0);
	assert_null(unit_stops_longest(&s));
	unit_stops_done(&s);
}

static void test_stops_truncated(void **state) {
	enum { N = UNIT_STOPS_MAX + 3 };
	static UnitStopEntry e[N];
	static char names[N][32];
	UnitStops s = {};
	(void)state;

	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "s%d.service", i);
		e[i] = (UnitStopEntry){ names[i], UNIT_STOP_END, (uint64_t)i };
	}
	assert_int_equal(unit_stops_build(e, N, 0, &s), 0);
	assert_true(s.truncated);
	assert_int_equal(s.n_stops, UNIT_STOPS_MAX);
	unit_stops_done(&s);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chain_lab_boot),
		cmocka_unit_test(test_chain_json),
		cmocka_unit_test(test_chain_restarted_failed),
		cmocka_unit_test(test_chain_errors),
		cmocka_unit_test(test_chain_truncated),
		cmocka_unit_test(test_stops_lab_shutdown),
		cmocka_unit_test(test_stops_truncated),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
