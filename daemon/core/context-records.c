/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <systemd/sd-id128.h>

#include "cmdline.h"
#include "context-private.h"
#include "fileio.h"
#include "handoff-facts.h"
#include "image.h"
#include "json-util.h"
#include "kexec-loader.h"
#include "log.h"
#include "memrange.h"
#include "path-util.h"
#include "report.h"
#include "string-util.h"
#include "upgrade-bus.h"

int context_add_update(Context *c, Update *u) {
	Update **n = realloc(c->updates, (c->n_updates + 1) * sizeof(*n));

	if (!n)
		return -ENOMEM;
	c->updates = n;
	c->updates[c->n_updates++] = u;
	return 0;
}

int context_record_path(Context *c, const char *id, char **ret) {
	if (asprintf(ret, "%s/updates/%s.json", c->state_dir, id) < 0)
		return -ENOMEM;
	return 0;
}

int context_report_path(Context *c, const char *id, char **ret) {
	if (asprintf(ret, "%s/reports/%s.json", c->state_dir, id) < 0)
		return -ENOMEM;
	return 0;
}

int context_memmap_path(Context *c, const char *id, char **ret) {
	if (asprintf(ret, "%s/memmap/%s", c->state_dir, id) < 0)
		return -ENOMEM;
	return 0;
}

/* One range of /sys/firmware/memmap (its start, end and type files) into dst. */
static int copy_memmap_range(const char *src, const char *dst, const char *name) {
	static const char *const fields[] = { "start", "end", "type" };
	_cleanup_free_ char *dir = NULL;
	int r;

	if (asprintf(&dir, "%s/%s", dst, name) < 0)
		return -ENOMEM;
	r = mkdir_p(dir, 0755);
	if (r < 0)
		return r;
	for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
		_cleanup_free_ char *from = NULL, *to = NULL, *data = NULL;
		size_t size = 0;

		if (asprintf(&from, "%s/%s/%s", src, name, fields[i]) < 0 ||
		    asprintf(&to, "%s/%s", dir, fields[i]) < 0)
			return -ENOMEM;
		r = read_file_full(from, 4096, &data, &size);
		if (r < 0)
			return r;
		r = write_file_atomic(to, data, size, 0644);
		if (r < 0)
			return r;
	}
	return 0;
}

/* The firmware memory map, saved with the update when a crash image is loaded:
 * the crash kernel sees only its reservation (its own /sys/firmware/memmap is the
 * confined one the panic image gave it), and the kernel it starts must get the
 * whole machine. */
int context_save_memmap(Context *c, Update *u) {
	_cleanup_free_ char *src = NULL, *dst = NULL;
	struct dirent *de;
	unsigned n = 0;
	int r = 0;
	DIR *d;

	if (path_prefix_root(c->root, "/sys/firmware/memmap", &src) < 0 ||
	    context_memmap_path(c, u->id, &dst) < 0)
		return -ENOMEM;
	d = opendir(src);
	if (!d)
		return -errno;
	while (r >= 0 && (de = readdir(d))) {
		if (de->d_name[0] == '\0' || strspn(de->d_name, "0123456789") != strlen(de->d_name))
			continue; /* ".", "..": the ranges are numbered */
		r = copy_memmap_range(src, dst, de->d_name);
		n++;
	}
	closedir(d);
	if (r >= 0 && n == 0)
		r = -EBADMSG;
	/* Beside it, the persistent-memory ranges the crash kernel cannot see: the kernel
	 * it loads keeps out of them (kept VM RAM lives there). */
	if (r >= 0) {
		int k = memrange_write_saved_pmem(c->root, dst);

		/* Hidden addresses (no CAP_SYS_ADMIN): the kept-memory facts refuse keep-ram. */
		if (k < 0 && k != -EPERM)
			r = k;
	}
	return r;
}

/* Writes u's record. Then gives the test seam its chance to "crash". */
int context_persist(Context *c, Update *u) {
	_cleanup_(json_object_putp) json_object *o = NULL;
	_cleanup_free_ char *path = NULL, *dir = NULL;
	int r;

	r = update_to_json(u, &o);
	if (r < 0)
		return r;
	r = context_record_path(c, u->id, &path);
	if (r < 0)
		return r;
	if (asprintf(&dir, "%s/updates", c->state_dir) < 0)
		return -ENOMEM;
	r = json_write_file_atomic(dir, path, o);
	if (r < 0)
		return log_error_errno(r, "Failed to persist update record '%s': %m", path);
	c->persist_step++;
	if (c->persist_hook)
		return c->persist_hook(c, u, c->persist_step, c->persist_hook_userdata);
	return 0;
}

void context_notify_update(Context *c, Update *u) {
	if (c->ops.update_changed)
		c->ops.update_changed(c, u, c->ops_userdata);
	if (c->ops.manager_changed)
		c->ops.manager_changed(c, c->ops_userdata);
}

/*
 * The only way an update changes state: apply in memory, persist, and undo the
 * in-memory change if the record could not be written. Callers act on the new
 * state only after this returned >= 0, so the disk always leads.
 */
int context_transition(Context *c, Update *u, UpdateState state, const char *phase,
                       unsigned progress) {
	UpdateState old_state = u->state;
	unsigned old_progress = u->progress;
	_cleanup_free_ char *old_phase = TAKE_PTR(u->phase);
	int r;

	u->phase = strdup(phase);
	if (!u->phase) {
		u->phase = TAKE_PTR(old_phase);
		return -ENOMEM;
	}
	u->state = state;
	u->progress = progress;

	r = context_persist(c, u);
	if (r < 0 && r != -ECANCELED) {
		free(u->phase);
		u->phase = TAKE_PTR(old_phase);
		u->state = old_state;
		u->progress = old_progress;
		return r;
	}
	if (update_state_is_terminal(u->state) && c->active == u)
		c->active = NULL;
	if (r >= 0)
		context_notify_update(c, u);
	return r;
}

int context_transition_stamped(Context *c, Update *u, const char *stamp, bool with_tsc,
                               UpdateState state, const char *phase, unsigned progress) {
	int r = 0;

	if (stamp)
		r = update_add_stamp(u, stamp, with_tsc, c->boot_id);
	if (r < 0)
		return r;
	r = context_transition(c, u, state, phase, progress);
	if (stamp && r < 0 && r != -ECANCELED)
		update_drop_last_stamp(u);
	return r;
}

int context_transition_setting(Context *c, Update *u, char **field, const char *value,
                               const char *stamp, bool with_tsc, UpdateState state,
                               const char *phase, unsigned progress) {
	_cleanup_free_ char *old = NULL;
	int r;

	if (!field)
		return context_transition_stamped(c, u, stamp, with_tsc, state, phase, progress);
	if (value && !(value = strdup(value)))
		return -ENOMEM;
	old = *field;
	*field = (char *)value;
	r = context_transition_stamped(c, u, stamp, with_tsc, state, phase, progress);
	if (r < 0 && r != -ECANCELED) {
		free(*field);
		*field = TAKE_PTR(old);
	}
	return r;
}

int context_write_report(Context *c, Update *u) {
	_cleanup_(json_object_putp) json_object *o = NULL;
	_cleanup_free_ char *path = NULL, *dir = NULL;
	int r;

	r = report_build(u, c->backend->test_only && streq_ptr(u->backend, c->backend->name), &o);
	if (r < 0)
		return r;
	CONTEXT_FOREACH_STEP (s, c) {
		if (!s->vt->report_extend)
			continue;
		/* Measurement is best effort: the report says what is missing. */
		r = s->vt->report_extend(c, u, o, s->userdata);
		if (r < 0)
			log_warning_errno(r, "Measurement of update %s incomplete, ignoring: %m",
			                  u->id);
	}
	r = report_finish(o, context_root(c));
	if (r < 0)
		return log_error_errno(r, "Failed to complete the report of update %s: %m", u->id);
	r = context_report_path(c, u->id, &path);
	if (r < 0)
		return r;
	if (asprintf(&dir, "%s/reports", c->state_dir) < 0)
		return -ENOMEM;
	r = json_write_file_atomic(dir, path, o);
	if (r < 0)
		return log_error_errno(r, "Failed to write report '%s': %m", path);
	r = update_set_string(&c->last_report, u->id);
	if (r < 0)
		return r;
	if (c->ops.manager_changed)
		c->ops.manager_changed(c, c->ops_userdata);
	(void)report_journal(o, path);
	if (c->ops.report_ready)
		c->ops.report_ready(c, u, path, c->ops_userdata);
	return 0;
}

int context_finish(Context *c, Update *u, const char *result) {
	int r = 0;

	if (u->state == UPDATE_DONE || u->state == UPDATE_FAILED)
		r = context_write_report(c, u);
	if (c->ops.finished)
		c->ops.finished(c, u, result, c->ops_userdata);
	if (c->settled)
		c->settled(c, c->settled_userdata);
	return r;
}

/* The end of every failure: why (NULL: the error already recorded), the "failed"
 * stamp, the persisted terminal state, the report. */
int context_mark_failed(Context *c, Update *u, const char *why) {
	int r;

	r = context_transition_setting(c, u, why ? &u->error : NULL, why, "failed", false,
	                               UPDATE_FAILED, PHASE_FAILED, 100);
	if (r < 0)
		return r;
	return context_finish(c, u, "failed");
}

static int context_load_one(Context *c, const char *path) {
	_cleanup_(update_freep) Update *u = NULL;
	_cleanup_free_ char *data = NULL;
	int r;

	r = read_file_full(path, RECORD_MAX, &data, NULL);
	if (r < 0)
		return r;
	r = update_from_record(data, &u);
	if (r < 0)
		return r;
	if (context_find(c, u->id))
		return -EEXIST;
	if (!update_state_is_terminal(u->state)) {
		if (c->active)
			return -EBUSY;
		c->active = u;
	}
	r = context_add_update(c, u);
	if (r < 0) {
		if (c->active == u)
			c->active = NULL;
		return r;
	}
	TAKE_PTR(u);
	return 0;
}

static uint64_t first_stamp(const Update *u) {
	return u->n_stamps > 0 ? u->stamps[0].realtime_usec : 0;
}

static int cmp_updates(const void *a, const void *b) {
	uint64_t x = first_stamp(*(Update *const *)a), y = first_stamp(*(Update *const *)b);

	return x < y ? -1 : x > y;
}

int context_load(Context *c) {
	_cleanup_free_ char *dir = NULL;
	struct dirent *de;
	uint64_t newest = 0;
	DIR *d;

	if (asprintf(&dir, "%s/updates", c->state_dir) < 0)
		return -ENOMEM;
	(void)context_remove_leftovers(c, "updates");
	(void)context_remove_leftovers(c, "reports");
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		_cleanup_free_ char *p = NULL;
		size_t n = strlen(de->d_name);
		int r;

		if (n != UPDATE_ID_LEN + 5 || !streq(de->d_name + UPDATE_ID_LEN, ".json"))
			continue; /* strangers (context_remove_leftovers() took the temporaries) */
		if (asprintf(&p, "%s/%s", dir, de->d_name) < 0) {
			closedir(d);
			return -ENOMEM;
		}
		r = context_load_one(c, p);
		if (r < 0)
			log_error_errno(r, "Ignoring update record '%s': %m", p);
	}
	closedir(d);
	if (c->n_updates > 1)
		qsort(c->updates, c->n_updates, sizeof(*c->updates), cmp_updates);
	if (context_prune(c) < 0)
		return -ENOMEM;

	/* LastReport: the newest finished update that has a report. */
	for (size_t i = 0; i < c->n_updates; i++) {
		Update *u = c->updates[i];
		_cleanup_free_ char *p = NULL;
		const UpdateStamp *s;

		if (u->state != UPDATE_DONE && u->state != UPDATE_FAILED)
			continue;
		if (u->n_stamps == 0 || context_report_path(c, u->id, &p) < 0 ||
		    access(p, F_OK) < 0)
			continue;
		s = &u->stamps[u->n_stamps - 1];
		if (s->realtime_usec >= newest) {
			newest = s->realtime_usec;
			if (update_set_string(&c->last_report, u->id) < 0)
				return -ENOMEM;
		}
	}
	return 0;
}
