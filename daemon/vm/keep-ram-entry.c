/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The keep-ram manifest entries (keep-ram-entry.h), shared by the daemon and
 * upgraded-libvirt-hook: their text form, and reading and writing them in root's state
 * directory.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keep-ram-entry.h"
#include "fileio.h"
#include "macros.h"
#include "string-util.h"

void keep_ram_entry_done(KeepRamEntry *e) {
	if (!e)
		return;
	free(e->name);
	free(e->kept_path);
	free(e->generation);
	free(e->backing_dir);
	free(e->qmp_socket);
	free(e->save_image);
	free(e->digest_mode);
	free(e->digest);
	free(e->verified);
	*e = (KeepRamEntry){};
}

static bool value_ok(const char *s) {
	return s && *s && !string_has_cc(s);
}

/* An optional value: absent, or like any other. */
static bool optional_ok(const char *s) {
	return !s || value_ok(s);
}

int keep_ram_entry_format(const KeepRamEntry *e, char **ret_text) {
	char *s;

	if (!keep_ram_uuid_ok(e->uuid) || !value_ok(e->name) || !value_ok(e->kept_path) ||
	    !value_ok(e->generation) || !value_ok(e->backing_dir) || !value_ok(e->qmp_socket) ||
	    !value_ok(e->save_image) || !optional_ok(e->digest_mode) || !optional_ok(e->digest) ||
	    !optional_ok(e->verified) || !!e->digest_mode != !!e->digest)
		return -EINVAL;
	if (asprintf(&s,
	             "uuid=%s\nname=%s\nkept=%s\nsize=%" PRIu64 "\ninode=%" PRIu64
	             "\ngeneration=%s\nbacking_dir=%s\nqmp_socket=%s\nsave_image=%s\n"
	             "owner=%u:%u:%o\nkeep_dir=%" PRIu64 ":%" PRIu64 "\n%s%s%s%s%s%s%s%s%s",
	             e->uuid, e->name, e->kept_path, e->size, e->inode, e->generation,
	             e->backing_dir, e->qmp_socket, e->save_image, (unsigned)e->owner_uid,
	             (unsigned)e->owner_gid, (unsigned)(e->owner_mode & 07777), e->keep_dir_dev,
	             e->keep_dir_inode, e->digest_mode ? "digest_mode=" : "",
	             strempty(e->digest_mode), e->digest_mode ? "\n" : "",
	             e->digest ? "digest=" : "", strempty(e->digest), e->digest ? "\n" : "",
	             e->verified ? "verified=" : "", strempty(e->verified),
	             e->verified ? "\n" : "") < 0)
		return -ENOMEM;
	*ret_text = s;
	return 0;
}

/* "A:B[:C]" of unsigned numbers (C in octal): owner=UID:GID:MODE, keep_dir=DEV:INO. */
static int parse_numbers(const char *value, unsigned long long *ret, size_t n, bool last_octal) {
	_cleanup_free_ char *copy = strdup(value);
	char *save = NULL, *p = copy;

	if (!copy)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++, p = NULL) {
		char *w = strtok_r(p, ":", &save), *end;

		if (!w)
			return -EBADMSG;
		if (i == n - 1 && last_octal) {
			if (!*w || strspn(w, "01234567") != strlen(w))
				return -EBADMSG;
			ret[i] = strtoull(w, &end, 8);
			if (ret[i] > 07777)
				return -EBADMSG;
		} else if (safe_atou64(w, &ret[i]) < 0)
			return -EBADMSG;
	}
	return strtok_r(NULL, ":", &save) ? -EBADMSG : 0;
}

static int entry_set_numbers(KeepRamEntry *e, const char *key, const char *value) {
	unsigned long long v[3];

	if (streq(key, "size") || streq(key, "inode")) {
		if (safe_atou64(value, &v[0]) < 0)
			return -EBADMSG;
		*(streq(key, "size") ? &e->size : &e->inode) = v[0];
	} else if (streq(key, "owner")) {
		if (parse_numbers(value, v, 3, true) < 0 || v[0] >= UINT32_MAX ||
		    v[1] >= UINT32_MAX)
			return -EBADMSG;
		e->owner_uid = (uid_t)v[0];
		e->owner_gid = (gid_t)v[1];
		e->owner_mode = (mode_t)v[2];
	} else {
		if (parse_numbers(value, v, 2, false) < 0)
			return -EBADMSG;
		e->keep_dir_dev = v[0];
		e->keep_dir_inode = v[1];
	}
	return 0;
}

/* Sets one field from "key=value"; unknown keys are ignored (a newer daemon may add some). */
static int entry_set(KeepRamEntry *e, const char *key, const char *value, unsigned *seen) {
	struct {
		const char *key;
		char **field;
	} strings[] = {
		{ "name", &e->name },
		{ "kept", &e->kept_path },
		{ "generation", &e->generation },
		{ "backing_dir", &e->backing_dir },
		{ "qmp_socket", &e->qmp_socket },
		{ "save_image", &e->save_image },
		{ "digest_mode", &e->digest_mode },
		{ "digest", &e->digest },
		{ "verified", &e->verified },
	};
	static const char *const numbers[] = { "size", "inode", "owner", "keep_dir" };

	if (streq(key, "uuid")) {
		if (!keep_ram_uuid_ok(value) || e->uuid[0])
			return -EBADMSG;
		memcpy(e->uuid, value, KEEP_RAM_UUID_LEN + 1);
		return 0;
	}
	for (size_t i = 0; i < ELEMENTSOF(numbers); i++)
		if (streq(key, numbers[i])) {
			if (*seen & (1U << i))
				return -EBADMSG;
			*seen |= 1U << i;
			return entry_set_numbers(e, key, value);
		}
	for (size_t i = 0; i < ELEMENTSOF(strings); i++)
		if (streq(key, strings[i].key)) {
			if (!*value || *strings[i].field)
				return -EBADMSG;
			*strings[i].field = strdup(value);
			return *strings[i].field ? 0 : -ENOMEM;
		}
	return 0;
}

int keep_ram_entry_parse(const char *text, KeepRamEntry *ret) {
	_cleanup_free_ char *copy = strdup(text ?: "");
	KeepRamEntry e = {};
	char *line, *save = NULL;
	unsigned seen = 0;
	int r = 0;

	if (!copy)
		return -ENOMEM;
	for (line = strtok_r(copy, "\n", &save); line && r >= 0;
	     line = strtok_r(NULL, "\n", &save)) {
		char *eq = strchr(line, '=');

		if (!eq)
			r = -EBADMSG;
		else {
			*eq = 0;
			r = entry_set(&e, line, eq + 1, &seen);
		}
	}
	/* All four numbers, every path, and a digest only with its mode. */
	if (r >= 0 && (!e.uuid[0] || !e.name || !e.kept_path || !e.generation || !e.backing_dir ||
	               !e.qmp_socket || !e.save_image || !e.size || seen != 0xf ||
	               !!e.digest_mode != !!e.digest))
		r = -EBADMSG;
	if (r < 0) {
		keep_ram_entry_done(&e);
		return r;
	}
	*ret = e;
	return 0;
}

int keep_ram_entry_path(const char *state_dir, const char *uuid, char **ret_path) {
	if (!keep_ram_uuid_ok(uuid))
		return -EINVAL;
	return asprintf(ret_path, "%s/%s.entry", state_dir, uuid) < 0 ? -ENOMEM : 0;
}

int keep_ram_entry_write(const char *state_dir, const KeepRamEntry *e) {
	_cleanup_free_ char *path = NULL, *text = NULL;
	int r;

	r = keep_ram_entry_format(e, &text);
	if (r < 0)
		return r;
	r = keep_ram_entry_path(state_dir, e->uuid, &path);
	if (r < 0)
		return r;
	r = mkdir_p(state_dir, 0700);
	if (r < 0)
		return r;
	return write_file_atomic(path, text, strlen(text), 0600);
}

int keep_ram_entry_read(const char *state_dir, const char *uuid, KeepRamEntry *ret) {
	_cleanup_free_ char *path = NULL, *text = NULL;
	KeepRamEntry e;
	int r;

	r = keep_ram_entry_path(state_dir, uuid, &path);
	if (r < 0)
		return r;
	r = read_file_full(path, KEEP_RAM_ENTRY_MAX_SIZE, &text, NULL);
	if (r < 0)
		return r;
	r = keep_ram_entry_parse(text, &e);
	if (r < 0)
		return r;
	if (!streq(e.uuid, uuid)) {
		keep_ram_entry_done(&e);
		return -EBADMSG;
	}
	*ret = e;
	return 0;
}

int keep_ram_entry_remove(const char *state_dir, const char *uuid) {
	_cleanup_free_ char *path = NULL;
	int r = keep_ram_entry_path(state_dir, uuid, &path);

	if (r < 0)
		return r;
	return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
}

int keep_ram_qmp_socket_path(const char *root, const char *uuid, char **ret_path) {
	if (!keep_ram_uuid_ok(uuid))
		return -EINVAL;
	return asprintf(ret_path, "%s%s/%s/qmp", strempty(root), KEEP_RAM_RUN_DIR, uuid) < 0
	               ? -ENOMEM
	               : 0;
}

int keep_ram_qmp_chardev_arg(const char *root, const char *uuid, char **ret_arg) {
	_cleanup_free_ char *sock = NULL;
	int r = keep_ram_qmp_socket_path(root, uuid, &sock);

	if (r < 0)
		return r;
	return asprintf(ret_arg, "socket,id=" KEEP_RAM_QMP_CHARDEV_ID ",path=%s,server=on,wait=on",
	                sock) < 0
	               ? -ENOMEM
	               : 0;
}
