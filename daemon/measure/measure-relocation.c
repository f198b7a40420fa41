/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The report's purgatory.relocation (docs/measurement.md, "The relocation slice"):
 * the old kernel's shutdown dump is looked for where pstore leaves it on the new
 * kernel, /sys/fs/pstore, or /var/lib/systemd/pstore once systemd-pstore moved it,
 * and the slice from its "Starting new kernel" line to purgatory's entry stamp is
 * computed by relocation.c.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fileio.h"
#include "macros.h"
#include "measure-internal.h"
#include "path-util.h"
#include "relocation.h"
#include "string-util.h"

#define PSTORE_RECORD_MAX  (1u << 20) /* bytes of one dmesg record read */
#define PSTORE_ENTRIES_MAX 256u       /* directory entries looked at, over all */

static const char *const pstore_dirs[] = { "/sys/fs/pstore", "/var/lib/systemd/pstore" };

static bool is_dmesg_record(const char *name) {
	return strncmp(name, "dmesg-", strlen("dmesg-")) == 0 || streq(name, "dmesg.txt");
}

static int find_in_dir(const char *dir, int depth, const char *update_id, unsigned *budget,
                       RelocationLog *ret, char **ret_path);

/* One entry of find_in_dir(): 0 when it is (or holds) the record, -ENOENT when not. */
static int find_in_entry(const char *dir, const char *name, int depth, const char *update_id,
                         unsigned *budget, RelocationLog *ret, char **ret_path) {
	_cleanup_free_ char *p = NULL, *data = NULL;
	struct stat st;
	size_t size;

	if (path_join(dir, name, &p) < 0)
		return -ENOMEM;
	if (lstat(p, &st) < 0)
		return -ENOENT;
	if (S_ISDIR(st.st_mode))
		return depth > 0 ? find_in_dir(p, depth - 1, update_id, budget, ret, ret_path)
		                 : -ENOENT;
	/* Only regular files: a FIFO would block the read. */
	if (!S_ISREG(st.st_mode) || !is_dmesg_record(name) ||
	    read_file_full(p, PSTORE_RECORD_MAX, &data, &size) < 0 ||
	    relocation_log_parse(data, size, update_id, ret) < 0)
		return -ENOENT;
	*ret_path = TAKE_PTR(p);
	return 0;
}

/*
 * Looks in dir (a real path), and depth levels of sub-directories (where
 * systemd-pstore groups a record's parts), for a dmesg record with update_id's mark.
 * *budget counts the entries left to look at. 0 and *ret_path (malloc'd) when found.
 */
static int find_in_dir(const char *dir, int depth, const char *update_id, unsigned *budget,
                       RelocationLog *ret, char **ret_path) {
	DIR *d = opendir(dir);
	struct dirent *de;
	int r = -ENOENT;

	if (!d)
		return -errno;
	while (r == -ENOENT && *budget > 0 && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		(*budget)--;
		r = find_in_entry(dir, de->d_name, depth, update_id, budget, ret, ret_path);
		if (r < 0 && r != -ENOMEM)
			r = -ENOENT;
	}
	closedir(d);
	return r;
}

/* The dump of the old kernel's shutdown that carries update_id's mark, in root. */
static int find_shutdown_dump(const char *root, const char *update_id, RelocationLog *ret,
                              char **ret_source) {
	unsigned budget = PSTORE_ENTRIES_MAX;

	for (size_t i = 0; i < ELEMENTSOF(pstore_dirs); i++) {
		_cleanup_free_ char *dir = NULL, *path = NULL;

		if (path_prefix_root(root, pstore_dirs[i], &dir) < 0)
			return -ENOMEM;
		if (find_in_dir(dir, i == 0 ? 0 : 1, update_id, &budget, ret, &path) == 0) {
			/* The path as the host names it, not below a test root. */
			*ret_source = strdup(path + strlen(dir) - strlen(pstore_dirs[i]));
			return *ret_source ? 0 : -ENOMEM;
		}
	}
	return -ENOENT;
}

static int64_t phase_i64(json_object *p, const char *key) {
	return json_object_get_int64(measure_get_obj(p, key));
}

/* a[idx] = p, the elements from idx on one place later (json-c 0.16 has no insert). */
static int array_insert(json_object *a, size_t idx, json_object *p) {
	size_t n = json_object_array_length(a);

	if (json_object_array_add(a, NULL) < 0)
		return -ENOMEM;
	for (size_t i = n; i > idx; i--)
		json_object_array_put_idx(a, i,
		                          json_object_get(json_object_array_get_idx(a, i - 1)));
	return json_object_array_put_idx(a, idx, p) < 0 ? -ENOMEM : 0;
}

/*
 * The blackout's breakdown: the stamp-bounded "shutdown" phase (reboot request ->
 * purgatory's entry) split where "Starting new kernel" was, the rest a "relocation"
 * phase of r->ns. Only for a measured slice on trusted stamps: estimated figures do
 * not bound phases.
 */
static void split_shutdown(json_object *phases, const Relocation *r) {
	for (size_t i = 0; phases && i < json_object_array_length(phases); i++) {
		json_object *p = json_object_array_get_idx(phases, i), *rel;
		int64_t start, end;

		if (!streq_ptr(json_object_get_string(measure_get_obj(p, "name")), "shutdown"))
			continue;
		start = phase_i64(p, "start_ns");
		end = phase_i64(p, "end_ns");
		if (r->ns <= 0 || r->ns > end - start)
			return;
		rel = json_object_new_object();
		if (!rel)
			return;
		json_object_object_add(rel, "name", json_object_new_string("relocation"));
		json_object_object_add(rel, "start_ns", json_object_new_int64(end - r->ns));
		json_object_object_add(rel, "end_ns", json_object_new_int64(end));
		json_object_object_add(rel, "duration_ns", json_object_new_int64(r->ns));
		json_object_object_add(rel, "kernel", json_object_new_string("handoff"));
		json_object_object_add(rel, "estimated", json_object_new_boolean(true));
		if (array_insert(phases, i + 1, rel) < 0) {
			json_object_put(rel);
			return;
		}
		json_object_object_add(p, "end_ns", json_object_new_int64(end - r->ns));
		json_object_object_add(p, "duration_ns",
		                       json_object_new_int64(end - r->ns - start));
		return;
	}
}

void measure_report_relocation(Measure *m, const Update *u, const TimebaseInput *in,
                               json_object *report, json_object *phases, json_object *missing) {
	json_object *purg = measure_get_obj(report, "purgatory"), *rec, *written, *j = NULL;
	_cleanup_free_ char *source = NULL;
	TimebaseSample request = {};
	RelocationLog log = {};
	Relocation r = {};
	const char *why = NULL;

	if (!purg)
		return;
	rec = u->measure;
	written = measure_get_obj(rec, "request_mark_written_ns");
	if (in->stamps.entry == 0) {
		measure_add_missing(missing, "relocation", "%s",
		                    "no purgatory entry stamp (the kernel's own purgatory, e.g. "
		                    "kexec_file_load, stamps nothing)");
		return;
	}
	if (!measure_sample_from_json(measure_get_obj(rec, "request_sample"), &request) ||
	    !written || !json_object_is_type(written, json_type_int)) {
		measure_add_missing(missing, "relocation", "%s",
		                    "the handoff record has no reboot-request mark");
		return;
	}
	if (find_shutdown_dump(m->root, u->id, &log, &source) < 0) {
		measure_add_missing(missing, "relocation", "%s",
		                    "no shutdown dump of the old kernel with this update's mark in "
		                    "pstore (a ramoops area and ramoops.max_reason=4 on both "
		                    "kernels: docs/measurement.md)");
		return;
	}
	if (relocation_compute(&log, &request, json_object_get_uint64(written), in, &r, &why) < 0) {
		measure_add_missing(missing, "relocation", "%s", why);
		return;
	}
	if (relocation_to_json(&r, source, why, &j) >= 0)
		json_object_object_add(purg, "relocation", j);
	if (!r.estimated)
		split_shutdown(phases, &r);
}
