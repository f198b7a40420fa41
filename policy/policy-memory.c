/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Kept memory (policy-memory.h): the named reasons for what a host lacks to
 * keep VM RAM in place across a kexec. No I/O: the daemon gathers the facts.
 */

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "policy-internal.h"
#include "policy-memory.h"
#include "string-util.h"

#define BLOCK POLICY_REASON_BLOCKING
#define MiB   (1024 * 1024)

/* The regions themselves: present, visible, backed by RAM, with a device. */
static int check_regions(const KeptMemoryFacts *f, PolicyReasons *r) {
	int k;

	if (f->regions_hidden)
		return policy_reasons_add(r, "kept-memory-hidden", BLOCK,
		                          "/proc/iomem hides the persistent-memory addresses: "
		                          "the daemon needs CAP_SYS_ADMIN to check them");
	if (f->n_regions == 0)
		return policy_reasons_add(
		        r, "kept-memory-no-region", BLOCK,
		        "No persistent-memory region: boot with memmap=SIZE!OFFSET inside RAM, "
		        "or add an NVDIMM (docs/vms.md)");
	for (size_t i = 0; i < f->n_regions; i++) {
		const KeptMemoryRegion *g = &f->regions[i];

		if (g->emulated && !g->in_ram &&
		    (k = policy_reasons_add(r, "kept-memory-not-ram", BLOCK,
		                            "The region 0x%" PRIx64 "-0x%" PRIx64
		                            " (memmap=) is not RAM in the firmware map: what "
		                            "is written there vanishes",
		                            g->start, g->end)) < 0)
			return k;
		if (!g->device &&
		    (k = policy_reasons_add(r, "kept-memory-no-device", BLOCK,
		                            "The region 0x%" PRIx64 "-0x%" PRIx64
		                            " has no /dev/pmem device (is nd_pmem loaded?)",
		                            g->start, g->end)) < 0)
			return k;
	}
	return 0;
}

/* The filesystem that holds libvirt's memory_backing_dir. */
static int check_backing(const KeptMemoryFacts *f, PolicyReasons *r) {
	if (f->backing_region < 0 || (size_t)f->backing_region >= f->n_regions)
		return policy_reasons_add(
		        r, "kept-memory-dir-not-pmem", BLOCK,
		        "libvirt's memory_backing_dir '%s' is on %s (%s), not on a "
		        "persistent-memory device",
		        strna(f->backing_dir), strna(f->source), strna(f->mount_point));
	if (!f->dax)
		return policy_reasons_add(r, "kept-memory-not-dax", BLOCK,
		                          "%s on %s is not mounted with -o dax (dax=always): "
		                          "the RAM would go through the page cache (mount "
		                          "options say '%s')",
		                          strna(f->source), strna(f->mount_point),
		                          f->dax_option ?: "no dax");
	if (f->backing_write_error != 0)
		return policy_reasons_add(
		        r, "kept-memory-dir-read-only", BLOCK,
		        "upgraded cannot write below '%s' (%s): it keeps a link to each VM's RAM "
		        "file there; give upgraded.service ReadWritePaths=%s (docs/vms.md)",
		        strna(f->backing_dir), strerror(-f->backing_write_error),
		        strna(f->backing_dir));
	return 0;
}

/* What the next kernel sees: the command line and the memory map. */
static int check_next_kernel(const KeptMemoryFacts *f, PolicyReasons *r) {
	int k;

	for (size_t i = 0; f->cmdline_checked && i < f->n_regions; i++) {
		const KeptMemoryRegion *g = &f->regions[i];

		if (g->emulated && !g->on_staged_cmdline &&
		    (k = policy_reasons_add(r, "kept-memory-cmdline", BLOCK,
		                            "The staged command line lacks memmap=%" PRIu64
		                            "M!%" PRIu64 "M: the new kernel would use the "
		                            "region as RAM",
		                            (g->end - g->start + 1) / MiB, g->start / MiB)) < 0)
			return k;
	}
	if (f->cmdline_added &&
	    (k = policy_reasons_add(r, "kept-memory-cmdline-carried", POLICY_REASON_INFO,
	                            "Stage added '%s' from the running command line: the "
	                            "region must stay persistent memory on the new kernel",
	                            f->cmdline_added)) < 0)
		return k;
	if (!f->loader_keeps_out)
		return policy_reasons_add(r, "kept-memory-loader", BLOCK,
		                          "The kexec backend %s is not known to keep its "
		                          "segments out of persistent memory",
		                          strna(f->backend));
	return 0;
}

int policy_check_kept_memory(const KeptMemoryFacts *f, PolicyReasons *ret) {
	size_t before = ret->n;
	int r;

	r = check_regions(f, ret);
	if (r < 0)
		return r;
	if (f->n_regions > 0 && !f->regions_hidden) {
		if ((r = check_backing(f, ret)) < 0 || (r = check_next_kernel(f, ret)) < 0)
			return r;
	}
	for (size_t i = before; i < ret->n; i++)
		if (ret->items[i].severity == BLOCK)
			return 0;
	return policy_reasons_add(ret, "kept-memory-ready", POLICY_REASON_INFO,
	                          "VM RAM in '%s' (%s, DAX) survives the kexec",
	                          strna(f->backing_dir), strna(f->source));
}

bool policy_kept_memory_blocked(const PolicyReasons *r) {
	for (size_t i = 0; r && i < r->n; i++)
		if (r->items[i].severity == BLOCK &&
		    strncmp(r->items[i].code, "kept-memory-", 12) == 0)
			return true;
	return false;
}

int policy_kept_memory_copy_blocking(const PolicyReasons *src, PolicyReasons *dst) {
	for (size_t i = 0; src && i < src->n; i++) {
		int r;

		if (src->items[i].severity != BLOCK)
			continue;
		r = policy_reasons_add(dst, src->items[i].code, BLOCK, "%s", src->items[i].text);
		if (r < 0)
			return r;
	}
	return 0;
}

int policy_check_kept_file(const KeptMemoryFacts *f, const KeptFileFacts *file,
                           PolicyReasons *ret) {
	/* On the filesystem of memory_backing_dir; whether that one is kept is
	 * the host's reasons. */
	bool on_it =
	        file->mount_point && f->mount_point && streq(file->mount_point, f->mount_point);

	if (!on_it)
		return policy_reasons_add(ret, "kept-memory-file-elsewhere", BLOCK,
		                          "The RAM file '%s' is on %s, not on the kept "
		                          "filesystem %s",
		                          strna(file->path), strna(file->mount_point),
		                          strna(f->mount_point));
	if (file->dax_known && !file->dax)
		return policy_reasons_add(ret, "kept-memory-file-not-dax", BLOCK,
		                          "The RAM file '%s' is not DAX-mapped (statx)",
		                          strna(file->path));
	return 0;
}
