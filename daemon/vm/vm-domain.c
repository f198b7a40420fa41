/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Small steps on one domain that the commit, rollback and restore paths share: the plan's
 * limits, the state checks, failing a VmResult with its reason, starting a domain (from its
 * managed save) and putting it back into its state before the commit.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "vm.h"
#include "vm-internal.h"
#include "keep-ram.h"
#include "macros.h"

void vm_domain_freep(virDomainPtr *d) {
	if (*d)
		virDomainFree(*d);
}

const VmPlan vm_default_plan = {};

unsigned vm_plan_parallel(const VmPlan *p) {
	return p->parallel ?: VM_PARALLEL_DEFAULT;
}

usec_t vm_plan_pause_timeout(const VmPlan *p) {
	return p->pause_timeout_usec ?: VM_PAUSE_TIMEOUT_DEFAULT;
}

usec_t vm_plan_save_timeout(const VmPlan *p) {
	return p->save_timeout_usec ?: VM_SAVE_TIMEOUT_DEFAULT;
}

usec_t vm_plan_shutdown_timeout(const VmPlan *p) {
	return p->shutdown_timeout_usec ?: VM_SHUTDOWN_TIMEOUT_DEFAULT;
}

usec_t vm_plan_restore_timeout(const VmPlan *p) {
	return p->restore_timeout_usec ?: VM_RESTORE_TIMEOUT_DEFAULT;
}

bool vm_state_is_running(int s) {
	return s == VIR_DOMAIN_RUNNING || s == VIR_DOMAIN_BLOCKED;
}

bool vm_state_is_inactive(int s) {
	return s == VIR_DOMAIN_SHUTOFF || s == VIR_DOMAIN_CRASHED;
}

/* Marks r failed with a reason and returns error. */
int vm_fail(VmResult *r, int error, const char *fmt, ...) {
	char *s = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	if (r->error && s) {
		/* Keep the first cause in front: "save failed: ...; rollback: ..." */
		vm_result_set_error(r, "%s; %s", r->error, s);
		free(s);
	} else if (s) {
		free(r->error);
		r->error = s;
	}
	r->outcome = VM_OUTCOME_FAILED;
	return error;
}

/* Whether the last libvirt error on this thread means "this flag/call is not supported". */
bool vm_last_error_is_unsupported(bool invalid_arg_too) {
	int code = virGetLastErrorCode();

	return code == VIR_ERR_NO_SUPPORT || code == VIR_ERR_ARGUMENT_UNSUPPORTED ||
	       (invalid_arg_too && code == VIR_ERR_INVALID_ARG);
}

int vm_get_state(virDomainPtr dom, int *ret) {
	int state, reason;

	if (vm_ops->get_state(dom, &state, &reason, 0) < 0)
		return -EIO;
	*ret = state;
	return 0;
}

virDomainPtr vm_lookup(virConnectPtr c, const VmResult *r) {
	if (r->uuid[0])
		return virDomainLookupByUUIDString(c, r->uuid);
	return virDomainLookupByName(c, r->name);
}

/* Starts an inactive domain; from its managed save image when it has one. Comes back paused
 * where the driver supports VIR_DOMAIN_START_PAUSED, so that the caller resumes explicitly. */
int vm_start_domain(virDomainPtr dom) {
	if (vm_ops->create(dom, VIR_DOMAIN_START_PAUSED) == 0)
		return 0;
	if (!vm_last_error_is_unsupported(true))
		return -EIO;
	return vm_ops->create(dom, 0) < 0 ? -EIO : 0;
}

/* vm_start_domain() from a managed save; a keep-ram restore that lost the race for x-ignore-shared
 * (libvirt's migrate-incoming before the hook's helper) failed cleanly with its image and file
 * kept: it is tried again, at most KEEP_RAM_START_ATTEMPTS times in all. */
int vm_start_saved(virDomainPtr dom, VmResult *r) {
	for (unsigned a = 1;; a++) {
		int k = vm_start_domain(dom);

		if (r->kept_ram)
			r->kept_ram->start_attempts = a;
		if (k >= 0 || r->strategy != VM_STRATEGY_KEEP_RAM || a >= KEEP_RAM_START_ATTEMPTS ||
		    !keep_ram_race_lost(vm_last_error()))
			return k;
	}
}

void vm_plan_event(const VmPlan *plan, const VmResult *r, VmEvent e) {
	if (plan && plan->on_event)
		plan->on_event(r, e, plan->event_userdata);
}

/* Puts an active domain into its state before the commit: resumed when it was running, paused
 * when it was paused (a driver without VIR_DOMAIN_START_PAUSED may start it running). */
int vm_settle_state(virDomainPtr dom, VmResult *r) {
	int state;

	if (vm_get_state(dom, &state) < 0)
		return vm_fail(r, -EIO, "cannot query state: %s", vm_last_error());
	if (vm_state_is_running(r->orig_state) && state == VIR_DOMAIN_PAUSED &&
	    vm_ops->resume(dom) < 0)
		return vm_fail(r, -EIO, "resume failed: %s", vm_last_error());
	if (r->orig_state == VIR_DOMAIN_PAUSED && vm_state_is_running(state) &&
	    vm_ops->suspend(dom) < 0)
		return vm_fail(r, -EIO, "pause failed: %s", vm_last_error());
	return 0;
}
