/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "string-util.h"
#include "unitchain.h"

void unit_times_done(UnitTimes *t) {
	strv_free(t->after);
	t->after = NULL;
}

/* Units looked up during one walk, each once: After= lists overlap a lot
 * (basic.target, sysinit.target, ...) and each lookup is a round trip to systemd. */
typedef struct Seen {
	char *unit;
	int r; /* the lookup's result */
	UnitTimes t;
} Seen;

typedef struct Walk {
	UnitTimesLookup lookup;
	void *userdata;
	Seen **seen; /* each on its own: the walk holds pointers into them */
	size_t n_seen;
} Walk;

static void walk_done(Walk *w) {
	for (size_t i = 0; i < w->n_seen; i++) {
		free(w->seen[i]->unit);
		unit_times_done(&w->seen[i]->t);
		free(w->seen[i]);
	}
	free(w->seen);
}

/* The unit's times (NULL when unknown); *ret_error: a lookup failure other than
 * -ENOENT, which ends the walk. */
static const UnitTimes *walk_times(Walk *w, const char *unit, int *ret_error) {
	Seen **l, *s;

	for (size_t i = 0; i < w->n_seen; i++)
		if (streq(w->seen[i]->unit, unit))
			return w->seen[i]->r >= 0 ? &w->seen[i]->t : NULL;
	l = reallocarray(w->seen, w->n_seen + 1, sizeof(*l));
	if (!l) {
		*ret_error = -ENOMEM;
		return NULL;
	}
	w->seen = l;
	s = calloc(1, sizeof(*s));
	if (!s || !(s->unit = strdup(unit))) {
		free(s);
		*ret_error = -ENOMEM;
		return NULL;
	}
	w->seen[w->n_seen++] = s;
	s->r = w->lookup(unit, &s->t, w->userdata);
	if (s->r < 0 && s->r != -ENOENT)
		*ret_error = s->r;
	return s->r >= 0 ? &s->t : NULL;
}

static bool chain_has(const UnitChain *c, const char *unit) {
	for (size_t i = 0; i < c->n_links; i++)
		if (streq(c->links[i].unit, unit))
			return true;
	return false;
}

static int chain_add(UnitChain *c, const char *unit, const UnitTimes *t) {
	UnitChainLink *l = reallocarray(c->links, c->n_links + 1, sizeof(*l));

	if (!l)
		return -ENOMEM;
	c->links = l;
	l[c->n_links] = (UnitChainLink){ .unit = strdup(unit),
		                         .activating_us = t->activating_us,
		                         .activated_us = t->activated_us };
	if (!l[c->n_links].unit)
		return -ENOMEM;
	c->n_links++;
	return 0;
}

/* Of cur's After= dependencies, the one that became active last, but no later than cur
 * began starting: a unit that became active after that (restarted later, or started
 * by something else) did not hold cur up. NULL: none did (the chain's start). */
static const char *walk_next(Walk *w, const UnitChain *c, const UnitTimes *cur, int *ret_error) {
	uint64_t bound = cur->activating_us ?: cur->activated_us, best_at = 0;
	const char *best = NULL;

	for (char **d = cur->after; d && *d; d++) {
		const UnitTimes *t;

		if (chain_has(c, *d))
			continue;
		t = walk_times(w, *d, ret_error);
		if (*ret_error < 0)
			return NULL;
		if (!t || t->activated_us == 0 || t->activated_us > bound)
			continue;
		if (t->activated_us > best_at) {
			best_at = t->activated_us;
			best = *d;
		}
	}
	return best;
}

int unit_chain_build(const char *target, UnitTimesLookup lookup, void *userdata, UnitChain *ret) {
	Walk w = { .lookup = lookup, .userdata = userdata };
	UnitChain c = {};
	const UnitTimes *cur;
	const char *next;
	int r = 0;

	cur = walk_times(&w, target, &r);
	if (!cur && r == 0)
		r = -ENOENT;
	else if (cur && cur->activated_us == 0)
		r = -ENODATA;
	for (next = target; r == 0 && next;) {
		if (c.n_links == UNIT_CHAIN_MAX) {
			c.truncated = true;
			break;
		}
		r = chain_add(&c, next, cur);
		if (r < 0)
			break;
		next = walk_next(&w, &c, cur, &r);
		if (next)
			cur = walk_times(&w, next, &r);
	}
	walk_done(&w);
	if (r < 0) {
		unit_chain_done(&c);
		return r;
	}
	/* Earliest first, as a reader follows the boot. */
	for (size_t i = 0; i < c.n_links / 2; i++) {
		UnitChainLink t = c.links[i];
		c.links[i] = c.links[c.n_links - 1 - i];
		c.links[c.n_links - 1 - i] = t;
	}
	*ret = c;
	return 0;
}

void unit_chain_done(UnitChain *c) {
	for (size_t i = 0; i < c->n_links; i++)
		free(c->links[i].unit);
	free(c->links);
	*c = (UnitChain){};
}

static UnitStop *stops_find(UnitStops *s, const char *unit) {
	for (size_t i = 0; i < s->n_stops; i++)
		if (streq(s->stops[i].unit, unit))
			return &s->stops[i];
	return NULL;
}

static int cmp_stop_end(const void *a, const void *b) {
	const UnitStop *x = a, *y = b;

	return x->end_us < y->end_us ? -1 : x->end_us > y->end_us ? 1 : strcmp(x->unit, y->unit);
}

/* The stop of e->unit that ends at e: its latest "Stopping" no later than e. */
static bool stop_begin(const UnitStopEntry *entries, size_t n, const UnitStopEntry *e,
                       uint64_t *ret) {
	bool found = false;

	for (size_t i = 0; i < n; i++)
		if (entries[i].kind == UNIT_STOP_BEGIN && streq(entries[i].unit, e->unit) &&
		    entries[i].monotonic_us <= e->monotonic_us &&
		    (!found || entries[i].monotonic_us > *ret)) {
			*ret = entries[i].monotonic_us;
			found = true;
		}
	return found;
}

int unit_stops_build(const UnitStopEntry *entries, size_t n, uint64_t cut_us, UnitStops *ret) {
	UnitStops s = {};

	for (size_t i = 0; i < n; i++) {
		const UnitStopEntry *e = &entries[i];
		UnitStop *st;

		if (e->kind != UNIT_STOP_END || e->monotonic_us < cut_us || !e->unit)
			continue;
		st = stops_find(&s, e->unit);
		if (st && st->end_us >= e->monotonic_us)
			continue; /* a later stop of the unit is already kept */
		if (!st) {
			if (s.n_stops == UNIT_STOPS_MAX) {
				s.truncated = true;
				continue;
			}
			st = reallocarray(s.stops, s.n_stops + 1, sizeof(*st));
			if (!st)
				goto oom;
			s.stops = st;
			st = &s.stops[s.n_stops];
			*st = (UnitStop){ .unit = strdup(e->unit) };
			if (!st->unit)
				goto oom;
			s.n_stops++;
		}
		st->end_us = e->monotonic_us;
		st->has_begin = stop_begin(entries, n, e, &st->begin_us);
		if (!st->has_begin)
			st->begin_us = st->end_us;
	}
	if (s.n_stops > 1)
		qsort(s.stops, s.n_stops, sizeof(*s.stops), cmp_stop_end);
	*ret = s;
	return 0;
oom:
	unit_stops_done(&s);
	return -ENOMEM;
}

void unit_stops_done(UnitStops *s) {
	for (size_t i = 0; i < s->n_stops; i++)
		free(s->stops[i].unit);
	free(s->stops);
	*s = (UnitStops){};
}

static uint64_t link_time(const UnitChainLink *l) {
	return l->activating_us && l->activated_us > l->activating_us
	               ? l->activated_us - l->activating_us
	               : 0;
}

const UnitChainLink *unit_chain_longest(const UnitChain *c) {
	const UnitChainLink *best = NULL;

	for (size_t i = 0; i < c->n_links; i++)
		if (!best || link_time(&c->links[i]) > link_time(best))
			best = &c->links[i];
	return best;
}

const UnitStop *unit_stops_longest(const UnitStops *s) {
	const UnitStop *best = NULL;

	for (size_t i = 0; i < s->n_stops; i++)
		if (!best ||
		    s->stops[i].end_us - s->stops[i].begin_us > best->end_us - best->begin_us)
			best = &s->stops[i];
	return best;
}

static json_object *us_to_ns(uint64_t us) {
	return json_object_new_int64((int64_t)(us * 1000));
}

/* One entry {unit, <begin> (null when !has_begin), <end>, time_ns}, in ns. */
static json_object *entry_json(const char *unit, const char *begin_key, bool has_begin,
                               uint64_t begin_us, const char *end_key, uint64_t end_us,
                               uint64_t time_us) {
	json_object *o = json_object_new_object();

	if (!o)
		return NULL;
	json_object_object_add(o, "unit", json_object_new_string(unit));
	json_object_object_add(o, begin_key, has_begin ? us_to_ns(begin_us) : NULL);
	json_object_object_add(o, end_key, us_to_ns(end_us));
	json_object_object_add(o, "time_ns", us_to_ns(time_us));
	return o;
}

/* An array of n entries made by entry(base, i). */
static int array_json(const void *base, size_t n, json_object *(*entry)(const void *, size_t),
                      json_object **ret) {
	json_object *a = json_object_new_array();

	if (!a)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		json_object *o = entry(base, i);

		if (!o || json_object_array_add(a, o) < 0) {
			json_object_put(o);
			json_object_put(a);
			return -ENOMEM;
		}
	}
	*ret = a;
	return 0;
}

static json_object *link_entry(const void *base, size_t i) {
	const UnitChainLink *l = &((const UnitChain *)base)->links[i];

	return entry_json(l->unit, "activating_ns", l->activating_us != 0, l->activating_us,
	                  "activated_ns", l->activated_us, link_time(l));
}

static json_object *stop_entry(const void *base, size_t i) {
	const UnitStop *st = &((const UnitStops *)base)->stops[i];

	return entry_json(st->unit, "stopping_ns", st->has_begin, st->begin_us, "stopped_ns",
	                  st->end_us, st->end_us - st->begin_us);
}

int unit_chain_to_json(const UnitChain *c, json_object **ret) {
	return array_json(c, c->n_links, link_entry, ret);
}

int unit_stops_to_json(const UnitStops *s, json_object **ret) {
	return array_json(s, s->n_stops, stop_entry, ret);
}
