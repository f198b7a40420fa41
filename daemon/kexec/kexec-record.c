/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * TEST-ONLY backend "record": instead of loading a kernel it appends what it
 * was asked to <root>/run/upgraded/kexec-record.json (a JSON object with the
 * list of requests and what is "loaded"). Integration tests read that file to
 * see exactly what the commit path would have handed to the kernel. The daemon
 * refuses it without --root.
 */
#include <errno.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "digest.h"
#include "fileio.h"
#include "json-util.h"
#include "kexec-backend.h"
#include "macros.h"
#include "path-util.h"

#define RECORD_PATH "/run/upgraded/kexec-record.json"

static int record_read(const char *root, json_object **ret) {
	_cleanup_free_ char *path = NULL, *data = NULL;
	json_object *o;
	int r;

	r = path_prefix_root(root, RECORD_PATH, &path);
	if (r < 0)
		return r;
	r = read_file_full(path, 1 << 20, &data, NULL);
	if (r == -ENOENT) {
		o = json_object_new_object();
		if (!o)
			return -ENOMEM;
		json_object_object_add(o, "requests", json_object_new_array());
		json_object_object_add(o, "loaded", json_object_new_boolean(false));
		json_object_object_add(o, "crash_loaded", json_object_new_boolean(false));
		*ret = o;
		return 0;
	}
	if (r < 0)
		return r;
	o = json_tokener_parse(data);
	if (!o || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		return -EBADMSG;
	}
	*ret = o;
	return 0;
}

static int record_write(const char *root, json_object *o) {
	_cleanup_free_ char *path = NULL, *dir = NULL;
	int r;

	r = path_prefix_root(root, RECORD_PATH, &path);
	if (r < 0)
		return r;
	r = path_prefix_root(root, "/run/upgraded", &dir);
	if (r < 0)
		return r;
	return json_write_file_atomic(dir, path, o);
}

static int record_append(const char *root, json_object *req, const char *loaded_key, bool loaded) {
	_cleanup_(json_object_putp) json_object *o = NULL;
	json_object *a;
	int r;

	r = record_read(root, &o);
	if (r < 0) {
		json_object_put(req);
		return r;
	}
	if (!json_object_object_get_ex(o, "requests", &a)) {
		a = json_object_new_array();
		json_object_object_add(o, "requests", a);
	}
	json_object_array_add(a, req);
	json_object_object_add(o, loaded_key, json_object_new_boolean(loaded));
	return record_write(root, o);
}

static int record_probe(const char *root, char **ret_reason) {
	return 0;
}

static int record_load(const char *root, const KexecImage *image) {
	char sha[DIGEST_SHA256_HEX_SIZE], initrd_sha[DIGEST_SHA256_HEX_SIZE] = "";
	json_object *req;
	int r;

	if (image->kernel_fd < 0)
		return -EBADF;
	/* Hash what the descriptors really hold: tests compare it with the digest recorded
	 * at stage time. The initrd is read whole too, as the real backends read it (into
	 * the segments, or the kernel's kexec_file_load). */
	r = digest_file(image->kernel_fd, sha, NULL);
	if (r < 0)
		return r;
	if (image->initrd_fd >= 0 && image->initrd_path) {
		r = digest_file(image->initrd_fd, initrd_sha, NULL);
		if (r < 0)
			return r;
	}
	req = json_object_new_object();
	if (!req)
		return -ENOMEM;
	json_object_object_add(req, "op", json_object_new_string("load"));
	json_object_object_add(req, "kernel", json_object_new_string(image->kernel_path));
	json_object_object_add(req, "kernel_sha256", json_object_new_string(sha));
	json_object_object_add(req, "initrd",
	                       image->initrd_fd >= 0 && image->initrd_path
	                               ? json_object_new_string(image->initrd_path)
	                               : NULL);
	json_object_object_add(req, "initrd_sha256",
	                       *initrd_sha ? json_object_new_string(initrd_sha) : NULL);
	json_object_object_add(req, "cmdline", json_object_new_string(image->cmdline ?: ""));
	json_object_object_add(req, "panic",
	                       json_object_new_boolean(image->flags & KEXEC_IMAGE_PANIC));
	json_object_object_add(req, "memmap_dir",
	                       image->memmap_dir ? json_object_new_string(image->memmap_dir)
	                                         : NULL);
	json_object_object_add(req, "mode",
	                       json_object_new_string(handoff_mode_to_string(image->mode)));
	return record_append(root, req,
	                     image->flags & KEXEC_IMAGE_PANIC ? "crash_loaded" : "loaded", true);
}

static int record_unload(const char *root, unsigned flags) {
	json_object *req = json_object_new_object();

	if (!req)
		return -ENOMEM;
	json_object_object_add(req, "op", json_object_new_string("unload"));
	json_object_object_add(req, "panic", json_object_new_boolean(flags & KEXEC_IMAGE_PANIC));
	return record_append(root, req, flags & KEXEC_IMAGE_PANIC ? "crash_loaded" : "loaded",
	                     false);
}

static int record_is_loaded(const char *root, unsigned flags) {
	_cleanup_(json_object_putp) json_object *o = NULL;
	json_object *v;
	int r;

	r = record_read(root, &o);
	if (r < 0)
		return r;
	if (!json_object_object_get_ex(o, flags & KEXEC_IMAGE_PANIC ? "crash_loaded" : "loaded",
	                               &v))
		return 0;
	return json_object_get_boolean(v);
}

const KexecBackend kexec_backend_record = {
	.name = "record",
	.probe = record_probe,
	.load = record_load,
	.unload = record_unload,
	.is_loaded = record_is_loaded,
	.supported_modes =
	        HANDOFF_MODE_BIT(HANDOFF_MODE_VERIFIED) | HANDOFF_MODE_BIT(HANDOFF_MODE_FAST),
	.test_only = true,
};
