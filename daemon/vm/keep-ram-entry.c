/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The keep-ram manifest entries, the generation mark on the kept RAM file, and the few facts
 * the libvirt hook needs from a domain XML. Shared by the daemon and upgraded-libvirt-hook.
 */

#include <dirent.h>
#include <grp.h>
#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

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
	*e = (KeepRamEntry){};
}

static bool value_ok(const char *s) {
	return s && *s && !string_has_cc(s);
}

static bool uuid_ok(const char *s) {
	if (strlen(s) != KEEP_RAM_UUID_LEN)
		return false;
	for (size_t i = 0; i < KEEP_RAM_UUID_LEN; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;
		if (dash ? s[i] != '-' : !strchr("0123456789abcdefABCDEF", s[i]))
			return false;
	}
	return true;
}

int keep_ram_entry_format(const KeepRamEntry *e, char **ret_text) {
	char *s;

	if (!uuid_ok(e->uuid) || !value_ok(e->name) || !value_ok(e->kept_path) ||
	    !value_ok(e->generation) || !value_ok(e->backing_dir) || !value_ok(e->qmp_socket) ||
	    !value_ok(e->save_image))
		return -EINVAL;
	if (asprintf(&s,
	             "uuid=%s\nname=%s\nkept=%s\nsize=%" PRIu64 "\ninode=%" PRIu64
	             "\ngeneration=%s\nbacking_dir=%s\nqmp_socket=%s\nsave_image=%s\n",
	             e->uuid, e->name, e->kept_path, e->size, e->inode, e->generation,
	             e->backing_dir, e->qmp_socket, e->save_image) < 0)
		return -ENOMEM;
	*ret_text = s;
	return 0;
}

/* Sets one field from "key=value"; unknown keys are ignored (a newer daemon may add some). */
static int entry_set(KeepRamEntry *e, const char *key, const char *value) {
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
	};
	unsigned long long u;

	if (streq(key, "uuid")) {
		if (!uuid_ok(value))
			return -EBADMSG;
		memcpy(e->uuid, value, KEEP_RAM_UUID_LEN + 1);
		return 0;
	}
	if (streq(key, "size") || streq(key, "inode")) {
		if (safe_atou64(value, &u) < 0)
			return -EBADMSG;
		*(streq(key, "size") ? &e->size : &e->inode) = u;
		return 0;
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
			r = entry_set(&e, line, eq + 1);
		}
	}
	if (r >= 0 && (!e.uuid[0] || !e.name || !e.kept_path || !e.generation || !e.backing_dir ||
	               !e.qmp_socket || !e.save_image || !e.size))
		r = -EBADMSG;
	if (r < 0) {
		keep_ram_entry_done(&e);
		return r;
	}
	*ret = e;
	return 0;
}

int keep_ram_entry_path(const char *state_dir, const char *uuid, char **ret_path) {
	if (!uuid_ok(uuid))
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

int keep_ram_mark_set(const char *path, const char *generation) {
	if (setxattr(path, KEEP_RAM_XATTR, generation, strlen(generation), 0) < 0)
		return errno == ENOTSUP ? -EOPNOTSUPP : -errno;
	return 0;
}

static int reason(char **ret_reason, int error, const char *fmt, ...) _printf_(3, 4);
static int reason(char **ret_reason, int error, const char *fmt, ...) {
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(ret_reason, fmt, ap) < 0)
		*ret_reason = NULL;
	va_end(ap);
	return error;
}

int keep_ram_entry_check_file(const KeepRamEntry *e, char **ret_reason) {
	char mark[KEEP_RAM_GENERATION_MAX + 1];
	struct stat st;
	ssize_t n;

	if (stat(e->kept_path, &st) < 0)
		return reason(ret_reason, -errno, "kept RAM file '%s' is missing: %s", e->kept_path,
		              strerror(errno));
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != e->size)
		return reason(ret_reason, -EFBIG,
		              "kept RAM file '%s' has %lld bytes, %" PRIu64 " were kept",
		              e->kept_path, (long long)st.st_size, e->size);
	if (e->inode && (uint64_t)st.st_ino != e->inode)
		return reason(ret_reason, -ESTALE,
		              "kept RAM file '%s' is inode %" PRIu64 ", the kept one was %" PRIu64,
		              e->kept_path, (uint64_t)st.st_ino, e->inode);
	n = getxattr(e->kept_path, KEEP_RAM_XATTR, mark, sizeof(mark) - 1);
	if (n < 0)
		return reason(ret_reason, errno == ENODATA ? -ENODATA : -errno,
		              "kept RAM file '%s' has no generation mark: %s", e->kept_path,
		              strerror(errno));
	mark[n] = 0;
	if (!streq(mark, e->generation))
		return reason(ret_reason, -ESTALE,
		              "kept RAM file '%s' carries generation '%s', expected '%s'",
		              e->kept_path, mark, e->generation);
	*ret_reason = NULL;
	return 0;
}

/* The one entry "<id>-*" of base: -ENOENT none, -EEXIST two (do not guess). */
static int domain_dir_in(const char *base, int id, char **ret_dir) {
	_cleanup_free_ char *found = NULL;
	char prefix[32];
	struct dirent *de;
	DIR *d;
	int r = -ENOENT;

	snprintf(prefix, sizeof(prefix), "%d-", id);
	d = opendir(base);
	if (!d)
		return -errno;
	while ((de = readdir(d)))
		if (strncmp(de->d_name, prefix, strlen(prefix)) == 0) {
			if (found) {
				r = -EEXIST;
				break;
			}
			if (asprintf(&found, "%s/%s", base, de->d_name) < 0) {
				r = -ENOMEM;
				break;
			}
			r = 0;
		}
	closedir(d);
	if (r < 0)
		return r;
	*ret_dir = TAKE_PTR(found);
	return 0;
}

int keep_ram_domain_dir(const char *backing_dir, int id, char **ret_dir) {
	_cleanup_free_ char *base = NULL;
	int r;

	if (id < 0)
		return -EINVAL;
	/* memory_backing_dir named in qemu.conf: libvirt appends libvirt/qemu to it. */
	if (asprintf(&base, "%s/libvirt/qemu", backing_dir) < 0)
		return -ENOMEM;
	r = domain_dir_in(base, id, ret_dir);
	if (r != -ENOENT)
		return r;
	/* Its built-in default (/var/lib/libvirt/qemu/ram) is used as it is. */
	return domain_dir_in(backing_dir, id, ret_dir);
}

int keep_ram_link_back(const char *kept_path, const char *ram_file) {
	_cleanup_free_ char *tmp = NULL;

	if (asprintf(&tmp, "%s.upgraded-link", ram_file) < 0)
		return -ENOMEM;
	(void)unlink(tmp);
	if (link(kept_path, tmp) < 0)
		return -errno;
	if (rename(tmp, ram_file) < 0) {
		int k = -errno;
		(void)unlink(tmp);
		return k;
	}
	return 0;
}

/* The value of attribute attr inside the tag starting at tag (up to its '>'), quoted with
 * ' or ". NULL when absent. */
static char *tag_attr(const char *tag, const char *attr) {
	const char *end = strchr(tag, '>'), *p = tag;
	size_t len = strlen(attr);

	while (end && (p = strstr(p, attr)) && p < end) {
		const char *v = p + len;
		if (p[-1] == ' ' && *v == '=' && (v[1] == '\'' || v[1] == '"')) {
			const char *close = strchr(v + 2, v[1]);
			return close && close < end ? strndup(v + 2, (size_t)(close - v - 2))
			                            : NULL;
		}
		p = v;
	}
	return NULL;
}

int keep_ram_xml_facts(const char *xml, char ret_uuid[static KEEP_RAM_UUID_LEN + 1], int *ret_id) {
	_cleanup_free_ char *id = NULL;
	const char *dom, *u;
	unsigned long long v;

	dom = strstr(xml, "<domain ");
	u = strstr(xml, "<uuid>");
	if (!dom || !u)
		return -EBADMSG;
	u += strlen("<uuid>");
	if (strlen(u) < KEEP_RAM_UUID_LEN + strlen("</uuid>") ||
	    strncmp(u + KEEP_RAM_UUID_LEN, "</uuid>", strlen("</uuid>")) != 0)
		return -EBADMSG;
	memcpy(ret_uuid, u, KEEP_RAM_UUID_LEN);
	ret_uuid[KEEP_RAM_UUID_LEN] = 0;
	if (!uuid_ok(ret_uuid))
		return -EBADMSG;
	id = tag_attr(dom, "id");
	*ret_id = id && safe_atou64(id, &v) >= 0 && v < INT32_MAX ? (int)v : -1;
	return 0;
}

int keep_ram_hook_start(const char *state_dir, const char *xml, KeepRamEntry *ret, char **ret_msg) {
	_cleanup_free_ char *dir = NULL, *ram = NULL, *why = NULL;
	char uuid[KEEP_RAM_UUID_LEN + 1];
	KeepRamEntry e = {};
	struct stat st;
	int id, k;

	*ret_msg = NULL;
	if (keep_ram_xml_facts(xml, uuid, &id) < 0)
		return reason(ret_msg, 0, "cannot read the domain XML, ignoring");
	k = keep_ram_entry_read(state_dir, uuid, &e);
	if (k == -ENOENT)
		return 0;
	if (k < 0)
		return reason(ret_msg, k, "keep-ram entry of %s is unreadable (%s): refusing", uuid,
		              strerror(-k));
	if (stat(e.save_image, &st) < 0) {
		/* Not a restore (no managed save image): a fresh boot does not need the RAM. */
		k = reason(ret_msg, 0,
		           "'%s' starts without its managed save image, kept RAM '%s' "
		           "not used",
		           e.name, e.kept_path);
		keep_ram_entry_done(&e);
		return k;
	}
	k = keep_ram_entry_check_file(&e, &why);
	if (k < 0)
		k = reason(ret_msg, k, "refusing to start '%s' from its managed save: %s", e.name,
		           strna(why));
	else {
		k = keep_ram_domain_dir(e.backing_dir, id, &dir);
		if (k >= 0 && asprintf(&ram, "%s/pc.ram", dir) < 0)
			k = -ENOMEM;
		if (k >= 0)
			k = keep_ram_link_back(e.kept_path, ram);
		if (k < 0)
			k = reason(ret_msg, k,
			           "refusing to start '%s': cannot link its kept RAM into "
			           "%s/[libvirt/qemu/]%d-*: %s",
			           e.name, e.backing_dir, id, strerror(-k));
	}
	if (k < 0) {
		keep_ram_entry_done(&e);
		return k;
	}
	*ret = e;
	return 1;
}

int keep_ram_xml_qmp_socket(const char *xml, char **ret_path) {
	static const char key[] = "socket,id=" KEEP_RAM_QMP_CHARDEV_ID ",path=";
	const char *p = strstr(xml, key), *end;

	if (!p)
		return -ENOENT;
	p += strlen(key);
	end = p + strcspn(p, ",'\"<");
	if (*end != ',' || end == p)
		return -EBADMSG;
	*ret_path = strndup(p, (size_t)(end - p));
	return *ret_path ? 0 : -ENOMEM;
}

int keep_ram_qmp_socket_path(const char *root, const char *uuid, char **ret_path) {
	return asprintf(ret_path, "%s%s/%s/qmp", strempty(root), KEEP_RAM_RUN_DIR, uuid) < 0
	               ? -ENOMEM
	               : 0;
}

/* "+N" or a name, as libvirt writes either half of a DAC label. */
static int dac_id(const char *s, size_t len, bool group, unsigned *ret) {
	_cleanup_free_ char *w = strndup(s, len);
	unsigned long long v;

	if (!w || len == 0)
		return w ? -EBADMSG : -ENOMEM;
	if (w[0] == '+') {
		if (safe_atou64(w + 1, &v) < 0 || v >= UINT32_MAX)
			return -EBADMSG;
		*ret = (unsigned)v;
		return 0;
	}
	if (group) {
		struct group *g = getgrnam(w);

		if (!g)
			return -EBADMSG;
		*ret = g->gr_gid;
	} else {
		struct passwd *pw = getpwnam(w);

		if (!pw)
			return -EBADMSG;
		*ret = pw->pw_uid;
	}
	return 0;
}

int keep_ram_xml_dac_owner(const char *xml, uid_t *ret_uid, gid_t *ret_gid) {
	const char *p = xml, *end, *label, *colon, *stop;
	unsigned uid, gid;

	for (;;) {
		p = strstr(p, "<seclabel ");
		if (!p)
			return -ENOENT;
		end = strstr(p, "</seclabel>");
		if (!end)
			return -ENOENT;
		stop = strchr(p, '>');
		if (stop && stop < end &&
		    (memmem(p, (size_t)(stop - p), "model='dac'", 11) ||
		     memmem(p, (size_t)(stop - p), "model=\"dac\"", 11)))
			break;
		p = end;
	}
	label = memmem(p, (size_t)(end - p), "<label>", 7);
	if (!label)
		return -ENOENT;
	label += 7;
	stop = memmem(label, (size_t)(end - label), "</label>", 8);
	colon = stop ? memchr(label, ':', (size_t)(stop - label)) : NULL;
	if (!colon || dac_id(label, (size_t)(colon - label), false, &uid) < 0 ||
	    dac_id(colon + 1, (size_t)(stop - colon - 1), true, &gid) < 0)
		return -EBADMSG;
	*ret_uid = (uid_t)uid;
	*ret_gid = (gid_t)gid;
	return 0;
}
