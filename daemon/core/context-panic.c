/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <systemd/sd-id128.h>

#include "boot-cpu.h"
#include "cmdline.h"
#include "context-private.h"
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

/*
 * The crash kernel cannot context_finish u: mark it failed and report. Nothing is given
 * back here, no rollback step runs: the crash kernel is confined to the
 * reservation and must not run VMs. What the VMs saved stays on disk and is
 * listed in the report (their results), for a regular boot to restore
 * (`upgradectl restore-vm NAME`, or libvirt's start from the managed save).
 */
int context_panic_fail(Context *c, Update *u, const char *reason) {
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

/* The first pre-handoff step of this daemon that u has not finished, or NULL
 * when all are done (the VMs were checkpointed). */
static const char *pre_handoff_missing(Context *c, const Update *u) {
	CONTEXT_FOREACH_STEP (s, c) {
		const ContextHook *h = &s->vt->hooks[HOOK_PRE_HANDOFF];
		_cleanup_free_ char *key = NULL;

		if (!h->func)
			continue;
		if (context_hook_key(HOOK_PRE_HANDOFF, h->key, &key) < 0 ||
		    !update_hook_done(u, key))
			return h->key;
	}
	return NULL;
}

/* The crash kernel takes u over: where from, in which boot, stamped and persisted. If that
 * cannot be persisted, u is left as it was, so the next attempt takes it over again. */
static int panic_take_over(Context *c, Update *u) {
	_cleanup_free_ char *old_from = TAKE_PTR(u->panic_from_phase),
	                    *old_boot = TAKE_PTR(u->panic_boot_id);
	int r;

	if (update_set_string(&u->panic_from_phase, u->phase) < 0 ||
	    update_set_string(&u->panic_boot_id, c->boot_id) < 0)
		r = -ENOMEM;
	else
		r = context_transition_stamped(c, u, "panic-recovery", true, UPDATE_COMMITTING,
		                               PHASE_PANIC_HANDOFF, 90);
	if (r < 0 && r != -ECANCELED) {
		free(u->panic_from_phase);
		free(u->panic_boot_id);
		u->panic_from_phase = TAKE_PTR(old_from);
		u->panic_boot_id = TAKE_PTR(old_boot);
	}
	return r;
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
	BootCpu cpu;
	int r;

	/* 1. On disk first: the crash kernel took the update over, and from where. */
	if (!streq_ptr(u->panic_boot_id, c->boot_id)) {
		log_notice("Update %s: the old kernel crashed in phase '%s'; taking over on "
		           "the crash kernel.",
		           u->id, u->phase);
		r = panic_take_over(c, u);
		if (r < 0)
			return r;
	}

	/* 2. The staged files, read again: still what was hashed at stage? */
	r = context_open_staged_files(c, u, &k, &i, &why);
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

	/* 4. After a panic on another CPU than the boot CPU, the loader tells the staged
	 * kernel to leave the boot CPU parked (INIT to it resets the machine): said in the
	 * record, for the report. */
	r = boot_cpu_read(c->root, &cpu);
	if (r < 0)
		return r;
	if (boot_cpu_parked(&cpu) && !u->panic_parked_cpu) {
		log_warning("Update %s: the crash kernel runs on CPU (APIC id) %" PRIu32
		            ", not on the boot CPU %" PRIu32
		            ": the staged kernel leaves that one parked in the dead kernel until "
		            "the next reboot; plan one once the VMs can move (docs/loader.md, "
		            "\"The boot CPU\").",
		            u->id, cpu.running, cpu.bsp);
		u->panic_parked_cpu = true;
		u->panic_parked_apicid = cpu.bsp;
	}

	/* 5. An ordinary image, always verified, whatever the policy chose. */
	img = (KexecImage){ .kernel_fd = k.fd,
		            .initrd_fd = i.fd,
		            .kernel_path = u->kernel.path,
		            .initrd_path = u->initrd.path,
		            .cmdline = u->cmdline,
		            .mode = HANDOFF_MODE_VERIFIED,
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
	if (u->handoff != HANDOFF_MODE_VERIFIED) {
		if (asprintf(&why,
		             "panic path: verified out of the crash kernel (the policy had "
		             "chosen %s: %s)",
		             strna(handoff_mode_to_string(u->handoff)),
		             strna(u->handoff_reason)) < 0)
			return -ENOMEM;
		free(u->handoff_reason);
		u->handoff_reason = TAKE_PTR(why);
		u->handoff = HANDOFF_MODE_VERIFIED;
	}
	CONTEXT_FOREACH_STEP (s, c)
		if (s->vt->panic_takeover)
			s->vt->panic_takeover(c, u, s->userdata);

	/* 6. The handoff record of the second kexec and the reboot, as a regular
	 * commit does them (a failure ends in context_panic_fail()). */
	return context_handoff(c, u, "panic-handoff");
}

/*
 * Recovery on the crash kernel. Never restores or resumes a VM here (the crash
 * kernel is confined to the reservation): every record state either hands over
 * to the staged kernel or fails with a reason, VMs' saved state kept.
 */
int context_recover_panic(Context *c, Update *u) {
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
