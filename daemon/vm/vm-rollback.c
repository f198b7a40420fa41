/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Rollback: every VM back into its state before the commit, from whatever state it is in
 * now, concurrently on the worker threads (vm-orchestrate.c).
 */

#include <errno.h>
#include <stdio.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "vm.h"
#include "vm-internal.h"
#include "keep-ram.h"
#include "macros.h"

/*
 * Puts one VM back into its state before the commit, from whatever state it is in now:
 * saved -> restore from the image; save incomplete -> drop a stale image; paused -> resume
 * (if it was running); shut down -> start. The image is removed only once the VM is active.
 */
static int rollback_domain(virConnectPtr c, VmResult *r) {
	_cleanup_domain_ virDomainPtr dom = vm_lookup(c, r);
	int state, has, k;

	if (!dom)
		return vm_fail(r, -ENOENT, "rollback: domain not found: %s", vm_last_error());
	if (vm_get_state(dom, &state) < 0)
		return vm_fail(r, -EIO, "rollback: cannot query state: %s", vm_last_error());

	switch (r->strategy) {
	case VM_STRATEGY_CHECKPOINT:
	case VM_STRATEGY_KEEP_RAM:
		has = vm_ops->has_managed_save(dom, 0);
		if (has < 0)
			return vm_fail(r, -EIO,
			               "rollback: cannot look for a managed save image: %s",
			               vm_last_error());
		if (vm_state_is_inactive(state)) {
			if (has == 0)
				return vm_fail(
				        r, -ENODATA,
				        "rollback: domain is shut off and has no managed save "
				        "image");
			usec_t t0 = vm_now(CLOCK_MONOTONIC);

			r->restore_started_at = vm_now(CLOCK_REALTIME);
			k = vm_start_saved(dom, r);
			r->restore_time = vm_now(CLOCK_MONOTONIC) - t0;
			if (k < 0)
				return vm_fail(
				        r, k,
				        "rollback: restore from the managed save image failed: %s; "
				        "the image is kept",
				        vm_last_error());
			has = vm_ops->has_managed_save(dom, 0);
		}
		/* Running on its RAM again (or never stopped): the link and the entry go. */
		keep_ram_abandon(dom, r);
		/* Active now: an image left behind is stale and would win at the next start. */
		if (has > 0 && vm_ops->managed_save_remove(dom, 0) < 0)
			return vm_fail(r, -EIO,
			               "rollback: cannot remove the managed save image: %s",
			               vm_last_error());
		k = vm_settle_state(dom, r);
		if (k < 0)
			return k;
		break;
	case VM_STRATEGY_SHUTDOWN:
		if (vm_state_is_inactive(state) && vm_state_is_running(r->orig_state)) {
			k = vm_start_domain(dom);
			if (k < 0)
				return vm_fail(r, k, "rollback: start failed: %s", vm_last_error());
			k = vm_settle_state(dom, r);
			if (k < 0)
				return k;
		}
		break;
	default:
		return 0;
	}

	if (vm_get_state(dom, &state) < 0)
		return vm_fail(r, -EIO, "rollback: cannot query state: %s", vm_last_error());
	if (vm_state_is_running(state) != vm_state_is_running(r->orig_state) ||
	    vm_state_is_inactive(state))
		return vm_fail(r, -EIO, "rollback: domain is %s, expected %s",
		               strna(vm_state_to_string(state)),
		               strna(vm_state_to_string(r->orig_state)));
	/* What the failed attempt cost this VM: its downtime ends here. */
	if (r->paused_at && vm_state_is_running(r->orig_state))
		r->resumed_at = vm_now(CLOCK_REALTIME);
	r->outcome = VM_OUTCOME_ROLLED_BACK;
	return 0;
}

static int job_rollback(VmJob *j, virConnectPtr c) {
	return rollback_domain(c, j->result);
}
int vm_rollback(virConnectPtr conn, VmResults *results, const char *reason, VmProgressCb cb,
                void *userdata) {
	_cleanup_free_ VmJob *jobs = NULL;
	VmRunner run;
	size_t n_jobs = 0;
	int r;

	if (!conn || !results)
		return -EINVAL;
	r = vm_runner_init_jobs(&run, conn, NULL, cb, userdata, results->n, &jobs);
	if (r < 0)
		return r;

	for (size_t i = 0; i < results->n; i++) {
		VmResult *v = &results->items[i];

		if (v->strategy == VM_STRATEGY_IGNORE || v->outcome == VM_OUTCOME_IGNORED ||
		    !v->uuid[0])
			continue;
		/* The VM that caused the rollback keeps its own error as the reason. */
		if (!v->error && reason)
			vm_result_set_error(v, "rolled back: %s", reason);
		jobs[n_jobs++] =
		        (VmJob){ .result = v, .func = job_rollback, .start_outcome = v->outcome };
	}
	r = vm_run_jobs(&run, jobs, n_jobs, vm_plan_parallel(run.plan));
	vm_runner_done(&run);
	return r;
}
