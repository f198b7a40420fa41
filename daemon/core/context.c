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

#include "architecture.h"
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

static const ContextStepVTable image_step = {
	.name = "kexec-image",
	.hooks = { [HOOK_PRE_HANDOFF] = { "kexec-image-loaded", hook_image_loaded } },
};

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
	r = platform_facts_read(c->root, &c->platform);
	if (r < 0)
		return r;

	if (uname(&un) < 0)
		return -errno;
	c->running_kernel = strdup(un.release);
	if (!c->running_kernel)
		return -ENOMEM;
	if (sd_id128_get_boot(&boot) >= 0)
		sd_id128_to_string(boot, c->boot_id);
	c->panic_kernel = running_on_panic_kernel(c->root);

	r = context_add_step(c, CONTEXT_STEP_KEXEC_IMAGE, &image_step, NULL);
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

int context_add_step(Context *c, ContextStepId id, const ContextStepVTable *vt, void *userdata) {
	if (!c || id < 0 || id >= _CONTEXT_STEP_MAX || !vt || !vt->name)
		return -EINVAL;
	for (int k = 0; k < _HOOK_KIND_MAX; k++)
		if (vt->hooks[k].func && !vt->hooks[k].key)
			return -EINVAL;
	if (c->steps[id].vt)
		return -EEXIST;
	if (vt->commit_check && context_commit_check_step(c))
		return -EBUSY;
	c->steps[id] = (ContextStep){ .vt = vt, .userdata = userdata };
	return 0;
}

const ContextStep *context_commit_check_step(const Context *c) {
	CONTEXT_FOREACH_STEP (s, c)
		if (s->vt->commit_check)
			return s;
	return NULL;
}

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
		                         "'%s' is not an update id (16 hex digits).",
		                         QUOTE_CUT(id, 32));
	u = context_find(c, id);
	if (!u)
		return sd_bus_error_setf(error, UPGRADE_ERROR_NO_SUCH_UPDATE, "No update '%s'.",
		                         id);
	*ret = u;
	return 0;
}

int context_save(Context *c, Update *u) {
	int r = context_persist(c, u);

	if (r >= 0)
		context_notify_update(c, u);
	return r;
}

void context_notify(Context *c, Update *u) {
	if (c->ops.update_changed)
		c->ops.update_changed(c, u, c->ops_userdata);
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
	json_object_object_add(o, "Architecture", json_object_new_string(UPGRADED_ARCHITECTURE));

	json_object_object_add(o, "Backend", b = json_object_new_object());
	json_object_object_add(b, "Name", json_object_new_string(c->backend->name));
	json_object_object_add(b, "Usable", json_object_new_boolean(c->backend_status >= 0));
	json_object_object_add(
	        b, "Reason", c->backend_reason ? json_object_new_string(c->backend_reason) : NULL);
	json_object_object_add(b, "TestOnly", json_object_new_boolean(c->backend->test_only));
	json_object_object_add(b, "Fallback", json_object_new_boolean(c->backend_fallback));
	json_object_object_add(b, "CrashKernelReserved",
	                       json_object_new_boolean(kexec_crash_reserved(c->root)));

	json_object_object_add(o, "Platform", a = json_object_new_object());
	json_object_object_add(
	        a, "Firmware",
	        json_object_new_string(platform_firmware_to_string(c->platform.firmware)));
	json_object_object_add(
	        a, "SecureBoot",
	        json_object_new_string(platform_secure_boot_to_string(c->platform.secure_boot)));
	json_object_object_add(
	        a, "Lockdown",
	        json_object_new_string(platform_lockdown_to_string(c->platform.lockdown)));

	json_object_object_add(o, "AllowedRoots", a = json_object_new_array());
	STRV_FOREACH (p, c->allowed_roots)
		json_object_array_add(a, json_object_new_string(*p));

	/* The settings in effect (upgraded.conf and its drop-ins, defaults filled in). */
	if (c->policy) {
		r = policy_to_json(c->policy, &a);
		if (r < 0)
			return r;
		json_object_object_add(o, "Policy", a);
	} else
		json_object_object_add(o, "Policy", NULL);

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
		                         "'%s' is not an update id (16 hex digits).",
		                         QUOTE_CUT(id, 32));

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

/* ---- accessors ---- */

const char *context_root(const Context *c) {
	return c->root;
}

const Policy *context_policy(const Context *c) {
	return c->policy;
}

const KexecBackend *context_backend(const Context *c) {
	return c->backend;
}

int context_backend_status(const Context *c, const char **ret_reason, bool *ret_fallback) {
	if (ret_reason)
		*ret_reason = c->backend_reason;
	if (ret_fallback)
		*ret_fallback = c->backend_fallback;
	return c->backend_status;
}

const char *context_running_kernel(const Context *c) {
	return c->running_kernel;
}

const char *context_boot_id(const Context *c) {
	return c->boot_id;
}

bool context_on_panic_kernel(const Context *c) {
	return c->panic_kernel;
}

Update *const *context_updates(const Context *c, size_t *ret_n) {
	*ret_n = c->n_updates;
	return c->updates;
}

Update *context_active(const Context *c) {
	return c->active;
}

const char *context_last_report(const Context *c) {
	return c->last_report;
}

int context_set_host(Context *c, const char *running_kernel, const char *boot_id) {
	if (boot_id && strlen(boot_id) != sizeof(c->boot_id) - 1)
		return -EINVAL;
	if (running_kernel) {
		char *k = strdup(running_kernel);

		if (!k)
			return -ENOMEM;
		free(c->running_kernel);
		c->running_kernel = k;
	}
	if (boot_id)
		memcpy(c->boot_id, boot_id, sizeof(c->boot_id));
	return 0;
}

void context_set_ops(Context *c, const ContextOps *ops, void *userdata) {
	c->ops = *ops;
	c->ops_userdata = userdata;
}

void context_set_persist_hook(Context *c, PersistHook hook, void *userdata) {
	c->persist_hook = hook;
	c->persist_hook_userdata = userdata;
}

void context_set_handoff_hold(Context *c, HandoffHold hold, void *userdata) {
	c->handoff_hold = hold;
	c->handoff_hold_userdata = userdata;
}

void context_set_settled(Context *c, ContextSettled settled, void *userdata) {
	c->settled = settled;
	c->settled_userdata = userdata;
}
