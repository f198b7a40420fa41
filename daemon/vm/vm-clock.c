/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Guest clocks after the restore: a restored VM's clock stands still while it is saved, so it
 * runs behind by its downtime. Once every VM is back, each resumed one is given the host's
 * wall clock through its guest agent (virDomainSetTime()), each call bounded by the agent's
 * response timeout; a VM whose agent does not answer keeps its clock and the reason. Never
 * part of a VM's downtime, never a restore failure.
 */

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "vm.h"
#include "vm-internal.h"
#include "macros.h"

/* Concurrent agent calls: each is a short exchange with one guest. */
#define CLOCK_SYNC_PARALLEL 16u

/* Records why r's clock was not set: why, and libvirt's detail when there is one. */
static void clock_not_synced(VmResult *r, const char *why, const char *detail) {
	char *s = NULL;

	if (!detail)
		s = strdup(why);
	else if (asprintf(&s, "%s: %s", why, detail) < 0)
		s = NULL;
	free(r->clock_sync_reason);
	r->clock_sync_reason = s ?: strdup("out of memory");
	r->clock_sync = VM_CLOCK_SYNC_FAILED;
}

/* Why virDomainSetTime() failed, in an operator's words, from libvirt's last error. */
static void clock_failed(VmResult *r) {
	const virError *e = virGetLastError();
	const char *msg = vm_last_error();

	if (strstr(msg, "agent is not configured"))
		clock_not_synced(r, "no guest agent channel configured", NULL);
	else if (e && (e->code == VIR_ERR_AGENT_UNRESPONSIVE || e->code == VIR_ERR_AGENT_UNSYNCED))
		clock_not_synced(r, "the guest agent did not answer", msg);
	else
		clock_not_synced(r, "setting the guest's clock failed", msg);
}

/* Sets r's guest clock to the host's wall clock, waiting at most timeout_sec for its agent. */
static void clock_sync_one(virConnectPtr c, VmResult *r, int timeout_sec) {
	_cleanup_domain_ virDomainPtr dom = vm_lookup(c, r);
	struct timespec now;
	long long guest_sec;
	unsigned guest_nsec;
	usec_t t0, host;
	int k;

	if (!dom) {
		clock_not_synced(r, "domain not found", vm_last_error());
		return;
	}
	/* The default blocks until the agent answers; the domain is fresh from its image, so its
	 * timeout was the default and is put back below. */
	if (virDomainAgentSetResponseTimeout(dom, timeout_sec, 0) < 0) {
		clock_not_synced(r, "cannot bound the guest agent's answer", vm_last_error());
		return;
	}
	/* Reading the guest's clock first says how far behind it is, and gets libvirt's handshake
	 * with a guest just resumed out of the way: the time set below is taken right before the
	 * command itself, which then lands within one agent round trip. */
	t0 = vm_now(CLOCK_MONOTONIC);
	k = virDomainGetTime(dom, &guest_sec, &guest_nsec, 0);
	if (k >= 0) {
		host = vm_now(CLOCK_REALTIME);
		r->clock_behind =
		        (int64_t)host - (guest_sec * 1000000LL + (long long)guest_nsec / 1000);
		r->clock_behind_known = true;
		clock_gettime(CLOCK_REALTIME, &now);
		k = virDomainSetTime(dom, (long long)now.tv_sec, (unsigned)now.tv_nsec, 0);
	}
	r->clock_sync_time = vm_now(CLOCK_MONOTONIC) - t0;
	if (k < 0)
		clock_failed(r);
	else {
		r->clock_sync = VM_CLOCK_SYNC_DONE;
		r->clock_synced_at = (usec_t)now.tv_sec * 1000000ULL + (usec_t)now.tv_nsec / 1000;
		free(r->clock_sync_reason);
		r->clock_sync_reason = NULL;
	}
	(void)virDomainAgentSetResponseTimeout(dom, VIR_DOMAIN_AGENT_RESPONSE_TIMEOUT_DEFAULT, 0);
	virResetLastError();
}

typedef struct ClockJob {
	virConnectPtr conn;
	VmResult *result;
	int timeout_sec;
	pthread_t thread;
	bool started;
} ClockJob;

static void *clock_thread(void *p) {
	ClockJob *j = p;

	clock_sync_one(j->conn, j->result, j->timeout_sec);
	return NULL;
}

/* Whether r's clock is to be set, or else why not (recorded in r). */
static bool clock_wanted(const VmPlan *plan, VmResult *r) {
	if (r->outcome == VM_OUTCOME_RESTORED)
		clock_not_synced(r, "left paused, as it was before the update", NULL);
	else if (r->outcome != VM_OUTCOME_RESUMED)
		return false; /* failed: its reason is the restore's */
	else if (r->strategy == VM_STRATEGY_SHUTDOWN)
		clock_not_synced(r, "started afresh: its clock was set when it booted", NULL);
	else if (plan->no_clock_sync)
		clock_not_synced(r, "disabled by the policy ([VM] SyncGuestClock=no)", NULL);
	else
		return true;
	return false;
}

int vm_sync_clocks(virConnectPtr conn, const VmPlan *plan, VmResults *results) {
	_cleanup_free_ ClockJob *jobs = NULL;
	size_t n = 0;
	int timeout_sec;

	if (!conn || !results)
		return -EINVAL;
	plan = plan ?: &vm_default_plan;
	timeout_sec =
	        (int)((plan->clock_sync_timeout_usec ?: VM_CLOCK_SYNC_TIMEOUT_DEFAULT) / 1000000ULL)
	                ?: 1;
	jobs = calloc(results->n ?: 1, sizeof(ClockJob));
	if (!jobs)
		return -ENOMEM;
	for (size_t i = 0; i < results->n; i++)
		if (clock_wanted(plan, &results->items[i]))
			jobs[n++] = (ClockJob){ .conn = conn,
				                .result = &results->items[i],
				                .timeout_sec = timeout_sec };

	/* libvirt connections are thread-safe: the calls share conn, CLOCK_SYNC_PARALLEL at a
	 * time; a thread that cannot start leaves its call to this one. */
	for (size_t first = 0; first < n; first += CLOCK_SYNC_PARALLEL) {
		size_t end = MIN(n, first + CLOCK_SYNC_PARALLEL);

		for (size_t i = first; i < end; i++)
			jobs[i].started =
			        pthread_create(&jobs[i].thread, NULL, clock_thread, &jobs[i]) == 0;
		for (size_t i = first; i < end; i++) {
			if (jobs[i].started)
				pthread_join(jobs[i].thread, NULL);
			else
				clock_sync_one(conn, jobs[i].result, timeout_sec);
		}
	}
	return 0;
}
