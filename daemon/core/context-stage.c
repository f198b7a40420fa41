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
#include "job.h"
#include "json-util.h"
#include "kexec-loader.h"
#include "log.h"
#include "log-ids.h"
#include "path-util.h"
#include "report.h"
#include "string-util.h"
#include "upgrade-bus.h"

/* Opens the staged kernel (and initrd) again with the stage-time rules and
 * checks them against the digests recorded at stage. On failure *ret_why says
 * what changed (named, for the record). */
int context_open_staged_files(Context *c, Update *u, ImageFile *k, ImageFile *i, char **ret_why) {
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

KexecImage context_staged_image(const Update *u, const ImageFile *k, const ImageFile *i) {
	return (KexecImage){ .kernel_fd = k->fd,
		             .initrd_fd = i->fd,
		             .kernel_path = u->kernel.path,
		             .initrd_path = u->initrd.path,
		             .cmdline = u->cmdline,
		             .mode = HANDOFF_MODE_VERIFIED };
}

/* Another update is in flight: what to do about it, in the words Cancel uses. */
static int stage_refuse_active(const Update *a, sd_bus_error *error) {
	if (a->state == UPDATE_STAGED)
		return sd_bus_error_setf(error, UPGRADE_ERROR_ALREADY_STAGED,
		                         "Update %s is already staged; cancel it first: "
		                         "`upgradectl cancel %s`.",
		                         a->id, a->id);
	if (a->state == UPDATE_COMMITTING)
		return sd_bus_error_setf(
		        error, UPGRADE_ERROR_ALREADY_STAGED,
		        "Update %s is committing (phase %s). If it is stuck before "
		        "the kexec, `upgradectl cancel %s` rolls it back "
		        "(upgraded(8), STUCK UPDATES); then stage again.",
		        a->id, a->phase, a->id);
	return sd_bus_error_setf(error, UPGRADE_ERROR_ALREADY_STAGED,
	                         "Update %s is %s (phase %s) on the new kernel; wait for it "
	                         "(`upgradectl watch`).",
	                         a->id, update_state_to_string(a->state), a->phase);
}

struct StagePlan {
	char *id;      /* the update's, chosen before the files are read */
	char *cmdline; /* validated, with the memmap= words carried over */
	char *carried; /* those words */
	bool reuse_cmdline;
	ImageFile kernel, initrd; /* open; digests once stage_plan_hash() ran */
	bool hashed;
};

StagePlan *stage_plan_free(StagePlan *p) {
	if (!p)
		return NULL;
	free(p->id);
	free(p->cmdline);
	free(p->carried);
	image_file_done(&p->kernel);
	image_file_done(&p->initrd);
	free(p);
	return NULL;
}

/* Step 1 of stage: validates the request and opens the files (reading no more than the
 * kernel's header), touching nothing. *ret_carried: the memmap= words carried over from
 * the running command line. */
static int stage_validate(Context *c, const StageRequest *req, char **ret_cmdline,
                          char **ret_carried, ImageFile *k, ImageFile *i, sd_bus_error *error) {
	ImageRules rules = { .root = c->root,
		             .allowed = c->allowed_roots,
		             .owner = c->image_owner };
	_cleanup_free_ char *cmdline = NULL, *running = NULL;
	int r;

	if (c->active)
		return stage_refuse_active(c->active, error);
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
	if (read_proc_cmdline(c, &running) < 0)
		running = NULL;
	r = context_carry_memmap(running, &cmdline, ret_carried, error);
	if (r < 0)
		return r;
	r = image_open_unhashed(&rules, req->kernel, IMAGE_KERNEL, k, error);
	if (r < 0)
		return r;
	if (req->initrd && *req->initrd) {
		r = image_open_unhashed(&rules, req->initrd, IMAGE_INITRD, i, error);
		if (r < 0)
			return r;
	}
	if (c->backend_status < 0)
		return sd_bus_error_setf(error, UPGRADE_ERROR_KEXEC_UNAVAILABLE,
		                         "Backend %s cannot load kernels here: %s.",
		                         c->backend->name, strna(c->backend_reason));
	*ret_cmdline = TAKE_PTR(cmdline);
	return 0;
}

static UpdateFile update_file_from_image(ImageFile *f) {
	UpdateFile uf = { .path = TAKE_PTR(f->path),
		          .size = f->size,
		          .mtime_usec = f->mtime_usec,
		          .inode = f->inode,
		          .ctime_usec = f->ctime_usec };

	memcpy(uf.sha256, f->sha256, sizeof(f->sha256));
	return uf;
}

/* Step 2 of stage: the new update's record, from the validated and hashed files (their
 * paths and the kernel's version move into it). */
static int stage_new_update(Context *c, StagePlan *p, Update **ret) {
	_cleanup_(update_freep) Update *u = NULL;
	ImageFile *k = &p->kernel, *i = &p->initrd;
	int r;

	u = update_new(p->id);
	if (!u)
		return -ENOMEM;
	u->kernel = update_file_from_image(k);
	u->kernel_version = TAKE_PTR(k->version);
	if (update_set_string(&u->kernel_version_source, k->version_source) < 0)
		return -ENOMEM;
	if (i->path)
		u->initrd = update_file_from_image(i);
	u->cmdline = TAKE_PTR(p->cmdline);
	u->reuse_cmdline = p->reuse_cmdline;
	if (update_set_string(&u->backend, c->backend->name) < 0 ||
	    update_set_string(&u->old_kernel, c->running_kernel) < 0)
		return -ENOMEM;
	if (c->backend_fallback && update_set_string(&u->backend_reason, c->backend_reason) < 0)
		return -ENOMEM;
	if (platform_facts_to_json(&c->platform, &u->platform) < 0)
		return -ENOMEM;
	/* A crash image someone else loaded (kdump) is replaced by ours below: say who,
	 * so cancel and rollback hand the panic path back (context-crash.c). */
	if (kexec_crash_reserved(c->root) &&
	    c->backend->is_loaded(c->root, KEXEC_IMAGE_PANIC) > 0 &&
	    update_set_string(&u->crash_image_before, context_crash_image_owner(c)) < 0)
		return -ENOMEM;
	r = context_kept_memory(c, u, p->carried, &u->kept_memory);
	if (r < 0)
		return r;
	r = update_add_stamp(u, "staged", false, c->boot_id);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(u);
	return 0;
}

/* The backend refused to load u (r): nothing happened, so its record goes again, and the
 * caller gets the error that names why. */
/* Did the kernel refuse this image's signature (and would a properly signed one load)?
 * Under lockdown kexec_file_load answers EPERM ("kexec of unsigned images is
 * restricted"); where verification is enforced (Secure Boot's IMA arch policy,
 * KEXEC_SIG_FORCE) ENOKEY ("Enforced kernel signature verification failed"); a
 * signature by a revoked or distrusted key is EKEYREJECTED. */
static bool stage_signature_refused(const Context *c, int r) {
	bool locked = c->platform.lockdown == PLATFORM_LOCKDOWN_INTEGRITY ||
	              c->platform.lockdown == PLATFORM_LOCKDOWN_CONFIDENTIALITY;

	return r == -ENOKEY || r == -EKEYREJECTED || (r == -EPERM && locked);
}

static int stage_load_failed(Context *c, Update *u, int r, sd_bus_error *error) {
	_cleanup_free_ char *path = NULL;
	bool locked = c->platform.lockdown == PLATFORM_LOCKDOWN_INTEGRITY ||
	              c->platform.lockdown == PLATFORM_LOCKDOWN_CONFIDENTIALITY;
	bool sb = c->platform.secure_boot == PLATFORM_SECURE_BOOT_ENABLED;

	if (context_record_path(c, u->id, &path) >= 0)
		(void)unlink(path);
	if (stage_signature_refused(c, r))
		return sd_bus_error_setf(
		        error, UPGRADE_ERROR_INVALID_IMAGE,
		        "The kernel refused '%s': %s%s%s%s it loads only kernels whose signature a "
		        "key in its keyrings accepts (built-in, secondary, or on a UEFI boot the "
		        "firmware's and shim's), and this one's was not accepted: %s.",
		        u->kernel.path, locked ? "under lockdown (" : "",
		        locked ? platform_lockdown_to_string(c->platform.lockdown) : "",
		        locked ? ")" : "",
		        sb ? (locked ? " and Secure Boot," : "with Secure Boot,")
		           : (locked ? "," : "with signature verification enforced,"),
		        strerror(-r));
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

int context_stage_prepare(Context *c, const StageRequest *req, StagePlan **ret,
                          sd_bus_error *error) {
	_cleanup_(stage_plan_freep) StagePlan *p = NULL;
	int r;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->kernel.fd = p->initrd.fd = -EBADF;
	p->reuse_cmdline = req->reuse_cmdline;
	r = stage_validate(c, req, &p->cmdline, &p->carried, &p->kernel, &p->initrd, error);
	if (r < 0)
		return r;
	r = update_id_new(&p->id);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(p);
	return 0;
}

const char *stage_plan_id(const StagePlan *p) {
	return p ? p->id : NULL;
}

int stage_plan_hash(StagePlan *p, const atomic_bool *cancel, sd_bus_error *error) {
	int r;

	r = image_hash(&p->kernel, IMAGE_KERNEL, cancel, error);
	if (r < 0)
		return r;
	if (p->initrd.path) {
		r = image_hash(&p->initrd, IMAGE_INITRD, cancel, error);
		if (r < 0)
			return r;
	}
	p->hashed = true;
	return 0;
}

static bool stage_cancelled(const atomic_bool *cancel) {
	return cancel && *cancel;
}

/* A cancel (or the daemon stopping) came while the backend loaded u's image: nothing of it
 * may stay, neither the image nor the record. */
static int stage_undo_load(Context *c, Update *u, sd_bus_error *error) {
	_cleanup_free_ char *path = NULL;
	int r;

	r = c->backend->unload(c->root, 0);
	if (r < 0)
		log_warning_errno(r, "Cannot unload the image of cancelled update %s: %m", u->id);
	if (context_record_path(c, u->id, &path) >= 0)
		(void)unlink(path);
	log_info("Staging of update %s cancelled after its load; image and record removed.", u->id);
	return sd_bus_error_setf(error, UPGRADE_ERROR_CANCELLED,
	                         "Staging of update %s was cancelled; nothing was staged.", u->id);
}

/* Steps 3-4 of stage: persisted, then loaded (outside the state lock on a job's worker:
 * the backend reads the whole files). */
static int stage_persist_load(Context *c, Update *u, KexecImage *img, const atomic_bool *cancel,
                              sd_bus_error *error) {
	int r;

	/* 3. Persist first: a crash after this finds a staged record and reloads. */
	r = context_persist(c, u);
	if (r < 0)
		return r == -ECANCELED ? r
		                       : sd_bus_error_setf(error, UPGRADE_ERROR_PERSIST_FAILED,
		                                           "Cannot write the update record: %s.",
		                                           strerror(-r));

	/* 4. Preload: the commit path does no file I/O and no hashing. */
	job_blocking_begin();
	r = c->backend->load(c->root, img);
	(void)job_blocking_end(); /* a stage job has no deadline */
	if (r < 0)
		return stage_load_failed(c, u, r, error);
	if (stage_cancelled(cancel))
		return stage_undo_load(c, u, error);
	return 0;
}

typedef struct KdumpLater {
	Context *context;
	char id[UPDATE_ID_LEN + 1];
} KdumpLater;

static void kdump_later_run(void *userdata) {
	KdumpLater *k = userdata;
	Update *u = context_find(k->context, k->id);

	if (u && u->state == UPDATE_STAGED)
		context_prepare_kdump(k->context, u);
}

/* kdump's initrd for the staged kernel is built by a job of its own, started from the loop:
 * on Stage's worker it would be built inline and hold the Stage's answer (up to 20 min). */
static void stage_prepare_kdump(Context *c, Update *u) {
	KdumpLater *k;

	if (job_on_loop()) {
		context_prepare_kdump(c, u);
		return;
	}
	k = calloc(1, sizeof(*k));
	if (!k) {
		log_oom();
		return;
	}
	k->context = c;
	snprintf(k->id, sizeof(k->id), "%s", u->id);
	if (job_defer(kdump_later_run, k, free) < 0) {
		log_warning("Cannot build kdump's initrd for %s ahead: the loop is gone.",
		            u->kernel_version);
		free(k);
	}
}

int context_stage_finish(Context *c, StagePlan *p, const atomic_bool *cancel, Update **ret,
                         sd_bus_error *error) {
	_cleanup_(update_freep) Update *u = NULL;
	KexecImage img;
	Update *staged;
	int r;

	if (!p->hashed)
		return -EINVAL;
	if (stage_cancelled(cancel))
		return sd_bus_error_setf(error, UPGRADE_ERROR_CANCELLED,
		                         "Staging of update %s was cancelled; nothing was staged.",
		                         p->id);
	/* The state may have moved while the files were read. */
	if (c->active)
		return stage_refuse_active(c->active, error);

	/* 2. The record. */
	r = stage_new_update(c, p, &u);
	if (r < 0)
		return r;

	/* 3-4. Persisted and loaded. */
	img = context_staged_image(u, &p->kernel, &p->initrd);
	r = stage_persist_load(c, u, &img, cancel, error);
	if (r == -ECANCELED && !sd_bus_error_is_set(error))
		return context_keep_interrupted(c, &u);
	if (r < 0)
		return r;
	if (c->backend->verified_bytes)
		u->verified_bytes = c->backend->verified_bytes();
	if (kexec_crash_reserved(c->root) && context_load_crash_image(c, u, &img) == -ECANCELED)
		return context_keep_interrupted(c, &u);

	/* 5. Staged: announce it. */
	r = context_add_update(c, u);
	if (r < 0)
		return r;
	staged = TAKE_PTR(u);
	c->active = staged;
	log_event(LOG_INFO, LOG_MID_STAGED, staged->id, "Staged update %s: kernel %s (%s).",
	          staged->id, staged->kernel.path, staged->kernel_version);
	stage_prepare_kdump(c, staged);
	if (c->ops.update_added)
		c->ops.update_added(c, staged, c->ops_userdata);
	if (c->ops.manager_changed)
		c->ops.manager_changed(c, c->ops_userdata);
	if (c->settled)
		c->settled(c, c->settled_userdata);
	if (ret)
		*ret = staged;
	return 0;
}

int context_stage(Context *c, const StageRequest *req, Update **ret, sd_bus_error *error) {
	_cleanup_(stage_plan_freep) StagePlan *p = NULL;
	int r;

	/* 1. Validate everything before touching anything; then the digests. */
	r = context_stage_prepare(c, req, &p, error);
	if (r < 0)
		return r;
	r = stage_plan_hash(p, NULL, error);
	if (r < 0)
		return r;
	return context_stage_finish(c, p, NULL, ret, error);
}
