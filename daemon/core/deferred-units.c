/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Releases the units upgraded-defer-generator held back for the VM restore: the daemon
 * creates the release file the generator's waiter polls. It also finds, for the report,
 * which units were held back: the drop-ins are the truth of what this boot did.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "defer-units.h"
#include "deferred-units.h"
#include "fileio.h"
#include "macros.h"
#include "path-util.h"
#include "string-util.h"

static int compare_names(const void *a, const void *b) {
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether dir/name is "UNIT.d" holding the generator's drop-in; *ret_unit: UNIT. */
static int dropin_unit(const char *dir, const char *name, char **ret_unit) {
	_cleanup_free_ char *p = NULL;
	size_t n = strlen(name);

	if (n <= 2 || !streq(name + n - 2, ".d"))
		return 0;
	if (asprintf(&p, "%s/%s/%s", dir, name, DEFER_DROPIN_NAME) < 0)
		return -ENOMEM;
	if (access(p, F_OK) < 0)
		return 0;
	*ret_unit = strndup(name, n - 2);
	return *ret_unit ? 1 : -ENOMEM;
}

int deferred_units_list(const char *root, json_object **ret) {
	_cleanup_free_ char *dir = NULL;
	_cleanup_strv_free_ char **units = NULL;
	json_object *a;
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (path_prefix_root(root, DEFER_GENERATOR_DIR, &dir) < 0)
		return -ENOMEM;
	d = opendir(dir);
	while (d && r >= 0 && (de = readdir(d))) {
		char *unit = NULL;

		r = dropin_unit(dir, de->d_name, &unit);
		if (r > 0) {
			r = strv_extend(&units, unit);
			free(unit);
		}
	}
	if (d)
		closedir(d);
	if (r < 0)
		return r;
	if (units)
		qsort(units, strv_length(units), sizeof(*units), compare_names);
	a = json_object_new_array();
	if (!a)
		return -ENOMEM;
	STRV_FOREACH (u, units)
		if (json_object_array_add(a, json_object_new_string(*u)) < 0) {
			json_object_put(a);
			return -ENOMEM;
		}
	*ret = a;
	return 0;
}

int deferred_units_release(const char *root) {
	_cleanup_free_ char *path = NULL, *dir = NULL;
	int fd, r;

	if (path_prefix_root(root, DEFER_RELEASE_FILE, &path) < 0 ||
	    path_prefix_root(root, "/run/upgraded", &dir) < 0)
		return -ENOMEM;
	r = mkdir_p(dir, 0755);
	if (r < 0)
		return r;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0644);
	if (fd < 0)
		return errno == EEXIST ? 0 : -errno;
	close(fd);
	return 1;
}
