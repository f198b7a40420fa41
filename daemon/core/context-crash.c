/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The crash slot. The kernel holds one crash image; while an update is staged it is ours (the
 * panic path, docs/loader.md), and whatever was there before (usually kdump-tools') is gone.
 * Giving the slot back means unloading ours and loading theirs again the way its owner does:
 * systemd restarts kdump-tools.service, whose `kdump-config load` then runs in kdump's own
 * environment, not in our sandbox (it reads /proc/kcore, which needs CAP_SYS_RAWIO, and
 * renews its links in /var/lib/kdump). `systemctl restart` runs as a child with a deadline,
 * never on the event loop: on a job's worker with the state lock released, else in a job of
 * its own.
 *
 * While ours is loaded, /run/upgraded/crash-image names the update: kdump-tools' stop (at
 * every orderly shutdown, the handoff's included) leaves the slot alone when it exists
 * (units/kdump-tools.service.d). /run does not survive a boot, so neither does the mark.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "context-private.h"
#include "fileio.h"
#include "job.h"
#include "log.h"
#include "macros.h"
#include "path-util.h"
#include "process-util.h"
#include "string-util.h"

#define CRASH_MARK_DIR          "/run/upgraded"
#define CRASH_MARK_PATH         CRASH_MARK_DIR "/crash-image"
#define KDUMP_RESTART_CMD       "systemctl restart kdump-tools.service"
#define KDUMP_LOAD_TIMEOUT_USEC (60ULL * 1000000) /* kdump-config load: a few seconds at most */

static void crash_mark(Context *c, const char *id) {
	_cleanup_free_ char *dir = NULL, *p = NULL;
	int r;

	r = path_prefix_root(c->root, CRASH_MARK_DIR, &dir);
	if (r >= 0)
		r = path_prefix_root(c->root, CRASH_MARK_PATH, &p);
	if (r >= 0) {
		if (id) {
			(void)mkdir_p(dir, 0755);
			r = write_file_atomic(p, id, strlen(id), 0644);
		} else
			r = unlink(p) < 0 && errno != ENOENT ? -errno : 0;
	}
	if (r < 0)
		log_warning_errno(r, "Cannot %s %s, ignoring: %m", id ? "write" : "remove",
		                  CRASH_MARK_PATH);
}

/* The crash image: always verified (never skip the check on the panic path).
 * Stage and its recovery are the only places a crash image is requested, and
 * these flags are constant: neither the policy nor the caller can make it fast.
 * Best effort (the update goes on without one); returns what persisting the
 * mark returned. */
int context_load_crash_image(Context *c, Update *u, KexecImage *img) {
	int r;

	img->flags = KEXEC_IMAGE_PANIC;
	img->mode = HANDOFF_MODE_VERIFIED;
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
	crash_mark(c, u->id);
	return context_persist(c, u);
}

/* Who loaded the crash image we are about to replace. The kernel cannot say and
 * cannot give the image back; what we can tell is whether the system's kdump
 * service (kdump-tools) is installed, which is the usual owner. */
const char *context_crash_image_owner(Context *c) {
	_cleanup_free_ char *p = NULL;

	if (path_prefix_root(c->root, KDUMP_CONFIG, &p) >= 0 && access(p, X_OK) >= 0)
		return "kdump-tools";
	return "unknown";
}

/* Restarts kdump-tools (lock released around the wait); returns what the record says. */
static char *kdump_reload(void) {
	char *argv[] = { (char *)SYSTEMCTL_PATH, (char *)"restart", (char *)"kdump-tools.service",
		         NULL };
	char *msg = NULL;
	int r, status = 0;

	job_blocking_begin();
	r = spawn_wait(argv, KDUMP_LOAD_TIMEOUT_USEC, &status);
	(void)job_blocking_end(); /* an abandoned job's caller checks the update again */
	if (r == -ETIMEDOUT)
		r = asprintf(&msg,
		             "'" KDUMP_RESTART_CMD "' did not finish within %llu s: killed, "
		             "the panic path has no crash image",
		             (unsigned long long)(KDUMP_LOAD_TIMEOUT_USEC / 1000000));
	else if (r < 0)
		r = asprintf(&msg, "'" KDUMP_RESTART_CMD "' could not be started: %s",
		             strerror(-r));
	else if (status != 0)
		r = asprintf(&msg,
		             "'" KDUMP_RESTART_CMD "' failed (status %d): the panic path has no "
		             "crash image",
		             status);
	else
		r = asprintf(&msg, "reloaded by '" KDUMP_RESTART_CMD "'");
	return r < 0 ? NULL : msg;
}

/* "Restoring" the crash image replaced at stage means loading one again the way
 * its owner did. An unknown owner cannot be redone; the record says so
 * (docs/loader.md). Under --root nothing is run: the record says what would
 * have been. */
static void restore_crash_image(Context *c, Update *u) {
	_cleanup_free_ char *msg = NULL;

	if (!streq(u->crash_image_before, "kdump-tools")) {
		if (asprintf(&msg,
		             "not restored: the crash image loaded before staging (by %s) cannot "
		             "be read back from the kernel; reload it with its tool",
		             u->crash_image_before) < 0)
			msg = NULL;
	} else if (c->root)
		msg = strdup("would run '" KDUMP_RESTART_CMD "' (test root, nothing run)");
	else
		msg = kdump_reload();
	if (!msg)
		return;
	log_info("Update %s: crash image %s.", u->id, msg);
	free(u->crash_image_restore);
	u->crash_image_restore = TAKE_PTR(msg);
	(void)context_persist(c, u);
}

typedef struct RestoreJob {
	Context *context;
	char *id;
} RestoreJob;

static int restore_job_run(Job *j, void *userdata) {
	RestoreJob *rj = userdata;
	Update *u;

	(void)j;
	/* The update may be gone meanwhile (retention): then there is no record to write. */
	u = context_find(rj->context, rj->id);
	if (u)
		restore_crash_image(rj->context, u);
	return 0;
}

static void restore_job_done(Job *j, int r, void *userdata) {
	RestoreJob *rj = userdata;

	(void)j;
	if (r == -ETIMEDOUT)
		log_warning("Update %s: giving back the crash image did not finish in time.",
		            rj->id);
	free(rj->id);
	free(rj);
}

void context_give_back_crash_image(Context *c, Update *u) {
	RestoreJob *rj;
	int r;

	if (!u->crash_image_loaded)
		return;
	/* Also when the kernel says none is loaded: a backend may hold its own copy. */
	r = c->backend->unload(c->root, KEXEC_IMAGE_PANIC);
	if (r < 0 && c->backend->is_loaded(c->root, KEXEC_IMAGE_PANIC) > 0)
		log_warning_errno(r, "Failed to unload the crash image of %s, ignoring: %m", u->id);
	crash_mark(c, NULL);
	if (!u->crash_image_before)
		return;
	if (!job_on_loop() || c->root) {
		restore_crash_image(c, u);
		return;
	}
	rj = calloc(1, sizeof(*rj));
	if (!rj || !(rj->id = strdup(u->id))) {
		free(rj);
		log_oom();
		return;
	}
	rj->context = c;
	r = job_start("crash-image", KDUMP_LOAD_TIMEOUT_USEC + 5ULL * 1000000, restore_job_run,
	              restore_job_done, rj, NULL);
	if (r < 0) {
		log_warning_errno(r, "Cannot give the crash image of %s back: %m", u->id);
		restore_job_done(NULL, 0, rj);
	}
}
