/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The boot path: after the handoff restore every preserved VM concurrently and resume it; the
 * manual retry of one VM (`upgradectl restore-vm`). A failed restore keeps the image.
 */

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "vm.h"
#include "vm-internal.h"
#include "keep-ram.h"
#include "macros.h"

/*
 * Brings one VM back after the handoff: already active (survived, or something else restored
 * it) -> resume; managed save image -> restore paused, then resume; shut down by us -> start.
 * A failed restore never removes the image: it stays for `upgradectl restore-vm`.
 */
static int restore_domain(virConnectPtr c, const VmPlan *plan, VmResult *r) {
	_cleanup_domain_ virDomainPtr dom = vm_lookup(c, r);
	int state, has, k;
	usec_t t0;

	if (!dom)
		return vm_fail(r, -ENOENT, "domain not found: %s", vm_last_error());
	if (vm_get_state(dom, &state) < 0)
		return vm_fail(r, -EIO, "cannot query state: %s", vm_last_error());

	if (vm_state_is_inactive(state)) {
		has = vm_ops->has_managed_save(dom, 0);
		if (has < 0)
			return vm_fail(r, -EIO, "cannot look for a managed save image: %s",
			               vm_last_error());
		if (has == 0 && r->strategy != VM_STRATEGY_SHUTDOWN)
			return vm_fail(r, -ENODATA,
			               "no managed save image: the VM's state was not preserved");
		if (r->strategy == VM_STRATEGY_KEEP_RAM) {
			_cleanup_free_ char *why = NULL;

			k = keep_ram_verify(r, &why);
			if (k < 0)
				return vm_fail(
				        r, k,
				        "kept RAM cannot be trusted, the VM is not resumed: %s; "
				        "nothing was deleted (managed save image and RAM file "
				        "kept for 'upgradectl restore-vm %s')",
				        strna(why), r->name);
		}

		r->restore_started_at = vm_now(CLOCK_REALTIME);
		t0 = vm_now(CLOCK_MONOTONIC);
		k = has ? vm_start_saved(dom, r) : vm_start_domain(dom);
		r->restore_time = vm_now(CLOCK_MONOTONIC) - t0;
		if (k < 0) {
			if (has)
				return vm_fail(
				        r, k,
				        "restore from the managed save image failed: %s; the "
				        "image is kept, retry with 'upgradectl restore-vm %s'",
				        vm_last_error(), r->name);
			return vm_fail(r, k, "start failed: %s", vm_last_error());
		}
		vm_plan_event(plan, r, VM_EVENT_RESTORED);
	}

	if (vm_state_is_running(r->orig_state))
		vm_plan_event(plan, r, VM_EVENT_RESUMING);
	k = vm_settle_state(dom, r);
	if (k < 0)
		return k;
	if (vm_state_is_running(r->orig_state)) {
		r->resumed_at = vm_now(CLOCK_REALTIME);
		vm_plan_event(plan, r, VM_EVENT_RESUMED);
		r->outcome = VM_OUTCOME_RESUMED;
	} else
		r->outcome = VM_OUTCOME_RESTORED;
	if (r->strategy == VM_STRATEGY_KEEP_RAM)
		keep_ram_restored(dom, r);
	return 0;
}

/* Whether c still reaches libvirtd: a connection whose libvirtd went away looks alive until it
 * is used, one round trip tells. */
static bool connection_alive(virConnectPtr c) {
	unsigned long version;

	if (vm_ops->connect_alive)
		return vm_ops->connect_alive(c) > 0;
	return virConnectIsAlive(c) == 1 && virConnectGetLibVersion(c, &version) == 0;
}

/*
 * A restore whose libvirtd went away (killed, restarted) says nothing about the domain: the
 * restarted libvirtd may have finished the restore by itself (the VM is there, paused, its
 * image gone) or not (still saved). Wait for libvirtd and settle the domain from what it is
 * now (once libvirtd is done with a restore it found half done): active -> resumed; saved ->
 * restored again; neither -> reported lost. Never a paused VM
 * reported as restored, never a running one reported as failed.
 */
/* A libvirtd restarted in the middle of a restore finds the domain paused, "starting up", and
 * kills it when it reconnects (that restore never finished; the image stays). Resuming it in
 * that window would report a VM resumed that libvirtd kills a moment later: wait until it is
 * no longer starting up (killed: restored again from its image), at most
 * VM_STARTING_UP_WAIT_USEC. */
static void wait_not_starting_up(virConnectPtr c, VmResult *r) {
	_cleanup_domain_ virDomainPtr dom = vm_lookup(c, r);
	usec_t end = vm_now(CLOCK_MONOTONIC) + VM_STARTING_UP_WAIT_USEC;
	int state, reason;

	while (dom && virDomainGetState(dom, &state, &reason, 0) == 0 &&
	       state == VIR_DOMAIN_PAUSED && reason == VIR_DOMAIN_PAUSED_STARTING_UP &&
	       vm_now(CLOCK_MONOTONIC) < end)
		usleep(100 * 1000);
}

int vm_job_restore(VmJob *j, virConnectPtr c) {
	VmResult *r = j->result;
	_cleanup_free_ char *first = NULL, *connect_error = NULL;
	virConnectPtr again;
	int k;

	k = restore_domain(c, j->runner->plan, r);
	if (k >= 0 || connection_alive(c))
		return k;
	again = vm_connect_retry(j->runner->uri, &connect_error);
	if (!again)
		return k;
	first = TAKE_PTR(r->error);
	wait_not_starting_up(again, r);
	k = restore_domain(again, j->runner->plan, r);
	virConnectClose(again);
	if (k < 0)
		vm_result_set_error(r,
		                    "libvirtd went away during the restore (%s); once it was "
		                    "back: %s",
		                    strna(first), strna(r->error));
	return k;
}

int vm_restore_all(virConnectPtr conn, const VmPlan *plan, VmResults *results, VmProgressCb cb,
                   void *userdata) {
	_cleanup_free_ VmJob *jobs = NULL;
	VmRunner run;
	size_t n_jobs = 0;
	int r, k;

	if (!conn || !results)
		return -EINVAL;
	plan = plan ?: &vm_default_plan;
	r = vm_runner_init_jobs(&run, conn, plan, cb, userdata, results->n, &jobs);
	if (r < 0)
		return r;

	for (size_t i = 0; i < results->n; i++) {
		VmResult *v = &results->items[i];

		if (((v->strategy == VM_STRATEGY_CHECKPOINT ||
		      v->strategy == VM_STRATEGY_KEEP_RAM) &&
		     v->outcome == VM_OUTCOME_SAVED) ||
		    (v->strategy == VM_STRATEGY_SHUTDOWN && v->outcome == VM_OUTCOME_SHUT_DOWN &&
		     vm_state_is_running(v->orig_state)))
			jobs[n_jobs++] = (VmJob){ .result = v,
				                  .func = vm_job_restore,
				                  .start_outcome = VM_OUTCOME_RESTORING,
				                  .timeout = vm_plan_restore_timeout(plan) };
	}
	r = vm_run_jobs(&run, jobs, n_jobs, vm_plan_parallel(plan));
	vm_runner_done(&run);
	/* Every VM is back (or failed): now the clocks, outside any VM's downtime. */
	k = vm_sync_clocks(conn, plan, results);
	return r ?: k;
}

int vm_restore_one(virConnectPtr conn, const char *name, VmResult *r) {
	_cleanup_domain_ virDomainPtr dom = NULL;
	VmResult local = { .strategy = VM_STRATEGY_CHECKPOINT,
		           .orig_state = VIR_DOMAIN_RUNNING,
		           .saved_bytes = -1 };
	int state, has, k;

	if (!conn || !name || !*name || (r && r->name && !streq(r->name, name)))
		return -EINVAL;
	dom = virDomainLookupByName(conn, name);
	if (!dom)
		return -ENOENT;
	if (vm_get_state(dom, &state) < 0)
		return -EIO;
	if (!vm_state_is_inactive(state))
		return -EBUSY;
	has = vm_ops->has_managed_save(dom, 0);
	if (has < 0)
		return -EIO;
	if (has == 0)
		return -ENODATA;

	if (!r) {
		r = &local;
		r->name = (char *)name;
	} else if (!r->name) {
		r->name = strdup(name);
		if (!r->name)
			return -ENOMEM;
	}
	if (virDomainGetUUIDString(dom, r->uuid) < 0) {
		k = -EIO;
		goto finish;
	}
	/* A keep-ram record restores on its kept RAM (guard first); anything else as a checkpoint:
	 * without a record the hook still links a kept RAM file back, under its own guard. */
	if (r->strategy != VM_STRATEGY_KEEP_RAM || !r->kept_ram)
		r->strategy = VM_STRATEGY_CHECKPOINT;
	free(r->error);
	r->error = NULL;
	k = restore_domain(conn, NULL, r);
finish:
	if (r == &local)
		free(local.error);
	return k;
}
