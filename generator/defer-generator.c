/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The boot after an update's handoff does what the VMs need first: the units named by
 * [Restore] DeferUntilRestored= wait for upgraded's restore. This generator arms that
 * for that one boot: drop-ins in systemd's generator directory (under /run) order every
 * named unit after a oneshot that waits for the daemon's release file.
 */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmdline.h"
#include "defer-generator.h"
#include "defer-units.h"
#include "fileio.h"
#include "loader.h"
#include "log.h"
#include "macros.h"
#include "path-util.h"
#include "policy.h"
#include "string-util.h"

#define CMDLINE_READ_MAX 4096

/* Where unit files live, highest priority first (systemd.unit(5), "Unit File Load Path"). */
static const char *const unit_dirs[] = {
	"/etc/systemd/system",     "/run/systemd/system", "/usr/local/lib/systemd/system",
	"/usr/lib/systemd/system", "/lib/systemd/system",
};

static const char wait_unit_text[] =
        "# Written by upgraded-defer-generator for this boot only: the boot after an\n"
        "# update's handoff. Units named by [Restore] DeferUntilRestored= wait for it.\n"
        "[Unit]\n"
        "Description=Hold back deferred units until upgraded restored the VMs\n"
        "Documentation=man:upgraded-defer-generator(8)\n"
        "DefaultDependencies=no\n"
        "Conflicts=shutdown.target\n"
        "Before=shutdown.target\n"
        "\n"
        "[Service]\n"
        "Type=oneshot\n"
        "RemainAfterExit=yes\n"
        "ExecStart=/bin/sh -c 'until [ -e " DEFER_RELEASE_FILE " ]; do sleep 0.5; done'\n"
        "TimeoutStartSec=" DEFER_WAIT_TIMEOUT "\n";

static const char dropin_text[] =
        "# Written by upgraded-defer-generator for this boot only: this unit starts once\n"
        "# upgraded restored the VMs ([Restore] DeferUntilRestored=).\n"
        "[Unit]\n"
        "Wants=" DEFER_WAIT_UNIT "\n"
        "After=" DEFER_WAIT_UNIT "\n";

bool defer_generator_armed(const char *cmdline) {
	return cmdline_has_word(cmdline, LOADER_HANDOFF_CMDLINE_MARK);
}

static bool has_glob(const char *s) {
	return strpbrk(s, "*?[") != NULL;
}

static int strv_add_unique(char ***l, const char *s) {
	for (char **i = *l; i && *i; i++)
		if (streq(*i, s))
			return 0;
	return strv_extend(l, s);
}

/* Adds every unit file name under root + dir that pattern matches. */
static int expand_in_dir(const char *root, const char *dir, const char *pattern, char ***l) {
	_cleanup_free_ char *path = NULL;
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (path_prefix_root(root, dir, &path) < 0)
		return -ENOMEM;
	d = opendir(path);
	if (!d)
		return 0; /* a directory this host does not have */
	while (r >= 0 && (de = readdir(d)))
		if (!has_glob(de->d_name) && policy_unit_pattern_valid(de->d_name) &&
		    fnmatch(pattern, de->d_name, FNM_PERIOD) == 0)
			r = strv_add_unique(l, de->d_name);
	closedir(d);
	return r;
}

static int compare_strings(const void *a, const void *b) {
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int defer_generator_expand(const char *root, char *const *patterns, char ***ret) {
	_cleanup_strv_free_ char **units = NULL;
	int r = 0;

	for (char *const *p = patterns; p && *p && r >= 0; p++) {
		if (!policy_unit_pattern_valid(*p)) {
			log_warning("Ignoring '%s': not a .timer, .service, .path or .socket unit "
			            "name or glob.",
			            *p);
			continue;
		}
		if (!has_glob(*p)) {
			r = strv_add_unique(&units, *p);
			continue;
		}
		for (size_t i = 0; i < ELEMENTSOF(unit_dirs) && r >= 0; i++)
			r = expand_in_dir(root, unit_dirs[i], *p, &units);
	}
	if (r < 0)
		return r;
	if (units)
		qsort(units, strv_length(units), sizeof(*units), compare_strings);
	*ret = TAKE_PTR(units);
	return 0;
}

static int write_text(const char *dir, const char *name, const char *text) {
	_cleanup_free_ char *path = NULL;
	int r;

	r = mkdir_p(dir, 0755);
	if (r < 0)
		return r;
	if (path_join(dir, name, &path) < 0)
		return -ENOMEM;
	return write_file_atomic(path, text, strlen(text), 0644);
}

int defer_generator_write(const char *outdir, char *const *units) {
	int r;

	if (!units || !*units)
		return 0;
	r = write_text(outdir, DEFER_WAIT_UNIT, wait_unit_text);
	if (r < 0)
		return r;
	for (char *const *u = units; *u; u++) {
		_cleanup_free_ char *dir = NULL;

		if (asprintf(&dir, "%s/%s.d", outdir, *u) < 0)
			return -ENOMEM;
		r = write_text(dir, DEFER_DROPIN_NAME, dropin_text);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Whether this boot is the one after a handoff and the restore is not over yet. */
static bool boot_needs_deferral(const char *root, const char *cmdline_path) {
	_cleanup_free_ char *path = NULL, *data = NULL, *released = NULL;

	if (cmdline_path)
		path = strdup(cmdline_path);
	else if (path_prefix_root(root, "/proc/cmdline", &path) < 0)
		path = NULL;
	if (!path || read_file_full(path, CMDLINE_READ_MAX, &data, NULL) < 0)
		return false;
	if (!defer_generator_armed(strstrip(data)))
		return false;
	if (path_prefix_root(root, DEFER_RELEASE_FILE, &released) < 0)
		return false;
	return access(released, F_OK) < 0;
}

int defer_generator_run(const char *root, const char *cmdline_path, const char *outdir) {
	_cleanup_(policy_freep) Policy *p = NULL;
	_cleanup_strv_free_ char **units = NULL;
	PolicyErrors errors = {};
	int r;

	if (!boot_needs_deferral(root, cmdline_path))
		return 0;
	r = policy_load(root, &p, &errors);
	if (r < 0) {
		policy_errors_print(&errors, stderr);
		policy_errors_done(&errors);
		log_warning("The configuration has errors: no unit is deferred on this boot.");
		return 0;
	}
	policy_errors_done(&errors);
	r = defer_generator_expand(root, p->defer_until_restored, &units);
	if (r < 0)
		return r;
	r = defer_generator_write(outdir, units);
	if (r < 0)
		return r;
	return (int)strv_length(units);
}
