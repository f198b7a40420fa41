/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * keep-ram's part of a VM's record (the handoff record and the report): the kept file, its
 * mark and digest, or why the VM fell back to checkpoint. Only json-c: the handoff record's
 * fuzz target links it with vm.c.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "keep-ram.h"
#include "macros.h"

static const char *const seal_table[_KEPT_RAM_SEAL_MAX] = {
	[KEPT_RAM_SEAL_NONE] = "none",
	[KEPT_RAM_SEAL_IMMUTABLE] = "immutable",
	[KEPT_RAM_SEAL_ROOT_OWNED] = "root-owned",
	[KEPT_RAM_SEAL_DIGEST_FORCED] = "digest-forced",
};

const char *kept_ram_seal_to_string(KeptRamSeal s) {
	return (unsigned)s < _KEPT_RAM_SEAL_MAX ? seal_table[s] : NULL;
}

KeptRamSeal kept_ram_seal_from_string(const char *s) {
	for (int i = 0; s && i < _KEPT_RAM_SEAL_MAX; i++)
		if (streq(s, seal_table[i]))
			return (KeptRamSeal)i;
	return _KEPT_RAM_SEAL_INVALID;
}

void kept_ram_free(KeptRam *k) {
	if (!k)
		return;
	free(k->path);
	free(k->state_dir);
	free(k->generation);
	free(k->digest);
	free(k->fallback_reason);
	free(k);
}

static struct json_object *string_or_null(const char *s) {
	return s ? json_object_new_string(s) : NULL;
}

void kept_ram_add_json(const KeptRam *k, struct json_object *vm) {
	struct json_object *o = NULL;

	if (k && k->path) {
		o = json_object_new_object();
		json_object_object_add(o, "path", json_object_new_string(k->path));
		json_object_object_add(o, "state_dir", string_or_null(k->state_dir));
		json_object_object_add(o, "size", json_object_new_int64((int64_t)k->size));
		json_object_object_add(o, "inode", json_object_new_int64((int64_t)k->inode));
		json_object_object_add(o, "generation", string_or_null(k->generation));
		json_object_object_add(o, "digest_mode",
		                       json_object_new_string(strna(
		                               keep_ram_digest_mode_to_string(k->digest_mode))));
		json_object_object_add(o, "digest", string_or_null(k->digest));
		json_object_object_add(o, "digest_time",
		                       json_object_new_int64((int64_t)k->digest_usec));
		json_object_object_add(o, "verify_time",
		                       json_object_new_int64((int64_t)k->verify_usec));
		json_object_object_add(o, "start_attempts",
		                       json_object_new_int((int)k->start_attempts));
		json_object_object_add(
		        o, "seal", json_object_new_string(strna(kept_ram_seal_to_string(k->seal))));
	}
	json_object_object_add(vm, "kept_ram", o);
	json_object_object_add(vm, "fallback_reason",
	                       string_or_null(k ? k->fallback_reason : NULL));
}

/* Copies an optional string field; a present non-string is malformed. */
static int dup_field(struct json_object *o, const char *key, bool required, char **ret) {
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !v)
		return required ? -EBADMSG : 0;
	if (!json_object_is_type(v, json_type_string))
		return -EBADMSG;
	*ret = strdup(json_object_get_string(v));
	return *ret ? 0 : -ENOMEM;
}

static int uint_field(struct json_object *o, const char *key, uint64_t *ret) {
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !v)
		return 0;
	if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0)
		return -EBADMSG;
	*ret = (uint64_t)json_object_get_int64(v);
	return 0;
}

static int kept_ram_fill(struct json_object *o, KeptRam *k) {
	_cleanup_free_ char *mode = NULL, *seal = NULL;
	uint64_t attempts = 0;
	int e;

	if (!json_object_is_type(o, json_type_object))
		return -EBADMSG;
	if ((e = dup_field(o, "path", true, &k->path)) < 0 ||
	    (e = dup_field(o, "state_dir", true, &k->state_dir)) < 0 ||
	    (e = dup_field(o, "generation", true, &k->generation)) < 0 ||
	    (e = dup_field(o, "digest", false, &k->digest)) < 0 ||
	    (e = dup_field(o, "digest_mode", true, &mode)) < 0 ||
	    (e = uint_field(o, "size", &k->size)) < 0 ||
	    (e = uint_field(o, "inode", &k->inode)) < 0 ||
	    (e = uint_field(o, "digest_time", &k->digest_usec)) < 0 ||
	    (e = uint_field(o, "verify_time", &k->verify_usec)) < 0 ||
	    (e = uint_field(o, "start_attempts", &attempts)) < 0 ||
	    (e = dup_field(o, "seal", false, &seal)) < 0)
		return e;
	/* A record written before sealing existed has none. */
	k->seal = seal ? kept_ram_seal_from_string(seal) : KEPT_RAM_SEAL_NONE;
	if (k->seal < 0)
		return -EBADMSG;
	k->digest_mode = keep_ram_digest_mode_from_string(mode);
	k->start_attempts = (unsigned)MIN(attempts, 1000u);
	return k->digest_mode < 0 || (k->digest_mode != KEEP_RAM_DIGEST_MARK && !k->digest)
	               ? -EBADMSG
	               : 0;
}

int kept_ram_from_vm_json(struct json_object *vm, KeptRam **ret) {
	struct json_object *o = NULL;
	KeptRam *k;
	int e = 0;

	*ret = NULL;
	(void)json_object_object_get_ex(vm, "kept_ram", &o);
	k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	if (o)
		e = kept_ram_fill(o, k);
	if (e >= 0)
		e = dup_field(vm, "fallback_reason", false, &k->fallback_reason);
	if (e < 0 || (!k->path && !k->fallback_reason)) {
		kept_ram_free(k);
		return e;
	}
	*ret = k;
	return 0;
}
