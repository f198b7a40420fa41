/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Configuration: upgraded.conf and its drop-ins, parsed with libinih. Every
 * problem is collected with its file:line, and any problem fails the load.
 * The files, by concern:
 *   policy-config.c    the Policy's defaults, the error list, loading the files
 *   policy-reader.c    the lines handed to libinih, policy_parse_buffer()
 *   policy-settings.c  the sections and keys and what each one sets
 *   policy-values.c    the value parsers (sizes, windows, taint letters, booleans)
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "fileio.h"
#include "path-util.h"
#include "policy-config-internal.h"
#include "policy-internal.h"
#include "string-util.h"

static const char *const default_allowed_roots[] = { "/boot", "/var/lib/upgraded/images" };
/* Debian 12's periodic housekeeping: timers are cheap to hold back and nothing
 * on the boot's path waits for them (docs/policy.md, "Deferred units"). */
static const char *const default_deferred[] = {
	"apt-daily.timer", "apt-daily-upgrade.timer", "dpkg-db-backup.timer", "e2scrub_all.timer",
	"fstrim.timer",    "logrotate.timer",         "man-db.timer",
};

/* ---------- constructors and destructors ---------- */

void policy_rule_done(PolicyVmRule *r) {
	free(r->name);
	strv_free(r->name_globs);
	strv_free(r->metadata);
	free(r->file);
}

void policy_origins_free(struct PolicyOrigins *o) {
	if (!o)
		return;
	for (size_t i = 0; i < o->n; i++) {
		free(o->items[i].section);
		free(o->items[i].key);
		free(o->items[i].where);
	}
	free(o->items);
	strv_free(o->files);
	free(o);
}

void policy_free(Policy *p) {
	if (!p)
		return;
	policy_origins_free(p->origins);
	strv_free(p->allowed_roots);
	strv_free(p->defer_until_restored);
	free(p->checkpoint_dir);
	free(p->memory_backing_dir);
	free(p->metrics_dir);
	for (size_t i = 0; i < p->n_rules; i++)
		policy_rule_done(&p->rules[i]);
	free(p->rules);
	free(p);
}

static int set_default_roots(Policy *p) {
	strv_free(p->allowed_roots);
	p->allowed_roots = NULL;
	for (size_t i = 0; i < ELEMENTSOF(default_allowed_roots); i++)
		if (strv_extend(&p->allowed_roots, default_allowed_roots[i]) < 0)
			return -ENOMEM;
	return 0;
}

int policy_new_default(Policy **ret) {
	_cleanup_(policy_freep) Policy *p = NULL;

	if (!ret)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->mode = POLICY_HANDOFF_MODE_AUTO;
	p->allow_fast = false;
	p->allow_taint = 0;
	p->shutdown = SHUTDOWN_MODE_ORDERLY;
	p->kdump_initrd_at_boot = false;
	if (set_default_roots(p) < 0)
		return -ENOMEM;
	p->window = (PolicyWindow){};
	p->max_vms = UINT64_MAX;
	p->max_vm_memory = UINT64_MAX;
	p->checkpoint_dir = strdup(DEFAULT_CHECKPOINT_DIR);
	p->metrics_dir = strdup(DEFAULT_METRICS_DIR);
	if (!p->checkpoint_dir || !p->metrics_dir)
		return -ENOMEM;
	p->margin_is_percent = true;
	p->free_space_margin = DEFAULT_MARGIN_PERCENT;
	p->default_strategy = POLICY_VM_CHECKPOINT;
	p->shutdown_timeout_usec = DEFAULT_SHUTDOWN_TIMEOUT * 1000000ULL;
	p->pause_timeout_usec = DEFAULT_PAUSE_TIMEOUT * 1000000ULL;
	p->save_parallel = DEFAULT_SAVE_PARALLEL;
	p->keep_ram_digest = POLICY_KEEP_RAM_DIGEST_MARK;
	p->keep_ram_fallback = true;
	p->sync_guest_clock = true;
	p->keep_reports = POLICY_KEEP_REPORTS_DEFAULT;
	for (size_t i = 0; i < ELEMENTSOF(default_deferred); i++)
		if (strv_extend(&p->defer_until_restored, default_deferred[i]) < 0)
			return -ENOMEM;
	*ret = TAKE_PTR(p);
	return 0;
}

void policy_errors_done(PolicyErrors *e) {
	if (!e)
		return;
	for (size_t i = 0; i < e->n; i++) {
		free(e->items[i].file);
		free(e->items[i].message);
	}
	free(e->items);
	*e = (PolicyErrors){};
}

int policy_errors_addv(PolicyErrors *e, const char *file, unsigned line, const char *fmt,
                       va_list ap) {
	_cleanup_free_ char *f = NULL, *m = NULL, *raw = NULL;
	PolicyError *n;

	if (!e)
		return 0;
	/* The file's bytes (a key, a value, a name) are quoted escaped: an error is text that
	 * goes to a terminal and into a D-Bus reply, which must be valid UTF-8. */
	f = string_escape(file);
	if (!f)
		return -ENOMEM;
	if (vasprintf(&raw, fmt, ap) < 0) {
		raw = NULL;
		return -ENOMEM;
	}
	m = string_escape(raw);
	if (!m)
		return -ENOMEM;
	n = realloc(e->items, sizeof(*n) * (e->n + 1));
	if (!n)
		return -ENOMEM;
	e->items = n;
	e->items[e->n++] =
	        (PolicyError){ .file = TAKE_PTR(f), .line = line, .message = TAKE_PTR(m) };
	return 0;
}

int policy_errors_add(PolicyErrors *e, const char *file, unsigned line, const char *fmt, ...) {
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = policy_errors_addv(e, file, line, fmt, ap);
	va_end(ap);
	return r;
}

void policy_errors_print(const PolicyErrors *e, FILE *out) {
	for (size_t i = 0; e && i < e->n; i++) {
		if (e->items[i].file[0] == '\0')
			fprintf(out, "%s\n", e->items[i].message);
		else if (e->items[i].line > 0)
			fprintf(out, "%s:%u: %s\n", e->items[i].file, e->items[i].line,
			        e->items[i].message);
		else
			fprintf(out, "%s: %s\n", e->items[i].file, e->items[i].message);
	}
}

static struct PolicyOrigins *origins_get(Policy *p) {
	if (!p->origins)
		p->origins = calloc(1, sizeof(*p->origins));
	return p->origins;
}

static PolicyOrigin *origin_find(const Policy *p, const char *section, const char *key) {
	for (size_t i = 0; p->origins && i < p->origins->n; i++)
		if (streq(p->origins->items[i].section, section) &&
		    streq(p->origins->items[i].key, key))
			return &p->origins->items[i];
	return NULL;
}

int policy_origin_note(Policy *p, const char *section, const char *key, const char *file,
                       unsigned line, bool append) {
	struct PolicyOrigins *o = origins_get(p);
	PolicyOrigin *e = origin_find(p, section, key), *n;
	bool rule = strncmp(section, "VMRule:", 7) == 0;
	char *where = NULL;

	if (!o)
		return -ENOMEM;
	if (append && (e || !rule)) {
		/* appended to the defaults, or to what earlier lines set */
		if (asprintf(&where, "%s, %s:%u", e ? e->where : "default", file, line) < 0)
			return -ENOMEM;
	} else if (asprintf(&where, "%s:%u", file, line) < 0)
		return -ENOMEM;
	if (e) {
		free(e->where);
		e->where = where;
		return 0;
	}
	n = realloc(o->items, sizeof(*n) * (o->n + 1));
	if (!n) {
		free(where);
		return -ENOMEM;
	}
	o->items = n;
	n[o->n] = (PolicyOrigin){ .section = strdup(section), .key = strdup(key), .where = where };
	if (!n[o->n].section || !n[o->n].key) {
		free(n[o->n].section);
		free(n[o->n].key);
		free(where);
		return -ENOMEM;
	}
	o->n++;
	return 0;
}

const char *policy_origin(const Policy *p, const char *section, const char *key) {
	const PolicyOrigin *e;

	if (!p || !section || !key)
		return NULL;
	e = origin_find(p, section, key);
	return e ? e->where : "default";
}

int policy_finish(Policy *p, PolicyErrors *errors) {
	PolicyErrors local = {};
	PolicyErrors *e = errors ?: &local;
	size_t before = e->n;
	int r = 0;

	if (!p)
		return -EINVAL;
	for (size_t i = 0; i < p->n_rules && r >= 0; i++) {
		const PolicyVmRule *rule = &p->rules[i];

		if (!rule->have_strategy)
			r = policy_errors_add(e, rule->file, rule->line,
			                      "[VMRule:%s] has no Strategy=", rule->name);
		if (r >= 0 && !rule->name_globs && !rule->metadata &&
		    rule->memory_above == UINT64_MAX && rule->memory_below == UINT64_MAX)
			r = policy_errors_add(
			        e, rule->file, rule->line,
			        "[VMRule:%s] has no Name=, Metadata=, MemoryAbove= or "
			        "MemoryBelow= condition (use [VM] DefaultStrategy=)",
			        rule->name);
		if (r >= 0 && rule->memory_above != UINT64_MAX &&
		    rule->memory_below != UINT64_MAX && rule->memory_above >= rule->memory_below)
			r = policy_errors_add(
			        e, rule->file, rule->line,
			        "[VMRule:%s] can never match: MemoryAbove= is not below "
			        "MemoryBelow=",
			        rule->name);
	}
	if (r >= 0 && !p->allowed_roots)
		r = policy_errors_add(e, "", 0,
		                      "[Paths] AllowedRoots= is empty: no kernel could be staged");
	if (r >= 0)
		r = e->n > before ? -EBADMSG : 0;
	policy_errors_done(&local);
	return r;
}

static int name_cmp(const void *a, const void *b) {
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.conf entries of dir in byte order; a missing directory is empty. */
static int list_dropins(const char *dir, char ***ret) {
	_cleanup_strv_free_ char **l = NULL;
	DIR *d;
	struct dirent *de;

	d = opendir(dir);
	if (!d) {
		if (errno == ENOENT || errno == ENOTDIR) {
			*ret = NULL;
			return 0;
		}
		return -errno;
	}
	errno = 0;
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name);

		if (de->d_name[0] == '.' || n <= 5 || !streq(de->d_name + n - 5, ".conf"))
			continue;
		if (strv_extend(&l, de->d_name) < 0) {
			closedir(d);
			return -ENOMEM;
		}
	}
	closedir(d);
	if (l)
		qsort(l, strv_length(l), sizeof(char *), name_cmp);
	*ret = TAKE_PTR(l);
	return 0;
}

/* Reads and applies one file. Missing: 0. */
static int load_file(Policy *p, const char *path, bool may_be_missing, PolicyErrors *errors) {
	_cleanup_free_ char *data = NULL;
	struct stat st;
	size_t size;
	int r;

	if (stat(path, &st) < 0) {
		if (errno == ENOENT && may_be_missing)
			return 0;
		r = -errno;
		policy_errors_add(errors, path, 0, "Cannot access: %s", strerror(-r));
		return r;
	}
	if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3))
		return 0; /* a drop-in linked to /dev/null is masked */
	if (!S_ISREG(st.st_mode)) {
		policy_errors_add(errors, path, 0, "Not a regular file");
		return -EBADMSG;
	}
	r = read_file_full(path, POLICY_CONFIG_MAX_SIZE, &data, &size);
	if (r < 0) {
		policy_errors_add(errors, path, 0, "Cannot read: %s",
		                  r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
		return r;
	}
	if (!origins_get(p) || strv_extend(&p->origins->files, path) < 0)
		return -ENOMEM;
	return policy_parse_buffer(p, path, data, size, errors);
}

int policy_load(const char *root, Policy **ret, PolicyErrors *ret_errors) {
	_cleanup_(policy_freep) Policy *p = NULL;
	_cleanup_free_ char *main_path = NULL, *dir = NULL;
	_cleanup_strv_free_ char **dropins = NULL;
	PolicyErrors local = {};
	PolicyErrors *e = ret_errors ?: &local;
	int r, ret_r = 0;

	if (!ret)
		return -EINVAL;
	r = policy_new_default(&p);
	if (r < 0)
		return r;
	if (path_prefix_root(root, POLICY_CONFIG_FILE, &main_path) < 0 ||
	    path_prefix_root(root, POLICY_CONFIG_DROPIN_DIR, &dir) < 0)
		return -ENOMEM;

	r = load_file(p, main_path, true, e);
	if (r == -ENOMEM)
		goto out;
	if (r < 0)
		ret_r = r;

	r = list_dropins(dir, &dropins);
	if (r < 0) {
		policy_errors_add(e, dir, 0, "Cannot list drop-ins: %s", strerror(-r));
		ret_r = ret_r ?: r;
	}
	STRV_FOREACH (name, dropins) {
		_cleanup_free_ char *path = NULL;

		if (path_join(dir, *name, &path) < 0) {
			r = -ENOMEM;
			goto out;
		}
		r = load_file(p, path, true, e);
		if (r == -ENOMEM)
			goto out;
		if (r < 0 && ret_r == 0)
			ret_r = r;
	}

	r = policy_finish(p, e);
	if (r == -ENOMEM)
		goto out;
	if (r < 0 && ret_r == 0)
		ret_r = r;
	r = ret_r;
	if (r == 0)
		*ret = TAKE_PTR(p);
out:
	policy_errors_done(&local);
	return r;
}
