/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Retention: the records and reports of finished updates are kept for the newest [Reports]
 * Keep= of them (docs/policy.md); older ones go when the daemon starts, before anything
 * else sees them (context_prune()), and again whenever an update finished
 * (context_retain(), from the event loop), so that one daemon process that rolls back again
 * and again keeps Keep= records on disk and Keep= updates in memory, not every one it saw.
 *
 * One update goes in this order: its report, its saved memory map, its record last. The
 * record is what lists an update, so an interrupted prune leaves it listed and the next
 * start finishes the job; a report that cannot be removed keeps its record too.
 */

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "context-private.h"
#include "log.h"
#include "memrange.h"

static bool finished(const Update *u) {
	return u->state == UPDATE_DONE || u->state == UPDATE_FAILED || u->state == UPDATE_CANCELLED;
}

static int unlink_missing_ok(const char *path) {
	return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
}

/* memmap/<id>/N/{start,end,type}, then memmap/<id>.pmem: no deeper than that. */
static int remove_memmap(Context *c, const char *id) {
	_cleanup_free_ char *dir = NULL, *pmem = NULL;
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (context_memmap_path(c, id, &dir) < 0 ||
	    asprintf(&pmem, "%s%s", dir, MEMRANGE_PMEM_SUFFIX) < 0)
		return -ENOMEM;
	d = opendir(dir);
	if (d) {
		while (r >= 0 && (de = readdir(d))) {
			static const char *const fields[] = { "start", "end", "type" };
			_cleanup_free_ char *sub = NULL;

			if (de->d_name[0] == '.')
				continue;
			if (asprintf(&sub, "%s/%s", dir, de->d_name) < 0) {
				r = -ENOMEM;
				break;
			}
			for (size_t i = 0; r >= 0 && i < ELEMENTSOF(fields); i++) {
				_cleanup_free_ char *f = NULL;

				if (asprintf(&f, "%s/%s", sub, fields[i]) < 0)
					r = -ENOMEM;
				else
					r = unlink_missing_ok(f);
			}
			if (r >= 0 && rmdir(sub) < 0 && errno != ENOENT)
				r = -errno;
		}
		closedir(d);
		if (r >= 0 && rmdir(dir) < 0 && errno != ENOENT)
			r = -errno;
	} else if (errno != ENOENT)
		r = -errno;
	return r < 0 ? r : unlink_missing_ok(pmem);
}

static int remove_update_files(Context *c, const char *id) {
	_cleanup_free_ char *report = NULL, *record = NULL;
	int r;

	if (context_report_path(c, id, &report) < 0 || context_record_path(c, id, &record) < 0)
		return -ENOMEM;
	r = unlink_missing_ok(report);
	if (r >= 0)
		r = remove_memmap(c, id);
	if (r >= 0)
		r = unlink_missing_ok(record);
	return r;
}

/* Removes the files of the oldest finished updates beyond Keep= and marks each removed
 * one in drop[] (c->n_updates entries); announce: ops.update_removed is told of each while
 * the update is still listed. Returns how many were marked. */
static size_t prune_files(Context *c, bool *drop, bool announce) {
	uint64_t keep = c->policy ? c->policy->keep_reports : POLICY_KEEP_REPORTS_DEFAULT;
	size_t n_finished = 0, excess, n_dropped = 0;

	for (size_t i = 0; i < c->n_updates; i++)
		n_finished += finished(c->updates[i]);
	if (keep == UINT64_MAX || n_finished <= keep)
		return 0;
	excess = n_finished - (size_t)keep;
	/* c->updates is oldest first: sorted by context_load(), appended by stage. */
	for (size_t i = 0; i < c->n_updates && excess > 0; i++) {
		Update *u = c->updates[i];
		int r;

		if (!finished(u))
			continue;
		excess--;
		r = remove_update_files(c, u->id);
		if (r < 0) {
			log_warning_errno(r, "Could not prune update %s, keeping it: %m", u->id);
			continue;
		}
		log_debug("Pruned update %s ([Reports] Keep=%" PRIu64 ").", u->id, keep);
		if (announce && c->ops.update_removed)
			c->ops.update_removed(c, u, c->ops_userdata);
		drop[i] = true;
		n_dropped++;
	}
	return n_dropped;
}

static int prune(Context *c, bool announce) {
	_cleanup_free_ bool *drop = NULL;
	size_t k = 0;

	if (c->n_updates == 0)
		return 0;
	drop = calloc(c->n_updates, sizeof(*drop));
	if (!drop)
		return -ENOMEM;
	if (prune_files(c, drop, announce) == 0)
		return 0;
	for (size_t i = 0; i < c->n_updates; i++) {
		Update *u = c->updates[i];

		if (!drop[i]) {
			c->updates[k++] = u;
			continue;
		}
		if (streq_ptr(c->last_report, u->id)) {
			free(c->last_report);
			c->last_report = NULL;
		}
		update_free(u);
	}
	c->n_updates = k;
	return 0;
}

int context_prune(Context *c) {
	return prune(c, false);
}

int context_retain(Context *c) {
	int r = prune(c, true);

	if (r < 0)
		return log_warning_errno(r, "Could not prune old updates, ignoring: %m");
	return 0;
}
