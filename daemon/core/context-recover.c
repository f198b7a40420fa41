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
#include "deferred-units.h"
#include "fileio.h"
#include "handoff-facts.h"
#include "image.h"
#include "json-util.h"
#include "kexec-loader.h"
#include "log.h"
#include "path-util.h"
#include "report.h"
#include "string-util.h"
#include "upgrade-bus.h"

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

	r = context_open_staged_files(c, u, &k, &i, &why);
	if (r >= 0) {
		img = context_staged_image(u, &k, &i);
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
		int r;

		log_set_update_id(u->id); /* the recovery's lines carry UPGRADED_ID= */
		r = context_recover_one(c, u);
		log_set_update_id(NULL);

		if (r == -ECANCELED)
			return r; /* stopped where a crash would: the next start releases */
		if (r < 0) {
			log_error_errno(r, "Failed to recover update %s: %m", u->id);
			if (ret == 0)
				ret = r;
		}
	}
	/* Whatever happened, nothing is left to restore on this boot: units held back for
	 * it (upgraded-defer-generator) must not wait for the waiter's timeout. */
	(void)deferred_units_release(c->root);
	return ret;
}
