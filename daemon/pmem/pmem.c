/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Kept memory: gathers what this host has for VM RAM that survives a kexec
 * (pmem.h) and asks the policy what it lacks. Every path is below --root.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bootparam.h"
#include "fileio.h"
#include "json-util.h"
#include "macros.h"
#include "path-util.h"
#include "pmem.h"
#include "string-util.h"

#ifndef STATX_ATTR_DAX
#define STATX_ATTR_DAX 0x00200000 /* linux/stat.h, 5.8 */
#endif

#define SMALL_FILE_MAX  4096
#define MOUNTINFO_MAX   (4u << 20)
#define QEMU_CONF_MAX   (1u << 20)
#define PMEM_MAX_BLOCKS 64

typedef struct PmemBlock {
	char name[32];
	unsigned major, minor;
	bool have_start;
	uint64_t start; /* its namespace's first byte (device/resource) */
} PmemBlock;

void pmem_facts_done(PmemFacts *f) {
	if (!f)
		return;
	for (size_t i = 0; i < f->n_regions; i++)
		free((char *)f->regions[i].device);
	free(f->regions);
	free(f->backing_dir);
	pmem_mount_done(&f->mount);
	policy_reasons_done(&f->reasons);
	*f = (PmemFacts){};
}

static int read_root_line(const char *root, const char *path, char **ret) {
	int r = read_root_file(root, path, SMALL_FILE_MAX, ret, NULL);

	if (r >= 0)
		strstrip(*ret);
	return r;
}

/* /sys/block/pmemN: its dev_t and where its namespace starts. */
static int read_blocks(const char *root, PmemBlock *ret, size_t max, size_t *ret_n) {
	_cleanup_free_ char *dir = NULL;
	struct dirent *de;
	size_t n = 0;
	DIR *d;
	int r;

	r = path_prefix_root(root, "/sys/block", &dir);
	if (r < 0)
		return r;
	d = opendir(dir);
	if (!d) {
		*ret_n = 0;
		return errno == ENOENT ? 0 : -errno;
	}
	while ((de = readdir(d)) && n < max) {
		_cleanup_free_ char *p = NULL, *dev = NULL, *res = NULL;
		PmemBlock *b = &ret[n];

		if (strncmp(de->d_name, "pmem", 4) != 0 || strlen(de->d_name) >= sizeof(b->name))
			continue;
		*b = (PmemBlock){};
		strcpy(b->name, de->d_name);
		if (asprintf(&p, "/sys/block/%s/dev", de->d_name) < 0) {
			closedir(d);
			return -ENOMEM;
		}
		if (read_root_line(root, p, &dev) < 0 ||
		    sscanf(dev, "%u:%u", &b->major, &b->minor) != 2)
			continue;
		free(p);
		if (asprintf(&p, "/sys/block/%s/device/resource", de->d_name) < 0) {
			closedir(d);
			return -ENOMEM;
		}
		if (read_root_line(root, p, &res) >= 0 && sscanf(res, "%" SCNx64, &b->start) == 1)
			b->have_start = true;
		n++;
	}
	closedir(d);
	*ret_n = n;
	return 0;
}

/* The block device of region g: the one whose namespace starts inside it, or
 * the only one when there is one region and the start is not readable. */
static const PmemBlock *block_of(const KeptMemoryRegion *g, size_t n_regions, const PmemBlock *b,
                                 size_t nb) {
	for (size_t i = 0; i < nb; i++)
		if (b[i].have_start && b[i].start >= g->start && b[i].start <= g->end)
			return &b[i];
	if (n_regions == 1 && nb == 1 && !b[0].have_start)
		return &b[0];
	return NULL;
}

/* 1. The regions: /proc/iomem, the firmware map, the block devices. */
static int gather_regions(const PmemOptions *o, PmemFacts *f, PmemBlock *blocks, size_t *nb) {
	struct mem_range pm[MEMRANGE_MAX_PMEM], staged[PMEM_MAX_MEMMAP];
	_cleanup_free_ struct mem_range *map = NULL;
	size_t n = 0, nmap = 0, ns = 0;
	int r;

	r = memrange_read_iomem_pmem(o->root, pm, ELEMENTSOF(pm), &n);
	if (r == -EPERM) {
		f->facts.regions_hidden = true;
		n = 0;
	} else if (r < 0 && r != -ENOMEM)
		n = 0; /* unreadable or malformed: no region we can vouch for */
	else if (r < 0)
		return r;
	(void)memrange_read_memmap(o->root, NULL, &map, &nmap);
	r = read_blocks(o->root, blocks, PMEM_MAX_BLOCKS, nb);
	if (r < 0)
		*nb = 0;
	if (o->staged_cmdline &&
	    pmem_memmap_parse(o->staged_cmdline, staged, ELEMENTSOF(staged), &ns) < 0)
		ns = 0;

	f->regions = calloc(MAX(n, (size_t)1), sizeof(*f->regions));
	if (!f->regions)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		KeptMemoryRegion *g = &f->regions[i];
		const PmemBlock *b;

		*g = (KeptMemoryRegion){ .start = pm[i].start,
			                 .end = pm[i].end,
			                 .emulated = pm[i].type == E820_TYPE_PRAM };
		for (size_t k = 0; k < nmap; k++)
			if (map[k].type == E820_TYPE_RAM && map[k].start <= g->start &&
			    g->end <= map[k].end)
				g->in_ram = true;
		for (size_t k = 0; k < ns; k++)
			if (staged[k].start == g->start && staged[k].end == g->end)
				g->on_staged_cmdline = true;
		f->n_regions = i + 1;
		b = block_of(g, n, blocks, *nb);
		if (b && !(g->device = strdup(b->name)))
			return -ENOMEM;
	}
	return 0;
}

/* path (absolute, without root) with symlinks resolved below root, when it
 * exists; otherwise path as given. */
static int resolve_below_root(const char *root, const char *path, char **ret) {
	_cleanup_free_ char *p = NULL;
	char buf[PATH_MAX];
	const char *rest;

	if (path_prefix_root(root, path, &p) < 0)
		return -ENOMEM;
	if (!realpath(p, buf))
		return (*ret = strdup(path)) ? 0 : -ENOMEM;
	if (!root || !*root || streq(root, "/"))
		return (*ret = strdup(buf)) ? 0 : -ENOMEM;
	rest = path_startswith(buf, root);
	if (!rest) /* a link out of the root: use what was given */
		return (*ret = strdup(path)) ? 0 : -ENOMEM;
	return asprintf(ret, "/%s", rest) < 0 ? -ENOMEM : 0;
}

/* The mount that holds path (absolute, without root). */
static int find_mount(const char *root, const char *path, PmemMount *ret) {
	_cleanup_free_ char *data = NULL, *resolved = NULL;
	size_t size;
	int r;

	r = resolve_below_root(root, path, &resolved);
	if (r < 0)
		return r;
	r = read_root_file(root, "/proc/self/mountinfo", MOUNTINFO_MAX, &data, &size);
	if (r < 0)
		return r;
	return pmem_mountinfo_find(data, size, resolved, ret);
}

/* "dax" or "dax=always" among the options; *ret_word what was said about dax. */
static bool options_dax(const char *options, const char **ret_word) {
	bool dax = false;

	*ret_word = NULL;
	for (const char *w = options; w && *w;) {
		size_t len = strcspn(w, ",");

		if (strncmp(w, "dax", 3) == 0 && (len == 3 || w[3] == '=')) {
			*ret_word = w;
			dax = len == 3 || (len == 10 && strncmp(w, "dax=always", 10) == 0);
		}
		w += len + (w[len] == ',');
	}
	return dax;
}

/* 0, or why this process cannot create the keep links below dir: a read-only
 * view of it (ProtectSystem=strict without ReadWritePaths=) says -EROFS. */
static int backing_writable(const char *root, const char *dir) {
	_cleanup_free_ char *p = NULL;

	if (path_prefix_root(root, dir, &p) < 0)
		return -ENOMEM;
	return access(p, W_OK | X_OK) < 0 ? -errno : 0;
}

/* 2. The filesystem holding libvirt's memory_backing_dir. */
static int gather_backing(const PmemOptions *o, PmemFacts *f, const PmemBlock *blocks, size_t nb) {
	_cleanup_free_ char *conf = NULL, *dir = NULL;
	const char *word;
	size_t size;
	int r;

	if (o->backing_dir) {
		dir = strdup(o->backing_dir);
		f->backing_dir_from = "policy";
	} else if (read_root_file(o->root, PMEM_QEMU_CONF, QEMU_CONF_MAX, &conf, &size) >= 0 &&
	           pmem_qemu_conf_backing_dir(conf, size, &dir) >= 0 && dir &&
	           path_is_absolute(dir))
		f->backing_dir_from = "qemu.conf";
	else {
		free(dir);
		dir = strdup(PMEM_DEFAULT_BACKING_DIR);
		f->backing_dir_from = "default";
	}
	if (!dir)
		return -ENOMEM;
	f->backing_dir = TAKE_PTR(dir);
	f->facts.backing_region = -1;

	r = find_mount(o->root, f->backing_dir, &f->mount);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return 0; /* no mount table: not on persistent memory as far as we know */
	f->facts.dax = options_dax(f->mount.options, &word);
	f->facts.dax_option = word;
	f->facts.backing_write_error = backing_writable(o->root, f->backing_dir);
	for (size_t i = 0; i < f->n_regions; i++) {
		const char *dev = f->regions[i].device;

		for (size_t k = 0; dev && k < nb; k++)
			if (streq(blocks[k].name, dev) && blocks[k].major == f->mount.major &&
			    blocks[k].minor == f->mount.minor)
				f->facts.backing_region = (int)i;
	}
	return 0;
}

int pmem_facts_gather(const PmemOptions *o, PmemFacts *ret) {
	_cleanup_(pmem_facts_done) PmemFacts f = {};
	PmemBlock blocks[PMEM_MAX_BLOCKS];
	size_t nb = 0;
	int r;

	r = gather_regions(o, &f, blocks, &nb);
	if (r < 0)
		return r;
	r = gather_backing(o, &f, blocks, nb);
	if (r < 0)
		return r;

	/* 3. What the next kernel sees. Both backends keep out of the regions:
	 * ours carves them out of the map it places in and hands over
	 * (loader/memrange.h); kexec_file_load places only in System RAM, which
	 * they are not. */
	f.facts.regions = f.regions;
	f.facts.n_regions = f.n_regions;
	f.facts.backing_dir = f.backing_dir;
	f.facts.mount_point = f.mount.mount_point;
	f.facts.fstype = f.mount.fstype;
	f.facts.source = f.mount.source;
	f.facts.cmdline_checked = o->staged_cmdline != NULL;
	f.facts.cmdline_added = o->cmdline_added && *o->cmdline_added ? o->cmdline_added : NULL;
	f.facts.backend = o->backend;
	f.facts.loader_keeps_out =
	        o->backend && (streq(o->backend, "kexec_load") || streq(o->backend, "kexec_file") ||
	                       streq(o->backend, "record"));
	r = policy_check_kept_memory(&f.facts, &f.reasons);
	if (r < 0)
		return r;
	/* cmdline_added points into the caller's string: not kept past the call. */
	f.facts.cmdline_added = NULL;
	*ret = f;
	f = (PmemFacts){};
	return 0;
}

bool pmem_facts_ready(const PmemFacts *f) {
	return !policy_kept_memory_blocked(&f->reasons);
}

static json_object *json_hex(uint64_t v) {
	char buf[32];

	snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
	return json_object_new_string(buf);
}

/* A string, or JSON null (json-c's NULL) when s is NULL. */
static int json_put_str(json_object *o, const char *key, const char *s) {
	if (!s)
		return json_object_object_add(o, key, NULL) < 0 ? -ENOMEM : 0;
	return json_add_take(o, key, json_object_new_string(s));
}

static int regions_to_json(const PmemFacts *f, json_object **ret) {
	json_object *a = json_object_new_array();

	if (!a)
		return -ENOMEM;
	for (size_t i = 0; i < f->n_regions; i++) {
		const KeptMemoryRegion *g = &f->regions[i];
		json_object *o = json_object_new_object();

		if (!o || json_object_array_add(a, o) < 0 ||
		    json_add_take(o, "start", json_hex(g->start)) ||
		    json_add_take(o, "end", json_hex(g->end)) ||
		    json_add_take(o, "emulated", json_object_new_boolean(g->emulated)) ||
		    json_add_take(o, "in_ram", json_object_new_boolean(g->in_ram)) ||
		    (g->device && json_add_take(o, "device", json_object_new_string(g->device))) ||
		    (f->facts.cmdline_checked &&
		     json_add_take(o, "on_staged_cmdline",
		                   json_object_new_boolean(g->on_staged_cmdline)))) {
			json_object_put(a);
			return -ENOMEM;
		}
	}
	*ret = a;
	return 0;
}

int pmem_facts_to_json(const PmemFacts *f, json_object **ret) {
	json_object *o = json_object_new_object(), *regions = NULL, *reasons = NULL, *m;

	if (!o)
		return -ENOMEM;
	m = json_object_new_object();
	if (json_add_take(o, "ready", json_object_new_boolean(pmem_facts_ready(f))) < 0 ||
	    regions_to_json(f, &regions) < 0 || json_add_take(o, "regions", regions) < 0 ||
	    json_put_str(o, "memory_backing_dir", f->backing_dir) < 0 ||
	    json_put_str(o, "memory_backing_dir_from", f->backing_dir_from) < 0 ||
	    json_add_take(o, "mount", m) < 0 ||
	    json_put_str(m, "mount_point", f->mount.mount_point) < 0 ||
	    json_put_str(m, "fstype", f->mount.fstype) < 0 ||
	    json_put_str(m, "source", f->mount.source) < 0 ||
	    json_add_take(m, "dax", json_object_new_boolean(f->facts.dax)) < 0 ||
	    policy_reasons_to_json(&f->reasons, &reasons) < 0 ||
	    json_add_take(o, "reasons", reasons) < 0) {
		json_object_put(o);
		return -ENOMEM;
	}
	*ret = o;
	return 0;
}

int pmem_path_check(const PmemFacts *f, const char *root, const char *path,
                    PolicyReasons *ret_reasons) {
	_cleanup_(pmem_mount_done) PmemMount m = {};
	_cleanup_free_ char *p = NULL;
	KeptFileFacts file = { .path = path };
	struct statx stx;
	size_t before = ret_reasons->n;
	int r;

	if (!path || !path_is_absolute(path))
		return -EINVAL;
	r = find_mount(root, path, &m);
	if (r == -ENOMEM)
		return r;
	if (r >= 0)
		file.mount_point = m.mount_point;
	r = path_prefix_root(root, path, &p);
	if (r < 0)
		return r;
	/* Only on the host itself: below a test root the files are stand-ins on
	 * whatever filesystem holds the root. */
	if ((!root || !*root || streq(root, "/")) &&
	    statx(AT_FDCWD, p, 0, STATX_BASIC_STATS, &stx) == 0 &&
	    (stx.stx_attributes_mask & STATX_ATTR_DAX)) {
		file.dax_known = true;
		file.dax = stx.stx_attributes & STATX_ATTR_DAX;
	}
	r = policy_check_kept_file(&f->facts, &file, ret_reasons);
	if (r < 0)
		return r;
	r = policy_kept_memory_copy_blocking(&f->reasons, ret_reasons);
	if (r < 0)
		return r;
	return ret_reasons->n == before ? 1 : 0;
}

bool pmem_on_kept_memory(const char *path, char **ret_reason, void *userdata) {
	const PmemKeptCheck *k = userdata;
	PolicyReasons r = {};
	char *why = NULL;
	int kept;

	kept = k && k->facts ? pmem_path_check(k->facts, k->root, path, &r) : -EINVAL;
	if (kept > 0) {
		policy_reasons_done(&r);
		return true;
	}
	if (kept < 0 && asprintf(&why, "cannot check '%s' for kept memory: %s", strna(path),
	                         strerror(-kept)) < 0)
		why = NULL;
	for (size_t i = 0; kept == 0 && i < r.n; i++) {
		char *n = NULL;

		if (asprintf(&n, "%s%s%s: %s", why ?: "", why ? "; " : "", r.items[i].code,
		             r.items[i].text) < 0)
			n = NULL;
		free(why);
		why = n;
	}
	policy_reasons_done(&r);
	if (ret_reason)
		*ret_reason = why;
	else
		free(why);
	return false;
}
