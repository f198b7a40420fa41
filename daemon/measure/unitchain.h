/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The critical path around the handoff, from systemd's own records:
 *
 *  - On the new kernel, the chain of units the restore waited for: from the unit that
 *    runs the restore (upgraded.service) down its After= dependencies, at each step the
 *    one that became active last before the unit above it began starting, the way
 *    `systemd-analyze critical-chain` walks it. Each unit with the CLOCK_MONOTONIC
 *    microseconds (this boot) at which it began starting and became active, as systemd
 *    records them (InactiveExitTimestampMonotonic, ActiveEnterTimestampMonotonic).
 *
 *  - On the old kernel, the units whose stop ran after the VMs were saved: systemd's
 *    "Stopping X..." and "Stopped X." journal entries of the old boot, paired per unit,
 *    kept when the stop ended after a cut (the reboot request, which follows the saves).
 *
 * Pure code: the readers (systemd over D-Bus, the journal) are seams, so the chains can
 * be built from recorded timestamps.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#define UNIT_CHAIN_MAX 64 /* links followed; a longer chain is cut (and says so) */
#define UNIT_STOPS_MAX 512

/* What the chain needs of one unit. activating_us 0: never began starting in this
 * boot (or the unit has no such record); activated_us 0: never became active. */
typedef struct UnitTimes {
	uint64_t activating_us;
	uint64_t activated_us;
	char **after; /* the After= dependencies, NULL-terminated; may be NULL */
} UnitTimes;

void unit_times_done(UnitTimes *t);

/* Fills *ret for unit (ret->after owned by the caller afterwards). -ENOENT: systemd
 * knows no such unit; any other negative errno aborts the walk with that error. */
typedef int (*UnitTimesLookup)(const char *unit, UnitTimes *ret, void *userdata);

typedef struct UnitChainLink {
	char *unit;
	uint64_t activating_us;
	uint64_t activated_us;
} UnitChainLink;

typedef struct UnitChain {
	UnitChainLink *links; /* earliest first; the last one is the target */
	size_t n_links;
	bool truncated; /* UNIT_CHAIN_MAX was reached */
} UnitChain;

/* Walks from target. -ENOENT: the target is unknown; -ENODATA: it never became
 * active in this boot (no chain leads to it). */
int unit_chain_build(const char *target, UnitTimesLookup lookup, void *userdata, UnitChain *ret);
void unit_chain_done(UnitChain *c);

typedef enum UnitStopKind {
	UNIT_STOP_BEGIN, /* "Stopping X..." (a stop job began) */
	UNIT_STOP_END,   /* "Stopped X." (it finished) */
} UnitStopKind;

typedef struct UnitStopEntry {
	const char *unit;
	UnitStopKind kind;
	uint64_t monotonic_us; /* the old boot's CLOCK_MONOTONIC */
} UnitStopEntry;

typedef struct UnitStop {
	char *unit;
	uint64_t begin_us; /* == end_us when no "Stopping" entry was logged (targets, sockets) */
	uint64_t end_us;
	bool has_begin;
} UnitStop;

typedef struct UnitStops {
	UnitStop *stops; /* in the order their stops ended */
	size_t n_stops;
	bool truncated; /* UNIT_STOPS_MAX was reached */
} UnitStops;

/* Pairs entries (in any order) per unit and keeps the stops that ended at or after
 * cut_us. A unit stopped twice keeps its last stop; a "Stopping" without a "Stopped"
 * (the handoff came first) is left out. */
int unit_stops_build(const UnitStopEntry *entries, size_t n, uint64_t cut_us, UnitStops *ret);
void unit_stops_done(UnitStops *s);

/* The longest link or stop (by its own duration); NULL when empty. */
const UnitChainLink *unit_chain_longest(const UnitChain *c);
const UnitStop *unit_stops_longest(const UnitStops *s);

/* JSON, times in ns: each link {unit, activating_ns, activated_ns, time_ns}, each stop
 * {unit, stopping_ns (null without a "Stopping" entry), stopped_ns, time_ns}; the
 * caller adds the positions on the report's axis. */
int unit_chain_to_json(const UnitChain *c, json_object **ret);
int unit_stops_to_json(const UnitStops *s, json_object **ret);
