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
#include "context.h"
#include "fileio.h"
#include "health.h"
#include "image.h"
#include "json-util.h"
#include "kexec-loader.h"
#include "log.h"
#include "path-util.h"
#include "report.h"
#include "string-util.h"
#include "upgrade-bus.h"

#define RECORD_MAX   (1u << 20)
/* kdump-tools' loader: what "restore the previous crash image" runs on cancel. */
#define KDUMP_CONFIG "/usr/sbin/kdump-config"

static const char *const hook_prefix[_HOOK_KIND_MAX] = {
	[HOOK_PRE_HANDOFF] = "pre",
	[HOOK_ROLLBACK] = "rollback",
	[HOOK_POST_BOOT] = "post",
};

/* ---- constructors / destructors ---- */

/* The panic image's mark on this kernel's command line (loader/loader.c). */
static bool running_on_panic_kernel(const char *root) {
	_cleanup_free_ char *path = NULL, *data = NULL;

	return path_prefix_root(root, "/proc/cmdline", &path) >= 0 &&
	       read_file_full(path, 4096, &data, NULL) >= 0 &&
	       cmdline_has_word(data, CMDLINE_PANIC_MARK);
}

/* Built-in pre-handoff step: the kernel must still hold the staged image. */
static int hook_image_loaded(Context *c, Update *u, void *userdata, char **ret_reason) {
	int r = c->backend->is_loaded(c->root, 0);

	if (r > 0)
		return 0;
	*ret_reason = strdup(r == 0 ? "the staged image is no longer loaded in the kernel"
	                            : "cannot tell whether the staged image is loaded");
	return r < 0 ? r : -ENOENT;
}

int context_new(const char *root, const KexecBackend *backend, Context **ret) {
	_cleanup_(context_freep) Context *c = NULL;
	struct utsname un;
	sd_id128_t boot;
	int r;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	if (root && *root && !streq(root, "/")) {
		c->root = strdup(root);
		if (!c->root)
			return -ENOMEM;
	}
	r = path_prefix_root(c->root, "/var/lib/upgraded", &c->state_dir);
	if (r < 0)
		return r;
	if (strv_extend(&c->allowed_roots, "/boot") < 0 ||
	    strv_extend(&c->allowed_roots, "/var/lib/upgraded/images") < 0)
		return -ENOMEM;

	if (backend) {
		c->backend = backend;
		c->backend_status = c->backend->probe(c->root, &c->backend_reason);
	} else {
		r = kexec_backend_select(c->root, &c->backend, &c->backend_status,
		                         &c->backend_reason, &c->backend_fallback);
		if (r < 0)
			return r;
	}

	if (uname(&un) < 0)
		return -errno;
	c->running_kernel = strdup(un.release);
	if (!c->running_kernel)
		return -ENOMEM;
	if (sd_id128_get_boot(&boot) >= 0)
		sd_id128_to_string(boot, c->boot_id);
	c->panic_kernel = running_on_panic_kernel(c->root);

	r = context_add_hook(c, HOOK_PRE_HANDOFF, "kexec-image-loaded", hook_image_loaded, NULL);
	if (r < 0)
		return r;

	*ret = TAKE_PTR(c);
	return 0;
}

Context *context_free(Context *c) {
	if (!c)
		return NULL;
	policy_free(c->policy);
	free(c->root);
	free(c->state_dir);
	strv_free(c->allowed_roots);
	free(c->backend_reason);
	free(c->running_kernel);
	for (size_t i = 0; i < c->n_updates; i++)
		update_free(c->updates[i]);
	free(c->updates);
	free(c->last_report);
	for (size_t i = 0; i < c->n_hooks; i++)
		free(c->hooks[i].name);
	free(c->hooks);
	free(c);
	return NULL;
}

int context_set_policy(Context *c, Policy *p) {
	char **roots = NULL;

	if (!p)
		return -EINVAL;
	STRV_FOREACH (r, p->allowed_roots)
		if (strv_extend(&roots, *r) < 0) {
			strv_free(roots);
			return -ENOMEM;
		}
	strv_free(c->allowed_roots);
	c->allowed_roots = roots;
	policy_free(c->policy);
	c->policy = p;
	return 0;
}

int context_add_hook(Context *c, HookKind kind, const char *name, HookFunc func, void *userdata) {
	Hook *n;

	if (kind < 0 || kind >= _HOOK_KIND_MAX || !name || !func)
		return -EINVAL;
	n = realloc(c->hooks, (c->n_hooks + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	c->hooks = n;
	c->hooks[c->n_hooks] =
	        (Hook){ .kind = kind, .name = strdup(name), .func = func, .userdata = userdata };
	if (!c->hooks[c->n_hooks].name)
		return -ENOMEM;
	c->n_hooks++;
	return 0;
}

/* ---- internal functions ---- */

static int context_add_update(Context *c, Update *u) {
	Update **n = realloc(c->updates, (c->n_updates + 1) * sizeof(*n));

	if (!n)
		return -ENOMEM;
	c->updates = n;
	c->updates[c->n_updates++] = u;
	return 0;
}

static int record_path(Context *c, const char *id, char **ret) {
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
static int context_save_memmap(Context *c, Update *u) {
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
	return r;
}

/* Writes u's record. Then gives the test seam its chance to "crash". */
static int context_persist(Context *c, Update *u) {
	_cleanup_(json_object_putp) json_object *o = NULL;
	_cleanup_free_ char *path = NULL, *dir = NULL;
	int r;

	r = update_to_json(u, &o);
	if (r < 0)
		return r;
	r = record_path(c, u->id, &path);
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

static void notify_update(Context *c, Update *u) {
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
static int context_transition(Context *c, Update *u, UpdateState state, const char *phase,
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
		notify_update(c, u);
	return r;
}

static int context_write_report(Context *c, Update *u) {
	_cleanup_(json_object_putp) json_object *o = NULL;
	_cleanup_free_ char *path = NULL, *dir = NULL;
	int r;

	r = report_build(u, c->backend->test_only && streq_ptr(u->backend, c->backend->name), &o);
	if (r < 0)
		return r;
	if (c->measure.report_extend) {
		/* Measurement is best effort: the report says what is missing. */
		r = c->measure.report_extend(c, u, o, c->measure.userdata);
		if (r < 0)
			log_warning_errno(r, "Measurement of update %s incomplete, ignoring: %m",
			                  u->id);
	}
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

/* "<kind>:<name>", the mark of a finished step in hooks_done. */
static int hook_key(const Hook *h, char **ret) {
	if (asprintf(ret, "%s:%s", hook_prefix[h->kind], h->name) < 0)
		return -ENOMEM;
	return 0;
}

/* Runs the hooks of one kind that have not run for u yet, persisting each mark.
 * Stops at the first failure (unless keep_going) and returns its error. */
static int context_run_hooks(Context *c, Update *u, HookKind kind, bool keep_going,
                             char **ret_reason) {
	int first_error = 0;

	for (size_t i = 0; i < c->n_hooks; i++) {
		Hook *h = &c->hooks[i];
		_cleanup_free_ char *key = NULL, *why = NULL;
		int r;

		if (h->kind != kind)
			continue;
		if (hook_key(h, &key) < 0)
			return -ENOMEM;
		if (update_hook_done(u, key))
			continue; /* done before a restart: never twice */

		r = h->func(c, u, h->userdata, &why);
		if (r < 0) {
			log_error_errno(r, "Step '%s' of update %s failed: %s", key, u->id,
			                why ?: "(no reason given)");
			if (first_error == 0) {
				first_error = r;
				if (ret_reason && asprintf(ret_reason, "step '%s' failed: %s", key,
				                           why ?: strerror(-r)) < 0)
					*ret_reason = NULL;
			}
			if (!keep_going)
				return r;
			continue;
		}
		r = strv_extend(&u->hooks_done, key);
		if (r < 0)
			return r;
		r = context_persist(c, u);
		if (r < 0)
			return r;
	}
	return first_error;
}

static int finish(Context *c, Update *u, const char *result) {
	int r = 0;

	if (u->state == UPDATE_DONE || u->state == UPDATE_FAILED)
		r = context_write_report(c, u);
	if (c->ops.finished)
		c->ops.finished(c, u, result, c->ops_userdata);
	return r;
}

/* The end of every failure: why (NULL: the error already recorded), the "failed"
 * stamp, the persisted terminal state, the report. */
static int context_mark_failed(Context *c, Update *u, const char *why) {
	int r;

	if (why) {
		r = update_set_string(&u->error, why);
		if (r < 0)
			return r;
	}
	r = update_add_stamp(u, "failed", false, c->boot_id);
	if (r < 0)
		return r;
	r = context_transition(c, u, UPDATE_FAILED, PHASE_FAILED, 100);
	if (r < 0)
		return r;
	return finish(c, u, "failed");
}

/*
 * The crash kernel cannot finish u: mark it failed and report. Nothing is given
 * back here, no rollback step runs: the crash kernel is confined to the
 * reservation and must not run VMs. What the VMs saved stays on disk and is
 * listed in the report (their results), for a regular boot to restore
 * (`upgradectl restore-vm NAME`, or libvirt's start from the managed save).
 */
static int context_panic_fail(Context *c, Update *u, const char *reason) {
	_cleanup_free_ char *msg = NULL;

	if (u->vms && json_object_array_length(u->vms) > 0 &&
	    asprintf(&msg, "%s; the VMs' saved state is kept on disk", reason) < 0)
		return -ENOMEM;
	log_error("Update %s failed on the crash kernel: %s", u->id, msg ?: reason);
	if (!u->panic_boot_id && (update_set_string(&u->panic_from_phase, u->phase) < 0 ||
	                          update_set_string(&u->panic_boot_id, c->boot_id) < 0))
		return -ENOMEM;
	return context_mark_failed(c, u, msg ?: reason);
}

/*
 * A commit that did not reach the new kernel: give everything back (rollback
 * steps: resume VMs), drop the loaded image, mark the update failed, report.
 * Resumable: entered again after a crash in any of its steps. On the crash
 * kernel nothing is given back (context_panic_fail()).
 */
static int context_commit_fail(Context *c, Update *u, const char *reason) {
	int r;

	if (c->panic_kernel)
		return context_panic_fail(
		        c, u, u->error && streq(u->phase, PHASE_ROLLBACK) ? u->error : reason);

	if (!streq(u->phase, PHASE_ROLLBACK)) {
		log_error("Update %s failed: %s", u->id, reason);
		r = update_set_string(&u->error, reason);
		if (r < 0)
			return r;
		r = context_transition(c, u, UPDATE_COMMITTING, PHASE_ROLLBACK, u->progress);
		if (r < 0)
			return r;
	}

	/* Every rollback step runs even if one fails: resume as much as possible. */
	r = context_run_hooks(c, u, HOOK_ROLLBACK, true, NULL);
	if (r == -ECANCELED)
		return r;

	/* Only this boot's kernel can hold the image; after a reboot nothing is loaded. */
	if (!u->handoff_boot_id || streq(u->handoff_boot_id, c->boot_id)) {
		if (c->backend->is_loaded(c->root, 0) > 0)
			(void)c->backend->unload(c->root, 0);
		if (u->crash_image_loaded && c->backend->is_loaded(c->root, KEXEC_IMAGE_PANIC) > 0)
			(void)c->backend->unload(c->root, KEXEC_IMAGE_PANIC);
	}
	return context_mark_failed(c, u, NULL);
}

/* On the new kernel: post-boot steps (restore VMs), then done and the report. */
static int context_complete(Context *c, Update *u) {
	_cleanup_free_ char *why = NULL;
	int r;

	if (u->state == UPDATE_COMMITTING) {
		r = update_set_string(&u->booted_kernel, c->running_kernel);
		if (r < 0)
			return r;
		r = update_add_stamp(u, "booted", true, c->boot_id);
		if (r < 0)
			return r;
		r = context_transition(c, u, UPDATE_COMPLETING, PHASE_POST_BOOT, 95);
		if (r < 0)
			return r;
	}

	r = context_run_hooks(c, u, HOOK_POST_BOOT, true, &why);
	if (r == -ECANCELED)
		return r;
	if (r < 0) {
		/* The new kernel runs; what failed is giving back state: say so. */
		return context_mark_failed(c, u, why ?: "a post-boot step failed");
	}

	r = update_add_stamp(u, "completed", false, c->boot_id);
	if (r < 0)
		return r;
	r = context_transition(c, u, UPDATE_DONE, PHASE_DONE, 100);
	if (r < 0)
		return r;
	log_info("Update %s completed: now running %s.", u->id, c->running_kernel);
	return finish(c, u, "done");
}

/* The crash image: always verified (never skip the check on the panic path).
 * Stage and its recovery are the only places a crash image is requested, and
 * these flags are constant: neither the policy nor the caller can make it fast.
 * Best effort (the update goes on without one); returns what persisting the
 * mark returned. */
static int context_load_crash_image(Context *c, Update *u, KexecImage *img) {
	int r;

	img->flags = KEXEC_IMAGE_VERIFIED | KEXEC_IMAGE_PANIC;
	/* The panic path leaves the crash kernel with this map (the crash kernel's
	 * own is the reservation): no map, no crash image. */
	r = context_save_memmap(c, u);
	if (r < 0) {
		log_warning_errno(r,
		                  "Cannot save the memory map for the panic path of update %s, "
		                  "no crash image loaded: %m",
		                  u->id);
		return 0;
	}
	r = c->backend->load(c->root, img);
	if (r < 0) {
		log_warning_errno(r, "Failed to load the crash image of update %s, ignoring: %m",
		                  u->id);
		return 0;
	}
	u->crash_image_loaded = true;
	return context_persist(c, u);
}

/*
 * The handoff record (what the next boot needs to finish the job; stamp names
 * it: "handoff", or "panic-handoff" out of the crash kernel), synced, then THE
 * POINT OF NO RETURN: ask systemd for kexec.target. Once systemd accepted the
 * job, services stop in order and the kernel is replaced; its answer arrives
 * through context_handoff_result(). A failure before that fails the commit.
 */
static int context_handoff(Context *c, Update *u, const char *stamp) {
	_cleanup_free_ char *msg = NULL;
	int r;

	r = update_set_string(&u->handoff_boot_id, c->boot_id);
	if (r < 0)
		return r;
	r = update_add_stamp(u, stamp, true, c->boot_id);
	if (r < 0)
		return r;
	r = context_transition(c, u, UPDATE_COMMITTING, PHASE_HANDOFF, 90);
	if (r == -ECANCELED)
		return r;
	if (r < 0)
		return context_commit_fail(c, u, "cannot persist the handoff record");

	/* Everything on disk before the machine goes down. */
	sync();

	log_info("Update %s: requesting kexec%s into %s.", u->id,
	         c->panic_kernel ? " from the crash kernel" : "", u->kernel_version);
	if (c->measure.handoff_request)
		c->measure.handoff_request(c, u, c->measure.userdata);
	r = c->ops.request_kexec ? c->ops.request_kexec(c, u, c->ops_userdata) : -ENOTCONN;
	if (r < 0) {
		if (asprintf(&msg, "requesting the kexec reboot failed: %s", strerror(-r)) < 0)
			return -ENOMEM;
		return context_commit_fail(c, u, msg);
	}
	return 0;
}

/* ---- loading and recovery ---- */

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
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		_cleanup_free_ char *p = NULL;
		size_t n = strlen(de->d_name);
		int r;

		if (n != UPDATE_ID_LEN + 5 || !streq(de->d_name + UPDATE_ID_LEN, ".json"))
			continue; /* temporary files of an interrupted write, strangers */
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

/* Opens the staged kernel (and initrd) again with the stage-time rules and
 * checks them against the digests recorded at stage. On failure *ret_why says
 * what changed (named, for the record). */
static int open_staged_files(Context *c, Update *u, ImageFile *k, ImageFile *i, char **ret_why) {
	_cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
	ImageRules rules = { .root = c->root,
		             .allowed = c->allowed_roots,
		             .owner = c->image_owner };
	const char *what = "kernel";
	int r;

	r = image_open(&rules, u->kernel.path, IMAGE_KERNEL, k, &error);
	if (r >= 0 && !streq(k->sha256, u->kernel.sha256))
		r = -EBADMSG;
	if (r >= 0 && u->initrd.path) {
		what = "initrd";
		r = image_open(&rules, u->initrd.path, IMAGE_INITRD, i, &error);
		if (r >= 0 && !streq(i->sha256, u->initrd.sha256))
			r = -EBADMSG;
	}
	if (r >= 0)
		return 0;
	if (asprintf(ret_why, "staged files changed or vanished since staging: %s",
	             error.message
	                     ?: r == -EBADMSG
	                        ? (streq(what, "kernel") ? "the kernel's SHA-256 differs"
	                                                 : "the initrd's SHA-256 differs")
	                        : strerror(-r)) < 0)
		*ret_why = NULL;
	return r;
}

/* A staged update found on start: after a reboot the kernel lost the images, and a
 * daemon stopped during stage may not have loaded the crash image yet, so load
 * what is missing, but only if the files still hold what was validated. */
static int context_recover_staged(Context *c, Update *u) {
	_cleanup_(image_file_done) ImageFile k = { .fd = -EBADF }, i = { .fd = -EBADF };
	_cleanup_free_ char *why = NULL;
	bool need_kernel, need_crash;
	KexecImage img;
	int r;

	/* A backend with a mode switch keeps the built image in the daemon: after a
	 * restart it has none, so it builds and loads again even if the kernel still
	 * holds the old copy. The crash image is ours only once the record says so. */
	need_kernel = c->backend->is_loaded(c->root, 0) <= 0 || c->backend->set_mode;
	need_crash =
	        kexec_crash_reserved(c->root) &&
	        (!u->crash_image_loaded || c->backend->is_loaded(c->root, KEXEC_IMAGE_PANIC) <= 0);
	if (!need_kernel && !need_crash)
		return 0;

	r = open_staged_files(c, u, &k, &i, &why);
	if (r >= 0) {
		img = (KexecImage){ .kernel_fd = k.fd,
			            .initrd_fd = i.fd,
			            .kernel_path = u->kernel.path,
			            .initrd_path = u->initrd.path,
			            .cmdline = u->cmdline,
			            .flags = KEXEC_IMAGE_VERIFIED };
		r = need_kernel ? c->backend->load(c->root, &img) : 0;
		if (r >= 0 && need_crash) {
			u->crash_image_loaded = false;
			return context_load_crash_image(c, u, &img);
		}
		if (r >= 0)
			return 0;
		if (asprintf(&why, "reloading the staged image failed: %s", strerror(-r)) < 0)
			return -ENOMEM;
	} else if (!why)
		return -ENOMEM;
	return context_mark_failed(c, u, why);
}

/* ---- the panic path (docs/state-machine.md) ---- */

/* The first pre-handoff step of this daemon that u has not finished, or NULL
 * when all are done (the VMs were checkpointed). */
static const char *pre_handoff_missing(Context *c, const Update *u) {
	for (size_t i = 0; i < c->n_hooks; i++) {
		_cleanup_free_ char *key = NULL;

		if (c->hooks[i].kind != HOOK_PRE_HANDOFF)
			continue;
		if (hook_key(&c->hooks[i], &key) < 0 || !update_hook_done(u, key))
			return c->hooks[i].name;
	}
	return NULL;
}

/*
 * On the crash kernel: take u over where the old kernel's crash left it. The
 * staged files are read again and must match the stage-time digests; the image
 * is an ordinary one (kexec_load, not the crash slot), always verified, placed
 * in and handed the machine's full memory map saved at stage; then the reboot is
 * requested through systemd like a regular handoff. The next kernel finds a
 * regular handoff record (handoff_boot_id = this boot) and completes the update.
 * Resumable: entered again when the daemon restarts on the same crash kernel.
 */
static int context_panic_handoff(Context *c, Update *u) {
	_cleanup_(image_file_done) ImageFile k = { .fd = -EBADF }, i = { .fd = -EBADF };
	_cleanup_free_ char *why = NULL, *memmap = NULL;
	KexecImage img;
	int r;

	/* 1. On disk first: the crash kernel took the update over, and from where. */
	if (!streq_ptr(u->panic_boot_id, c->boot_id)) {
		log_notice("Update %s: the old kernel crashed in phase '%s'; taking over on "
		           "the crash kernel.",
		           u->id, u->phase);
		if (update_set_string(&u->panic_from_phase, u->phase) < 0 ||
		    update_set_string(&u->panic_boot_id, c->boot_id) < 0)
			return -ENOMEM;
		r = update_add_stamp(u, "panic-recovery", true, c->boot_id);
		if (r < 0)
			return r;
		r = context_transition(c, u, UPDATE_COMMITTING, PHASE_PANIC_HANDOFF, 90);
		if (r < 0)
			return r;
	}

	/* 2. The staged files, read again: still what was hashed at stage? */
	r = open_staged_files(c, u, &k, &i, &why);
	if (r < 0)
		return why ? context_panic_fail(c, u, why) : -ENOMEM;

	/* 3. The whole machine's map, saved at stage. */
	r = context_memmap_path(c, u->id, &memmap);
	if (r < 0)
		return r;
	if (access(memmap, F_OK) < 0)
		return context_panic_fail(c, u,
		                          "no memory map was saved at stage: the crash kernel "
		                          "knows only its reservation");

	/* 4. An ordinary image, always verified, whatever the policy chose. */
	img = (KexecImage){ .kernel_fd = k.fd,
		            .initrd_fd = i.fd,
		            .kernel_path = u->kernel.path,
		            .initrd_path = u->initrd.path,
		            .cmdline = u->cmdline,
		            .flags = KEXEC_IMAGE_VERIFIED,
		            .memmap_dir = memmap };
	r = c->backend->load(c->root, &img);
	if (r < 0) {
		if (asprintf(&why, "loading the staged kernel on the crash kernel failed (%s): %s",
		             c->backend->name,
		             r == -EOPNOTSUPP ? "this backend cannot hand over the full memory map"
		                              : strerror(-r)) < 0)
			return -ENOMEM;
		return context_panic_fail(c, u, why);
	}
	if (!streq_ptr(u->handoff, "verified")) {
		if (asprintf(&why,
		             "panic path: verified out of the crash kernel (the policy had "
		             "chosen %s: %s)",
		             strna(u->handoff), strna(u->handoff_reason)) < 0)
			return -ENOMEM;
		free(u->handoff_reason);
		u->handoff_reason = TAKE_PTR(why);
		r = update_set_string(&u->handoff, "verified");
		if (r < 0)
			return r;
	}
	if (c->measure.panic_takeover)
		c->measure.panic_takeover(c, u, c->measure.userdata);

	/* 5. The handoff record of the second kexec and the reboot, as a regular
	 * commit does them (a failure ends in context_panic_fail()). */
	return context_handoff(c, u, "panic-handoff");
}

/*
 * Recovery on the crash kernel. Never restores or resumes a VM here (the crash
 * kernel is confined to the reservation): every record state either hands over
 * to the staged kernel or fails with a reason, VMs' saved state kept.
 */
static int context_recover_panic(Context *c, Update *u) {
	_cleanup_free_ char *why = NULL;
	const UpdateStamp *s = update_find_stamp(u, "commit-requested");
	const char *missing;

	switch (u->state) {
	case UPDATE_STAGED:
		/* Not committed: nothing was touched. Loading it here would place it in
		 * the reservation; the next regular boot reloads it. */
		log_notice("Update %s is staged; not reloaded on the crash kernel.", u->id);
		return 0;
	case UPDATE_COMPLETING:
		log_notice("Update %s is completing; its VMs are not restored on the crash "
		           "kernel.",
		           u->id);
		return 0;
	case UPDATE_COMMITTING:
		break;
	default:
		return 1; /* finished: the regular recovery checks its report */
	}

	/* Our own handoff, in this very boot (the daemon restarted). */
	if (streq_ptr(u->panic_boot_id, c->boot_id)) {
		if (streq(u->phase, PHASE_HANDOFF_REQUESTED)) {
			log_notice("Update %s: kexec already requested from the crash kernel, "
			           "waiting for it.",
			           u->id);
			return 0;
		}
		return context_panic_handoff(c, u);
	}
	/* Committed on this crash kernel itself: not a takeover. */
	if (s && streq(s->boot_id, c->boot_id))
		return 1;

	if (streq(u->phase, PHASE_ROLLBACK))
		return context_panic_fail(c, u,
		                          u->error ?: "the old kernel crashed during the rollback");
	if (streq(u->phase, PHASE_PRE_HANDOFF)) {
		missing = pre_handoff_missing(c, u);
		if (missing) {
			if (asprintf(&why,
			             "the old kernel crashed before the handoff, in step '%s' "
			             "(not every VM was checkpointed)",
			             missing) < 0)
				return -ENOMEM;
			return context_panic_fail(c, u, why);
		}
		return context_panic_handoff(c, u);
	}
	if (streq(u->phase, PHASE_HANDOFF) || streq(u->phase, PHASE_HANDOFF_REQUESTED) ||
	    streq(u->phase, PHASE_PANIC_HANDOFF))
		return context_panic_handoff(c, u);
	if (asprintf(&why, "the old kernel crashed in unknown phase '%s'", u->phase) < 0)
		return -ENOMEM;
	return context_panic_fail(c, u, why);
}

static int context_recover_one(Context *c, Update *u) {
	_cleanup_free_ char *why = NULL;
	bool new_boot, handed_off;

	if (c->panic_kernel) {
		int r = context_recover_panic(c, u);

		if (r <= 0)
			return r;
		/* 1: the regular recovery applies. */
	}

	switch (u->state) {
	case UPDATE_STAGED:
		return context_recover_staged(c, u);

	case UPDATE_COMPLETING:
		return context_complete(c, u);

	case UPDATE_COMMITTING:
		if (streq(u->phase, PHASE_ROLLBACK))
			return context_commit_fail(c, u, u->error ?: "rollback interrupted");

		handed_off =
		        streq(u->phase, PHASE_HANDOFF) || streq(u->phase, PHASE_HANDOFF_REQUESTED);
		new_boot = u->handoff_boot_id && !streq(u->handoff_boot_id, c->boot_id);

		if (handed_off && new_boot) {
			if (streq_ptr(c->running_kernel, u->kernel_version))
				return context_complete(c, u);
			if (asprintf(&why, "booted kernel %s after the handoff, not the staged %s",
			             c->running_kernel, u->kernel_version) < 0)
				return -ENOMEM;
			(void)update_set_string(&u->booted_kernel, c->running_kernel);
			return context_commit_fail(c, u, why);
		}
		if (streq(u->phase, PHASE_HANDOFF_REQUESTED)) {
			/* systemd accepted an irreversible kexec job in this very boot:
			 * the handoff is under way, giving anything back now would race it. */
			log_notice("Update %s: kexec already requested in this boot, waiting "
			           "for it.",
			           u->id);
			return 0;
		}
		if (asprintf(&why, "commit interrupted in phase '%s' before the handoff",
		             u->phase) < 0)
			return -ENOMEM;
		return context_commit_fail(c, u, why);

	case UPDATE_DONE:
	case UPDATE_FAILED: {
		_cleanup_free_ char *p = NULL;

		/* Finished, but a crash may have beaten the report to disk. */
		if (context_report_path(c, u->id, &p) < 0)
			return -ENOMEM;
		if (access(p, F_OK) < 0 && errno == ENOENT)
			return context_write_report(c, u);
		return 0;
	}
	default:
		return 0;
	}
}

int context_recover(Context *c) {
	int ret = 0;

	/* Iterate over a snapshot of the count: recovery never adds updates. */
	for (size_t i = 0; i < c->n_updates; i++) {
		Update *u = c->updates[i];
		int r = context_recover_one(c, u);

		if (r == -ECANCELED)
			return r;
		if (r < 0) {
			log_error_errno(r, "Failed to recover update %s: %m", u->id);
			if (ret == 0)
				ret = r;
		}
	}
	return ret;
}

/* ---- public entry points ---- */

Update *context_find(Context *c, const char *id) {
	for (size_t i = 0; i < c->n_updates; i++)
		if (streq(c->updates[i]->id, id))
			return c->updates[i];
	return NULL;
}

int context_lookup(Context *c, const char *id, Update **ret, sd_bus_error *error) {
	Update *u;

	if (!id || !*id) {
		if (!c->active)
			return sd_bus_error_setf(error, UPGRADE_ERROR_NO_SUCH_UPDATE,
			                         "No update is staged.");
		*ret = c->active;
		return 0;
	}
	if (!update_id_is_valid(id))
		return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_ID,
		                         "'%.32s' is not an update id (16 hex digits).", id);
	u = context_find(c, id);
	if (!u)
		return sd_bus_error_setf(error, UPGRADE_ERROR_NO_SUCH_UPDATE, "No update '%s'.",
		                         id);
	*ret = u;
	return 0;
}

static int read_proc_cmdline(Context *c, char **ret) {
	_cleanup_free_ char *path = NULL, *data = NULL;
	int r;

	r = path_prefix_root(c->root, "/proc/cmdline", &path);
	if (r < 0)
		return r;
	r = read_file_full(path, 4096, &data, NULL);
	if (r < 0)
		return r;
	return cmdline_strip_for_reuse(data, ret);
}

/* The test seam stopped stage right after a persisted step: keep the update in
 * memory the way a restarted daemon would find it on disk. */
static int context_keep_interrupted(Context *c, Update **u) {
	if (context_add_update(c, *u) >= 0)
		*u = NULL;
	return -ECANCELED;
}

/* Who loaded the crash image we are about to replace. The kernel cannot say and
 * cannot give the image back; what we can tell is whether the system's kdump
 * service (kdump-tools) is installed, which is the usual owner. */
static const char *crash_image_owner(Context *c) {
	_cleanup_free_ char *p = NULL;

	if (path_prefix_root(c->root, KDUMP_CONFIG, &p) >= 0 && access(p, X_OK) >= 0)
		return "kdump-tools";
	return "unknown";
}

int context_stage(Context *c, const StageRequest *req, Update **ret, sd_bus_error *error) {
	_cleanup_(image_file_done) ImageFile k = { .fd = -EBADF }, i = { .fd = -EBADF };
	ImageRules rules = { .root = c->root,
		             .allowed = c->allowed_roots,
		             .owner = c->image_owner };
	_cleanup_(update_freep) Update *u = NULL;
	_cleanup_free_ char *id = NULL, *cmdline = NULL, *path = NULL;
	KexecImage img;
	Update *staged;
	int r;

	/* 1. Validate everything before touching anything. */
	if (c->active)
		return sd_bus_error_setf(error, UPGRADE_ERROR_ALREADY_STAGED,
		                         "Update %s is already %s; cancel it first.", c->active->id,
		                         update_state_to_string(c->active->state));
	if (req->reuse_cmdline) {
		if (req->cmdline && *req->cmdline)
			return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_CMDLINE,
			                         "A command line and reuse-cmdline exclude each "
			                         "other.");
		r = read_proc_cmdline(c, &cmdline);
		if (r < 0)
			return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_CMDLINE,
			                         "Cannot read the running command line: %s.",
			                         strerror(-r));
	} else {
		cmdline = strdup(req->cmdline ?: "");
		if (!cmdline)
			return -ENOMEM;
	}
	r = cmdline_validate(cmdline, error);
	if (r < 0)
		return r;
	r = image_open(&rules, req->kernel, IMAGE_KERNEL, &k, error);
	if (r < 0)
		return r;
	if (req->initrd && *req->initrd) {
		r = image_open(&rules, req->initrd, IMAGE_INITRD, &i, error);
		if (r < 0)
			return r;
	}
	if (c->backend_status < 0)
		return sd_bus_error_setf(error, UPGRADE_ERROR_KEXEC_UNAVAILABLE,
		                         "Backend %s cannot load kernels here: %s.",
		                         c->backend->name, strna(c->backend_reason));

	/* 2. The record. */
	r = update_id_new(&id);
	if (r < 0)
		return r;
	u = update_new(id);
	if (!u)
		return -ENOMEM;
	u->kernel = (UpdateFile){ .path = TAKE_PTR(k.path),
		                  .size = k.size,
		                  .mtime_usec = k.mtime_usec,
		                  .inode = k.inode,
		                  .ctime_usec = k.ctime_usec };
	memcpy(u->kernel.sha256, k.sha256, sizeof(k.sha256));
	u->kernel_version = TAKE_PTR(k.version);
	if (update_set_string(&u->kernel_version_source, k.version_source) < 0)
		return -ENOMEM;
	if (i.path) {
		u->initrd = (UpdateFile){ .path = TAKE_PTR(i.path),
			                  .size = i.size,
			                  .mtime_usec = i.mtime_usec,
			                  .inode = i.inode,
			                  .ctime_usec = i.ctime_usec };
		memcpy(u->initrd.sha256, i.sha256, sizeof(i.sha256));
	}
	u->cmdline = TAKE_PTR(cmdline);
	u->reuse_cmdline = req->reuse_cmdline;
	if (update_set_string(&u->backend, c->backend->name) < 0 ||
	    update_set_string(&u->old_kernel, c->running_kernel) < 0)
		return -ENOMEM;
	if (c->backend_fallback && update_set_string(&u->backend_reason, c->backend_reason) < 0)
		return -ENOMEM;
	/* A crash image someone else loaded (kdump) is replaced by ours below: say who,
	 * so cancel can hand the panic path back (context_restore_crash_image()). */
	if (kexec_crash_reserved(c->root) &&
	    c->backend->is_loaded(c->root, KEXEC_IMAGE_PANIC) > 0 &&
	    update_set_string(&u->crash_image_before, crash_image_owner(c)) < 0)
		return -ENOMEM;
	r = update_add_stamp(u, "staged", false, c->boot_id);
	if (r < 0)
		return r;

	/* 3. Persist first: a crash after this finds a staged record and reloads. */
	r = context_persist(c, u);
	if (r == -ECANCELED)
		return context_keep_interrupted(c, &u);
	if (r < 0)
		return sd_bus_error_setf(error, UPGRADE_ERROR_PERSIST_FAILED,
		                         "Cannot write the update record: %s.", strerror(-r));

	/* 4. Preload: the commit path does no file I/O and no hashing. */
	img = (KexecImage){ .kernel_fd = k.fd,
		            .initrd_fd = i.fd,
		            .kernel_path = u->kernel.path,
		            .initrd_path = u->initrd.path,
		            .cmdline = u->cmdline,
		            .flags = KEXEC_IMAGE_VERIFIED };
	r = c->backend->load(c->root, &img);
	if (r < 0) {
		/* Nothing happened: remove the record again. */
		if (record_path(c, u->id, &path) >= 0)
			(void)unlink(path);
		if (kexec_errno_is_unavailable(r))
			return sd_bus_error_setf(error, UPGRADE_ERROR_KEXEC_UNAVAILABLE,
			                         "Backend %s cannot load kernels here: %s.",
			                         c->backend->name, strerror(-r));
		if (kexec_errno_is_bad_image(r))
			return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_IMAGE,
			                         "The kernel refused '%s': %s.", u->kernel.path,
			                         strerror(-r));
		return sd_bus_error_setf(error, UPGRADE_ERROR_KEXEC_FAILED,
		                         "Loading '%s' with backend %s failed: %s.", u->kernel.path,
		                         c->backend->name, strerror(-r));
	}
	if (c->backend == &kexec_backend_loader)
		u->verified_bytes = kexec_loader_verified_bytes();
	if (kexec_crash_reserved(c->root) && context_load_crash_image(c, u, &img) == -ECANCELED)
		return context_keep_interrupted(c, &u);

	r = context_add_update(c, u);
	if (r < 0)
		return r;
	staged = TAKE_PTR(u);
	c->active = staged;
	log_info("Staged update %s: kernel %s (%s).", staged->id, staged->kernel.path,
	         staged->kernel_version);
	if (c->ops.update_added)
		c->ops.update_added(c, staged, c->ops_userdata);
	if (c->ops.manager_changed)
		c->ops.manager_changed(c, c->ops_userdata);
	if (ret)
		*ret = staged;
	return 0;
}

/* Facts the policy asks for that are cheap and honest to give at commit time;
 * everything not measured stays zero ("unknown"), which never allows fast. */
static void gather_handoff_facts(Context *c, HandoffFacts *f) {
	_cleanup_free_ char *path = NULL, *data = NULL, *iommu = NULL;
	unsigned long long taint;

	*f = (HandoffFacts){ .digests_at_stage = true };
	/* kexec_load backend: the kernel holds the very bytes hashed at stage (the
	 * files are not read again, so later changes to them cannot matter), and the
	 * placement is checked against the memory map the host has now. */
	if (c->backend == &kexec_backend_loader && kexec_loader_image(false)) {
		f->files_unchanged = true;
		f->memory_map_unchanged = kexec_loader_memory_map_unchanged(c->root) > 0;
	}
	/* An IOMMU registered with the kernel (/sys/class/iommu/<unit>) remaps DMA. */
	if (path_prefix_root(c->root, "/sys/class/iommu", &iommu) >= 0) {
		DIR *d = opendir(iommu);

		if (d) {
			struct dirent *de;

			while ((de = readdir(d)))
				if (de->d_name[0] != '.') {
					f->iommu_enabled = true;
					break;
				}
			closedir(d);
		}
	}
	/* Machine checks and EDAC memory errors since boot, where the kernel counts them. */
	health_gather(c->root, f);
	if (path_prefix_root(c->root, "/proc/sys/kernel/tainted", &path) >= 0 &&
	    read_file_full(path, 64, &data, NULL) >= 0 &&
	    safe_atou64(strstrip(data), &taint) >= 0) {
		f->have_taint = true;
		f->taint = taint;
	}
}

static int reasons_to_text(const PolicyReasons *reasons, char **ret) {
	_cleanup_free_ char *buf = NULL;
	size_t size = 0;
	FILE *f;
	int r;

	f = open_memstream(&buf, &size);
	if (!f)
		return -ENOMEM;
	r = policy_reasons_format(reasons, "", f);
	if (fclose(f) != 0 && r >= 0)
		r = -ENOMEM;
	if (r < 0)
		return r;
	/* One line per reason -> "; "-separated, for a property and the report. */
	while (size > 0 && buf[size - 1] == '\n')
		buf[--size] = '\0';
	for (char *p = buf; p && *p; p++)
		if (*p == '\n')
			*p = ';';
	*ret = TAKE_PTR(buf);
	return 0;
}

int context_decide_handoff(Context *c, Update *u, char **ret_mode, char **ret_reason) {
	_cleanup_free_ char *mode = NULL, *why = NULL;
	bool fast = false;
	int r;

	/* 1. The policy decides (when loaded); 2. the backend limits what is possible. */
	if (c->policy) {
		HandoffDecision d = {};
		HandoffFacts facts;

		gather_handoff_facts(c, &facts);
		r = policy_decide_handoff(c->policy, &facts, &d);
		if (r < 0)
			return r;
		fast = d.handoff == POLICY_HANDOFF_FAST;
		r = reasons_to_text(&d.reasons, &why);
		policy_handoff_decision_done(&d);
		if (r < 0)
			return r;
	} else {
		why = strdup("no policy loaded: verify every segment");
		if (!why)
			return -ENOMEM;
	}
	if (fast && !(c->backend->supported_modes & KEXEC_IMAGE_FAST)) {
		_cleanup_free_ char *more = NULL;

		if (asprintf(&more, "%s; backend %s always verifies", why, c->backend->name) < 0)
			return -ENOMEM;
		free(why);
		why = TAKE_PTR(more);
		fast = false;
	}
	mode = strdup(fast ? "fast" : "verified");
	if (!mode)
		return -ENOMEM;
	*ret_mode = TAKE_PTR(mode);
	*ret_reason = TAKE_PTR(why);
	return 0;
}

/* The questions a commit asks before it changes anything: the update must be staged,
 * the policy decides the handoff mode, and the commit check (VM decisions and
 * preconditions) may refuse. Returns 1 when the commit may proceed, 0 when the policy
 * refuses it (*ret_refusal says why), < 0 on error (error set where it is the caller's).
 * Nothing is persisted; Commit and its dry run (PlanCommit) share it. */
static int context_decide_commit(Context *c, const char *id, Update **ret_update, char **ret_mode,
                                 char **ret_why, json_object **ret_decisions, char **ret_refusal,
                                 sd_bus_error *error) {
	_cleanup_(json_object_putp) json_object *decisions = NULL;
	_cleanup_free_ char *mode = NULL, *why = NULL, *refusal = NULL;
	Update *u;
	int r, allowed = 1;

	r = context_lookup(c, id, &u, error);
	if (r < 0)
		return r;
	if (u->state != UPDATE_STAGED)
		return sd_bus_error_setf(error, UPGRADE_ERROR_BAD_STATE,
		                         "Update %s is %s, only a staged update can be committed.",
		                         u->id, update_state_to_string(u->state));

	r = context_decide_handoff(c, u, &mode, &why);
	if (r < 0)
		return r;
	if (c->commit_check) {
		allowed = c->commit_check(c, u, c->commit_check_userdata, &decisions, &refusal);
		if (allowed < 0)
			return sd_bus_error_setf(error, UPGRADE_ERROR_VM_FAILED,
			                         "Cannot decide how to preserve the VMs: %s.",
			                         refusal ?: strerror(-allowed));
	}

	*ret_update = u;
	*ret_mode = TAKE_PTR(mode);
	*ret_why = TAKE_PTR(why);
	*ret_decisions = TAKE_PTR(decisions);
	*ret_refusal = TAKE_PTR(refusal);
	return allowed > 0;
}

int context_commit_begin(Context *c, const char *id, Update **ret, sd_bus_error *error) {
	_cleanup_(json_object_putp) json_object *decisions = NULL;
	_cleanup_free_ char *mode = NULL, *why = NULL, *refusal = NULL;
	Update *u;
	int r;

	/* The preconditions and the VM decisions: a refusal changes nothing. */
	r = context_decide_commit(c, id, &u, &mode, &why, &decisions, &refusal, error);
	if (r < 0)
		return r;
	if (r == 0)
		return sd_bus_error_setf(error, UPGRADE_ERROR_POLICY_REFUSED,
		                         "The policy refuses to commit update %s: %s", u->id,
		                         refusal ?: "(no reason given)");
	if (c->commit_check) {
		json_object_put(u->decisions);
		u->decisions = TAKE_PTR(decisions);
	}

	/* The staged image was built verified; the decision may switch it (no I/O,
	 * no hashing: the digests were recorded at stage). */
	if (c->backend->set_mode) {
		r = c->backend->set_mode(c->root, streq(mode, "fast") ? KEXEC_IMAGE_FAST
		                                                      : KEXEC_IMAGE_VERIFIED);
		if (r < 0)
			return sd_bus_error_setf(
			        error, UPGRADE_ERROR_KEXEC_FAILED,
			        "Cannot switch the staged image of %s to %s mode: %s.", u->id, mode,
			        strerror(-r));
	}

	free(u->handoff);
	free(u->handoff_reason);
	u->handoff = TAKE_PTR(mode);
	u->handoff_reason = TAKE_PTR(why);
	r = update_add_stamp(u, "commit-requested", true, c->boot_id);
	if (r < 0)
		return r;
	r = context_transition(c, u, UPDATE_COMMITTING, PHASE_PRE_HANDOFF, 10);
	if (r == -ECANCELED)
		return r;
	if (r < 0)
		return sd_bus_error_setf(error, UPGRADE_ERROR_PERSIST_FAILED,
		                         "Cannot write the update record: %s.", strerror(-r));
	*ret = u;
	return 0;
}

int context_plan_commit(Context *c, const char *id, char **ret_json, sd_bus_error *error) {
	_cleanup_(json_object_putp) json_object *o = NULL, *decisions = NULL;
	_cleanup_free_ char *mode = NULL, *why = NULL, *refusal = NULL;
	json_object *h;
	Update *u;
	char *s;
	int allowed;

	/* The same questions commit asks, nothing persisted. */
	allowed = context_decide_commit(c, id, &u, &mode, &why, &decisions, &refusal, error);
	if (allowed < 0)
		return allowed;

	o = json_object_new_object();
	if (!o)
		return -ENOMEM;
	json_object_object_add(o, "id", json_object_new_string(u->id));
	json_object_object_add(o, "allowed", json_object_new_boolean(allowed > 0));
	json_object_object_add(o, "refusal", refusal ? json_object_new_string(refusal) : NULL);
	json_object_object_add(o, "handoff", h = json_object_new_object());
	json_object_object_add(h, "mode", json_object_new_string(mode));
	json_object_object_add(h, "reason", json_object_new_string(why));
	json_object_object_add(o, "decisions", TAKE_PTR(decisions));

	s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
	                                                     JSON_C_TO_STRING_NOSLASHESCAPE));
	if (!s)
		return -ENOMEM;
	*ret_json = s;
	return 0;
}

int context_save(Context *c, Update *u) {
	int r = context_persist(c, u);

	if (r >= 0)
		notify_update(c, u);
	return r;
}

void context_notify(Context *c, Update *u) {
	if (c->ops.update_changed)
		c->ops.update_changed(c, u, c->ops_userdata);
}

int context_commit_run(Context *c, Update *u) {
	_cleanup_free_ char *why = NULL;
	int r;

	if (u->state != UPDATE_COMMITTING || !streq(u->phase, PHASE_PRE_HANDOFF))
		return -ESTALE;

	/* 1. Pre-handoff steps (policy, VM checkpoints). */
	r = context_run_hooks(c, u, HOOK_PRE_HANDOFF, false, &why);
	if (r == -ECANCELED)
		return r;
	if (r < 0)
		return context_commit_fail(c, u, why ?: "a pre-handoff step failed");
	if (c->handoff_hold)
		c->handoff_hold(c, u, c->handoff_hold_userdata);

	/* 2. The handoff record, with the old kernel's measurements and the
	 * reboot-request clock sample, then the reboot. */
	if (c->measure.handoff_prepare)
		c->measure.handoff_prepare(c, u, c->measure.userdata);
	return context_handoff(c, u, "handoff");
}

void context_handoff_result(Context *c, Update *u, int r, const char *why) {
	_cleanup_free_ char *msg = NULL;

	if (u->state != UPDATE_COMMITTING || !streq(u->phase, PHASE_HANDOFF))
		return;
	if (r < 0) {
		/* On the crash kernel context_commit_fail() gives nothing back. */
		if (asprintf(&msg, "systemd refused the kexec reboot: %s", why ?: strerror(-r)) < 0)
			msg = NULL;
		(void)context_commit_fail(c, u, msg ?: "systemd refused the kexec reboot");
		return;
	}
	/* Past the point of no return. Best effort: the system is going down. */
	(void)update_add_stamp(u, "handoff-requested", true, c->boot_id);
	(void)context_transition(c, u, UPDATE_COMMITTING, PHASE_HANDOFF_REQUESTED, 100);
}

/* "Restoring" the crash image replaced at stage means loading one again the way
 * its owner did: kdump-tools' own `kdump-config load`. An unknown owner cannot
 * be redone; the record says so (docs/loader.md). Under --root nothing is run:
 * the record says what would have been. */
static void context_restore_crash_image(Context *c, Update *u) {
	_cleanup_free_ char *msg = NULL;
	int r;

	if (!u->crash_image_before)
		return;
	if (!streq(u->crash_image_before, "kdump-tools"))
		r = asprintf(&msg,
		             "not restored: the crash image loaded before staging (by %s) "
		             "cannot be read back from the kernel; reload it with its tool",
		             u->crash_image_before);
	else if (c->root)
		r = asprintf(&msg, "would run '" KDUMP_CONFIG " load' (test root, nothing run)");
	else {
		int status = system(KDUMP_CONFIG " load >/dev/null 2>&1");

		if (status == 0)
			r = asprintf(&msg, "reloaded by '" KDUMP_CONFIG " load'");
		else
			r = asprintf(&msg,
			             "'" KDUMP_CONFIG " load' failed (status %d): the panic "
			             "path has no crash image",
			             status);
	}
	if (r < 0)
		return;
	log_info("Update %s: crash image %s.", u->id, msg);
	free(u->crash_image_restore);
	u->crash_image_restore = TAKE_PTR(msg);
	(void)context_persist(c, u);
}

int context_cancel(Context *c, const char *id, sd_bus_error *error) {
	Update *u;
	int r;

	r = context_lookup(c, id, &u, error);
	if (r < 0)
		return r;
	if (u->state != UPDATE_STAGED)
		return sd_bus_error_setf(error, UPGRADE_ERROR_BAD_STATE,
		                         "Update %s is %s, only a staged update can be cancelled.",
		                         u->id, update_state_to_string(u->state));

	r = update_add_stamp(u, "cancelled", false, c->boot_id);
	if (r < 0)
		return r;
	r = context_transition(c, u, UPDATE_CANCELLED, PHASE_CANCELLED, 100);
	if (r == -ECANCELED)
		return r;
	if (r < 0)
		return sd_bus_error_setf(error, UPGRADE_ERROR_PERSIST_FAILED,
		                         "Cannot write the update record: %s.", strerror(-r));

	r = c->backend->unload(c->root, 0);
	if (r < 0)
		log_warning_errno(r, "Failed to unload the image of update %s, ignoring: %m",
		                  u->id);
	if (u->crash_image_loaded) {
		r = c->backend->unload(c->root, KEXEC_IMAGE_PANIC);
		if (r < 0)
			log_warning_errno(r, "Failed to unload the crash image of %s, ignoring: %m",
			                  u->id);
		context_restore_crash_image(c, u);
	}
	(void)finish(c, u, "cancelled");
	return 0;
}

const char *context_state(Context *c) {
	return c->active ? update_state_to_string(c->active->state) : "idle";
}

int context_describe(Context *c, char **ret_json) {
	_cleanup_(json_object_putp) json_object *o = NULL;
	json_object *b, *a;
	char *s;
	int r;

	o = json_object_new_object();
	if (!o)
		return -ENOMEM;
	json_object_object_add(o, "State", json_object_new_string(context_state(c)));
	json_object_object_add(o, "RunningKernel", json_object_new_string(c->running_kernel));
	json_object_object_add(o, "StagedKernel",
	                       json_object_new_string(c->active ? c->active->kernel.path : ""));
	json_object_object_add(o, "LastReport", json_object_new_string(strempty(c->last_report)));
	json_object_object_add(o, "Root", json_object_new_string(c->root ?: "/"));
	json_object_object_add(o, "PanicKernel", json_object_new_boolean(c->panic_kernel));

	json_object_object_add(o, "Backend", b = json_object_new_object());
	json_object_object_add(b, "Name", json_object_new_string(c->backend->name));
	json_object_object_add(b, "Usable", json_object_new_boolean(c->backend_status >= 0));
	json_object_object_add(
	        b, "Reason", c->backend_reason ? json_object_new_string(c->backend_reason) : NULL);
	json_object_object_add(b, "TestOnly", json_object_new_boolean(c->backend->test_only));
	json_object_object_add(b, "Fallback", json_object_new_boolean(c->backend_fallback));
	json_object_object_add(b, "CrashKernelReserved",
	                       json_object_new_boolean(kexec_crash_reserved(c->root)));

	json_object_object_add(o, "AllowedRoots", a = json_object_new_array());
	STRV_FOREACH (p, c->allowed_roots)
		json_object_array_add(a, json_object_new_string(*p));

	json_object_object_add(o, "Updates", a = json_object_new_array());
	for (size_t i = 0; i < c->n_updates; i++) {
		json_object *u;

		r = update_to_json(c->updates[i], &u);
		if (r < 0)
			return r;
		json_object_array_add(a, u);
	}

	s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
	                                                     JSON_C_TO_STRING_NOSLASHESCAPE));
	if (!s)
		return -ENOMEM;
	*ret_json = s;
	return 0;
}

int context_get_report(Context *c, const char *id, char **ret_json, sd_bus_error *error) {
	_cleanup_free_ char *path = NULL, *data = NULL;
	int r;

	if (!id || !*id) {
		if (!c->last_report)
			return sd_bus_error_setf(error, UPGRADE_ERROR_NO_SUCH_REPORT,
			                         "No update has finished yet.");
		id = c->last_report;
	} else if (!update_id_is_valid(id))
		return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_ID,
		                         "'%.32s' is not an update id (16 hex digits).", id);

	r = context_report_path(c, id, &path);
	if (r < 0)
		return r;
	r = read_file_full(path, RECORD_MAX, &data, NULL);
	if (r == -ENOENT)
		return sd_bus_error_setf(error,
		                         context_find(c, id) ? UPGRADE_ERROR_NO_SUCH_REPORT
		                                             : UPGRADE_ERROR_NO_SUCH_UPDATE,
		                         "No report for update '%s'%s.", id,
		                         context_find(c, id) ? " (it has not finished)" : "");
	if (r < 0)
		return sd_bus_error_set_errno(error, r);
	*ret_json = TAKE_PTR(data);
	return 0;
}
