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
#include "path-util.h"
#include "report.h"
#include "string-util.h"
#include "upgrade-bus.h"

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

int context_decide_handoff(Context *c, Update *u, HandoffMode *ret_mode, char **ret_reason) {
	_cleanup_free_ char *why = NULL;
	HandoffMode mode = HANDOFF_MODE_VERIFIED;
	int r;

	/* 1. The policy decides (when loaded); 2. the backend limits what is possible. */
	if (c->policy) {
		HandoffDecision d = {};
		HandoffFacts facts;

		handoff_facts_gather(c->root, c->backend, &facts);
		r = policy_decide_handoff(c->policy, &facts, &d);
		if (r < 0)
			return r;
		mode = d.handoff;
		r = reasons_to_text(&d.reasons, &why);
		policy_handoff_decision_done(&d);
		if (r < 0)
			return r;
	} else {
		why = strdup("no policy loaded: verify every segment");
		if (!why)
			return -ENOMEM;
	}
	/* A backend without a fast mode (kexec_file: the kernel's own purgatory) says so
	 * whatever the policy chose, so that the dry run and the report tell an operator
	 * why this host never hands over fast and has no stamps. */
	if (!(c->backend->supported_modes & HANDOFF_MODE_BIT(HANDOFF_MODE_FAST))) {
		_cleanup_free_ char *more = NULL;

		if (asprintf(&more,
		             "%s; info: backend-verifies-only: backend %s always verifies: no fast "
		             "handoff and no purgatory stamps there",
		             why, c->backend->name) < 0)
			return -ENOMEM;
		free(why);
		why = TAKE_PTR(more);
		mode = HANDOFF_MODE_VERIFIED;
	}
	*ret_mode = mode;
	*ret_reason = TAKE_PTR(why);
	return 0;
}

/* The questions a commit asks before it changes anything: the update must be staged,
 * the policy decides the handoff mode, and the commit check (VM decisions and
 * preconditions) may refuse. Returns 1 when the commit may proceed, 0 when the policy
 * refuses it (*ret_refusal says why), < 0 on error (error set where it is the caller's).
 * Nothing is persisted; Commit and its dry run (PlanCommit) share it. */
int context_decide_commit(Context *c, const char *id, Update **ret_update, HandoffMode *ret_mode,
                          char **ret_why, json_object **ret_decisions, char **ret_refusal,
                          sd_bus_error *error) {
	_cleanup_(json_object_putp) json_object *decisions = NULL;
	_cleanup_free_ char *why = NULL, *refusal = NULL;
	const ContextStep *check;
	HandoffMode mode;
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
	/* Kept memory as it is now (a filesystem unmounted since stage shows here): the VM
	 * decisions weigh it. */
	context_kept_memory_refresh(c, u);
	if ((check = context_commit_check_step(c))) {
		allowed = check->vt->commit_check(c, u, check->userdata, &decisions, &refusal);
		if (allowed < 0)
			return sd_bus_error_setf(error,
			                         allowed == -ETIMEDOUT
			                                 ? UPGRADE_ERROR_LIBVIRT_TIMEOUT
			                                 : UPGRADE_ERROR_VM_FAILED,
			                         "Cannot decide how to preserve the VMs: %s.",
			                         refusal ?: strerror(-allowed));
	}

	*ret_update = u;
	*ret_mode = mode;
	*ret_why = TAKE_PTR(why);
	*ret_decisions = TAKE_PTR(decisions);
	*ret_refusal = TAKE_PTR(refusal);
	return allowed > 0;
}

int context_plan_commit(Context *c, const char *id, char **ret_json, sd_bus_error *error) {
	_cleanup_(json_object_putp) json_object *o = NULL, *decisions = NULL;
	_cleanup_free_ char *why = NULL, *refusal = NULL;
	HandoffMode mode;
	json_object *h, *km = NULL;
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
	json_object_object_add(h, "mode", json_object_new_string(handoff_mode_to_string(mode)));
	json_object_object_add(h, "reason", json_object_new_string(why));
	json_object_object_add(o, "decisions", TAKE_PTR(decisions));
	if (context_kept_memory(c, u, NULL, &km) >= 0)
		json_object_object_add(o, "kept_memory", km);

	s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
	                                                     JSON_C_TO_STRING_NOSLASHESCAPE));
	if (!s)
		return -ENOMEM;
	*ret_json = s;
	return 0;
}
