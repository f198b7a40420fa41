/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "string-util.h"
#include "update.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

static const char *const state_names[_UPDATE_STATE_MAX] = {
	[UPDATE_STAGED] = "staged",         [UPDATE_COMMITTING] = "committing",
	[UPDATE_COMPLETING] = "completing", [UPDATE_DONE] = "done",
	[UPDATE_CANCELLED] = "cancelled",   [UPDATE_FAILED] = "failed",
};

const char *update_state_to_string(UpdateState s) {
	if (s < 0 || s >= _UPDATE_STATE_MAX)
		return NULL;
	return state_names[s];
}

UpdateState update_state_from_string(const char *s) {
	for (int i = 0; i < _UPDATE_STATE_MAX; i++)
		if (s && streq(state_names[i], s))
			return (UpdateState)i;
	return _UPDATE_STATE_INVALID;
}

bool update_state_is_terminal(UpdateState s) {
	return s == UPDATE_DONE || s == UPDATE_CANCELLED || s == UPDATE_FAILED;
}

bool update_id_is_valid(const char *id) {
	if (!id || strlen(id) != UPDATE_ID_LEN)
		return false;
	for (const char *p = id; *p; p++)
		if (!strchr("0123456789abcdef", *p))
			return false;
	return true;
}

int update_id_new(char **ret) {
	static const char hex[] = "0123456789abcdef";
	uint8_t b[UPDATE_ID_LEN / 2];
	char *s;

	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		return -errno ?: -EIO;
	s = malloc(UPDATE_ID_LEN + 1);
	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < sizeof(b); i++) {
		s[2 * i] = hex[b[i] >> 4];
		s[2 * i + 1] = hex[b[i] & 0xf];
	}
	s[UPDATE_ID_LEN] = '\0';
	*ret = s;
	return 0;
}

Update *update_new(const char *id) {
	Update *u = calloc(1, sizeof(*u));

	if (!u)
		return NULL;
	u->id = strdup(id);
	u->phase = strdup(PHASE_STAGED);
	if (!u->id || !u->phase)
		return update_free(u);
	u->state = UPDATE_STAGED;
	u->handoff = _HANDOFF_MODE_INVALID;
	return u;
}

static void update_file_done(UpdateFile *f) {
	free(f->path);
	f->path = NULL;
}

Update *update_free(Update *u) {
	if (!u)
		return NULL;
	free(u->id);
	free(u->phase);
	update_file_done(&u->kernel);
	update_file_done(&u->initrd);
	free(u->kernel_version);
	free(u->kernel_version_source);
	free(u->cmdline);
	free(u->backend);
	free(u->old_kernel);
	free(u->handoff_reason);
	free(u->backend_reason);
	free(u->crash_image_before);
	free(u->crash_image_restore);
	free(u->kdump_initrd);
	free(u->handoff_boot_id);
	free(u->panic_boot_id);
	free(u->panic_from_phase);
	free(u->booted_kernel);
	free(u->error);
	strv_free(u->hooks_done);
	json_object_put(u->decisions);
	json_object_put(u->kept_memory);
	json_object_put(u->shutdown);
	json_object_put(u->platform);
	json_object_put(u->vms);
	json_object_put(u->deferred);
	for (size_t i = 0; i < u->n_stamps; i++)
		free(u->stamps[i].name);
	free(u->stamps);
	json_object_put(u->measure);
	free(u);
	return NULL;
}

int update_set_string(char **field, const char *value) {
	char *s = NULL;

	if (value) {
		s = strdup(value);
		if (!s)
			return -ENOMEM;
	}
	free(*field);
	*field = s;
	return 0;
}

static uint64_t clock_usec(clockid_t id) {
	struct timespec ts;

	if (clock_gettime(id, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

int update_add_stamp(Update *u, const char *name, bool with_tsc, const char *boot_id) {
	UpdateStamp *n, *s;

	n = realloc(u->stamps, (u->n_stamps + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	u->stamps = n;
	s = &u->stamps[u->n_stamps];
	*s = (UpdateStamp){ .name = strdup(name) };
	if (!s->name)
		return -ENOMEM;
		/* Read the TSC first: it is the finest of the three and the one a
	 * cross-kexec timebase will be anchored to. */
#if defined(__x86_64__) || defined(__i386__)
	if (with_tsc)
		s->tsc = __rdtsc();
#endif
	s->realtime_usec = clock_usec(CLOCK_REALTIME);
	s->monotonic_usec = clock_usec(CLOCK_MONOTONIC);
	if (boot_id && strlen(boot_id) < sizeof(s->boot_id))
		strcpy(s->boot_id, boot_id);
	u->n_stamps++;
	return 0;
}

void update_drop_last_stamp(Update *u) {
	if (u->n_stamps == 0)
		return;
	free(u->stamps[--u->n_stamps].name);
	u->stamps[u->n_stamps].name = NULL;
}

const UpdateStamp *update_find_stamp(const Update *u, const char *name) {
	for (size_t i = u->n_stamps; i > 0; i--)
		if (streq(u->stamps[i - 1].name, name))
			return &u->stamps[i - 1];
	return NULL;
}

bool update_hook_done(const Update *u, const char *key) {
	STRV_FOREACH (k, u->hooks_done)
		if (streq(*k, key))
			return true;
	return false;
}

/* JSON accessors: NULL strings become JSON null. */
static void add_str(json_object *o, const char *k, const char *v) {
	json_object_object_add(o, k, v ? json_object_new_string(v) : NULL);
}

static void add_u64(json_object *o, const char *k, uint64_t v) {
	json_object_object_add(o, k, json_object_new_uint64(v));
}

static json_object *file_to_json(const UpdateFile *f) {
	json_object *o;

	if (!f->path)
		return NULL;
	o = json_object_new_object();
	if (!o)
		return NULL;
	add_str(o, "path", f->path);
	add_u64(o, "size", f->size);
	add_u64(o, "mtime_usec", f->mtime_usec);
	if (f->inode > 0)
		add_u64(o, "inode", f->inode);
	if (f->ctime_usec > 0)
		add_u64(o, "ctime_usec", f->ctime_usec);
	add_str(o, "sha256", f->sha256);
	return o;
}

int update_to_json(const Update *u, json_object **ret) {
	json_object *o, *a;

	o = json_object_new_object();
	if (!o)
		return -ENOMEM;
	add_str(o, "id", u->id);
	add_str(o, "state", update_state_to_string(u->state));
	add_str(o, "phase", u->phase);
	add_u64(o, "progress", u->progress);
	json_object_object_add(o, "kernel", file_to_json(&u->kernel));
	add_str(o, "kernel_version", u->kernel_version);
	add_str(o, "kernel_version_source", u->kernel_version_source);
	json_object_object_add(o, "initrd", file_to_json(&u->initrd));
	add_str(o, "cmdline", u->cmdline);
	json_object_object_add(o, "reuse_cmdline", json_object_new_boolean(u->reuse_cmdline));
	add_str(o, "backend", u->backend);
	add_str(o, "backend_reason", u->backend_reason);
	add_str(o, "crash_image_before", u->crash_image_before);
	add_str(o, "crash_image_restore", u->crash_image_restore);
	add_str(o, "kdump_initrd", u->kdump_initrd);
	if (u->verified_bytes > 0)
		add_u64(o, "verified_bytes", u->verified_bytes);
	json_object_object_add(o, "crash_image_loaded",
	                       json_object_new_boolean(u->crash_image_loaded));
	add_str(o, "old_kernel", u->old_kernel);
	add_str(o, "handoff", handoff_mode_to_string(u->handoff));
	add_str(o, "handoff_reason", u->handoff_reason);
	add_str(o, "handoff_boot_id", u->handoff_boot_id);
	add_str(o, "panic_boot_id", u->panic_boot_id);
	add_str(o, "panic_from_phase", u->panic_from_phase);
	if (u->panic_parked_cpu)
		add_u64(o, "panic_parked_apicid", u->panic_parked_apicid);
	add_str(o, "booted_kernel", u->booted_kernel);
	add_str(o, "error", u->error);

	a = json_object_new_array();
	STRV_FOREACH (k, u->hooks_done)
		json_object_array_add(a, json_object_new_string(*k));
	json_object_object_add(o, "hooks_done", a);
	if (u->decisions)
		json_object_object_add(o, "decisions", json_object_get(u->decisions));
	if (u->kept_memory)
		json_object_object_add(o, "kept_memory", json_object_get(u->kept_memory));
	if (u->shutdown)
		json_object_object_add(o, "shutdown", json_object_get(u->shutdown));
	if (u->platform)
		json_object_object_add(o, "platform", json_object_get(u->platform));
	if (u->vms)
		json_object_object_add(o, "vms", json_object_get(u->vms));
	if (u->deferred)
		json_object_object_add(o, "deferred_units", json_object_get(u->deferred));
	if (u->measure)
		json_object_object_add(o, "measure", json_object_get(u->measure));

	a = json_object_new_array();
	for (size_t i = 0; i < u->n_stamps; i++) {
		json_object *s = json_object_new_object();

		add_str(s, "name", u->stamps[i].name);
		add_u64(s, "realtime_usec", u->stamps[i].realtime_usec);
		add_u64(s, "monotonic_usec", u->stamps[i].monotonic_usec);
		if (u->stamps[i].tsc)
			add_u64(s, "tsc", u->stamps[i].tsc);
		add_str(s, "boot_id", u->stamps[i].boot_id);
		json_object_array_add(a, s);
	}
	json_object_object_add(o, "phases", a);

	*ret = o;
	return 0;
}

static int get_str(json_object *o, const char *k, bool required, char **field) {
	json_object *v;

	if (!json_object_object_get_ex(o, k, &v) || json_object_is_type(v, json_type_null))
		return required ? -EBADMSG : update_set_string(field, NULL);
	if (!json_object_is_type(v, json_type_string))
		return -EBADMSG;
	return update_set_string(field, json_object_get_string(v));
}

/* The handoff mode at the record boundary: absent or null before the commit decided it. */
static int get_handoff_mode(json_object *o, const char *k, HandoffMode *ret) {
	json_object *v;

	*ret = _HANDOFF_MODE_INVALID;
	if (!json_object_object_get_ex(o, k, &v) || json_object_is_type(v, json_type_null))
		return 0;
	if (!json_object_is_type(v, json_type_string))
		return -EBADMSG;
	*ret = handoff_mode_from_string(json_object_get_string(v));
	return *ret < 0 ? -EBADMSG : 0;
}

static int get_u64(json_object *o, const char *k, uint64_t *ret) {
	json_object *v;

	if (!json_object_object_get_ex(o, k, &v) || !json_object_is_type(v, json_type_int))
		return -EBADMSG;
	*ret = json_object_get_uint64(v);
	return 0;
}

static bool get_bool(json_object *o, const char *k) {
	json_object *v;

	return json_object_object_get_ex(o, k, &v) && json_object_get_boolean(v);
}

static int file_from_json(json_object *o, const char *k, bool required, UpdateFile *f) {
	_cleanup_free_ char *sha = NULL;
	json_object *v;
	int r;

	if (!json_object_object_get_ex(o, k, &v) || json_object_is_type(v, json_type_null))
		return required ? -EBADMSG : 0;
	if (!json_object_is_type(v, json_type_object))
		return -EBADMSG;
	r = get_str(v, "path", true, &f->path);
	if (r >= 0)
		r = get_u64(v, "size", &f->size);
	if (r >= 0)
		r = get_u64(v, "mtime_usec", &f->mtime_usec);
	/* Optional: records written before they were kept have neither. */
	if (r >= 0 && json_object_object_get_ex(v, "inode", NULL))
		r = get_u64(v, "inode", &f->inode);
	if (r >= 0 && json_object_object_get_ex(v, "ctime_usec", NULL))
		r = get_u64(v, "ctime_usec", &f->ctime_usec);
	if (r >= 0)
		r = get_str(v, "sha256", true, &sha);
	if (r < 0)
		return r;
	if (strlen(sha) != DIGEST_SHA256_HEX_SIZE - 1)
		return -EBADMSG;
	memcpy(f->sha256, sha, DIGEST_SHA256_HEX_SIZE);
	return 0;
}

/* The array at key in o: 1 with *ret set, 0 when there is none, -EBADMSG when it is not
 * an array. */
static int get_array(json_object *o, const char *key, json_object **ret) {
	if (!json_object_object_get_ex(o, key, ret))
		return 0;
	if (!json_object_is_type(*ret, json_type_array))
		return -EBADMSG;
	return 1;
}

/* The record's "hooks_done" array a into u->hooks_done. */
static int hooks_from_json(json_object *a, Update *u) {
	int r;

	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *k = json_object_array_get_idx(a, i);

		if (!json_object_is_type(k, json_type_string))
			return -EBADMSG;
		r = strv_extend(&u->hooks_done, json_object_get_string(k));
		if (r < 0)
			return r;
	}
	return 0;
}

/* The record's "phases" array a into u->stamps. */
static int stamps_from_json(json_object *a, Update *u) {
	int r;

	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *s = json_object_array_get_idx(a, i), *v;
		_cleanup_free_ char *name = NULL, *boot = NULL;
		UpdateStamp *st, *n;

		if ((r = get_str(s, "name", true, &name)) < 0 ||
		    (r = get_str(s, "boot_id", false, &boot)) < 0)
			return r;
		n = realloc(u->stamps, (u->n_stamps + 1) * sizeof(*n));
		if (!n)
			return -ENOMEM;
		u->stamps = n;
		st = &u->stamps[u->n_stamps];
		*st = (UpdateStamp){ .name = TAKE_PTR(name) };
		u->n_stamps++;
		if ((r = get_u64(s, "realtime_usec", &st->realtime_usec)) < 0 ||
		    (r = get_u64(s, "monotonic_usec", &st->monotonic_usec)) < 0)
			return r;
		if (json_object_object_get_ex(s, "tsc", &v))
			st->tsc = json_object_get_uint64(v);
		if (boot && strlen(boot) < sizeof(st->boot_id))
			strcpy(st->boot_id, boot);
	}
	return 0;
}

/* An optional member of the given type, carried as it is; absent or null: none. */
static int get_json(json_object *o, const char *key, json_type type, json_object **ret) {
	json_object *a;

	if (!json_object_object_get_ex(o, key, &a) || !a)
		return 0;
	if (!json_object_is_type(a, type))
		return -EBADMSG;
	*ret = json_object_get(a);
	return 0;
}

int update_from_json(json_object *o, Update **ret) {
	_cleanup_(update_freep) Update *u = NULL;
	_cleanup_free_ char *id = NULL, *state = NULL;
	json_object *a;
	uint64_t progress;
	int r;

	if (!o || !json_object_is_type(o, json_type_object))
		return -EBADMSG;
	r = get_str(o, "id", true, &id);
	if (r < 0)
		return r;
	if (!update_id_is_valid(id))
		return -EBADMSG;
	u = update_new(id);
	if (!u)
		return -ENOMEM;

	r = get_str(o, "state", true, &state);
	if (r < 0)
		return r;
	u->state = update_state_from_string(state);
	if (u->state < 0)
		return -EBADMSG;
	if ((r = get_str(o, "phase", true, &u->phase)) < 0 ||
	    (r = get_u64(o, "progress", &progress)) < 0 ||
	    (r = file_from_json(o, "kernel", true, &u->kernel)) < 0 ||
	    (r = get_str(o, "kernel_version", true, &u->kernel_version)) < 0 ||
	    (r = get_str(o, "kernel_version_source", false, &u->kernel_version_source)) < 0 ||
	    (r = file_from_json(o, "initrd", false, &u->initrd)) < 0 ||
	    (r = get_str(o, "cmdline", true, &u->cmdline)) < 0 ||
	    (r = get_str(o, "backend", true, &u->backend)) < 0 ||
	    (r = get_str(o, "old_kernel", false, &u->old_kernel)) < 0 ||
	    (r = get_handoff_mode(o, "handoff", &u->handoff)) < 0 ||
	    (r = get_str(o, "handoff_reason", false, &u->handoff_reason)) < 0 ||
	    (r = get_str(o, "backend_reason", false, &u->backend_reason)) < 0 ||
	    (r = get_str(o, "crash_image_before", false, &u->crash_image_before)) < 0 ||
	    (r = get_str(o, "crash_image_restore", false, &u->crash_image_restore)) < 0 ||
	    (r = get_str(o, "kdump_initrd", false, &u->kdump_initrd)) < 0 ||
	    (r = get_str(o, "handoff_boot_id", false, &u->handoff_boot_id)) < 0 ||
	    (r = get_str(o, "panic_boot_id", false, &u->panic_boot_id)) < 0 ||
	    (r = get_str(o, "panic_from_phase", false, &u->panic_from_phase)) < 0 ||
	    (r = get_str(o, "booted_kernel", false, &u->booted_kernel)) < 0 ||
	    (r = get_str(o, "error", false, &u->error)) < 0)
		return r;
	u->progress = (unsigned)MIN(progress, 100u);
	if (json_object_object_get_ex(o, "verified_bytes", NULL) &&
	    get_u64(o, "verified_bytes", &u->verified_bytes) < 0)
		return -EBADMSG;
	if (json_object_object_get_ex(o, "panic_parked_apicid", NULL)) {
		uint64_t apicid;

		if (get_u64(o, "panic_parked_apicid", &apicid) < 0 || apicid > UINT32_MAX)
			return -EBADMSG;
		u->panic_parked_cpu = true;
		u->panic_parked_apicid = (uint32_t)apicid;
	}
	u->reuse_cmdline = get_bool(o, "reuse_cmdline");
	u->crash_image_loaded = get_bool(o, "crash_image_loaded");

	r = get_array(o, "hooks_done", &a);
	if (r > 0)
		r = hooks_from_json(a, u);
	if (r < 0)
		return r;

	if ((r = get_json(o, "decisions", json_type_object, &u->decisions)) < 0 ||
	    (r = get_json(o, "kept_memory", json_type_object, &u->kept_memory)) < 0 ||
	    (r = get_json(o, "shutdown", json_type_object, &u->shutdown)) < 0 ||
	    (r = get_json(o, "platform", json_type_object, &u->platform)) < 0 ||
	    (r = get_json(o, "vms", json_type_array, &u->vms)) < 0 ||
	    (r = get_json(o, "deferred_units", json_type_object, &u->deferred)) < 0)
		return r;
	/* measure: null is malformed (a record always wrote an object or nothing). */
	if (json_object_object_get_ex(o, "measure", &a)) {
		if (!json_object_is_type(a, json_type_object))
			return -EBADMSG;
		u->measure = json_object_get(a);
	}

	r = get_array(o, "phases", &a);
	if (r > 0)
		r = stamps_from_json(a, u);
	if (r < 0)
		return r;

	*ret = TAKE_PTR(u);
	return 0;
}

int update_from_record(const char *text, Update **ret) {
	json_object *o = json_tokener_parse(text);
	int r;

	if (!o)
		return -EBADMSG;
	r = update_from_json(o, ret);
	json_object_put(o);
	return r;
}

int update_copy(const Update *u, Update **ret) {
	json_object *o;
	int r;

	r = update_to_json(u, &o);
	if (r < 0)
		return r;
	r = update_from_json(o, ret);
	json_object_put(o);
	return r;
}
