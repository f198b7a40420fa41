/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Kept memory: whether this host has memory that survives a kexec for VM RAM
 * kept in place (the keep-ram strategy). On stock kernels that is a
 * persistent-memory region (memmap=SIZE!OFFSET or an NVDIMM) with a DAX
 * filesystem holding libvirt's memory_backing_dir (docs/vms.md).
 *
 * The daemon gathers the facts (daemon/pmem/pmem.h does the I/O) at stage and
 * at commit; these pure functions turn them into named reasons. Every part that
 * does not hold gives one blocking reason; when all hold, one info reason
 * "kept-memory-ready". Codes (stable):
 *
 *   kept-memory-no-region        no persistent-memory region (/proc/iomem)
 *   kept-memory-hidden           /proc/iomem hides the addresses (no CAP_SYS_ADMIN)
 *   kept-memory-not-ram          an emulated region outside firmware RAM: writes vanish
 *   kept-memory-no-device        a region without its /dev/pmemN (nd_pmem not loaded)
 *   kept-memory-dir-not-pmem     memory_backing_dir is not on a persistent-memory device
 *   kept-memory-not-dax          ... that filesystem is not mounted with dax (=always)
 *   kept-memory-cmdline          the staged command line lacks the region's memmap=
 *   kept-memory-cmdline-carried  (info) memmap= copied from the running command line
 *   kept-memory-loader           the kexec backend may place segments in the region
 *   kept-memory-file-elsewhere   a VM's RAM file is not on that filesystem
 *   kept-memory-file-not-dax     a VM's RAM file is not DAX-mapped (statx)
 */

#include <stdbool.h>
#include <stdint.h>

#include "policy.h"

typedef struct KeptMemoryRegion {
	uint64_t start, end;    /* inclusive */
	bool emulated;          /* "Persistent Memory (legacy)": memmap=! or e820 type 12 */
	bool in_ram;            /* inside a RAM range of the firmware map */
	const char *device;     /* "pmem0", NULL: no block device */
	bool on_staged_cmdline; /* the staged command line has memmap= for exactly it */
} KeptMemoryRegion;

typedef struct KeptMemoryFacts {
	const KeptMemoryRegion *regions;
	size_t n_regions;
	bool regions_hidden; /* /proc/iomem printed 0-0 */

	const char *backing_dir; /* libvirt's memory_backing_dir */
	const char *mount_point; /* of the filesystem holding it, NULL: unknown */
	const char *fstype;
	const char *source;      /* mount source, e.g. /dev/pmem0 */
	int backing_region;      /* index into regions of that device, -1: none */
	bool dax;                /* mounted with dax or dax=always */
	const char *dax_option;  /* what the mount said about dax, NULL: nothing */
	int backing_write_error; /* 0: the daemon may write below backing_dir, else -errno
	                          * (-EROFS: the unit's ProtectSystem=) */

	bool cmdline_checked;      /* a staged command line was compared */
	const char *cmdline_added; /* memmap= words stage carried over, NULL: none */
	bool loader_keeps_out;     /* the backend keeps segments out of the regions */
	const char *backend;
} KeptMemoryFacts;

/* One VM's RAM file against the facts above. */
typedef struct KeptFileFacts {
	const char *path;
	const char *mount_point; /* of the filesystem holding path, NULL: unknown */
	bool dax_known;          /* statx could tell */
	bool dax;                /* STATX_ATTR_DAX */
} KeptFileFacts;

/* Appends the host's reasons to ret (blocking ones when a part does not hold). */
int policy_check_kept_memory(const KeptMemoryFacts *f, PolicyReasons *ret);
/* True when reasons (from policy_check_kept_memory() and friends) block keep-ram. */
bool policy_kept_memory_blocked(const PolicyReasons *r);
/* Appends copies of the blocking reasons of src to dst (a VM's reasons carry
 * the host's). */
int policy_kept_memory_copy_blocking(const PolicyReasons *src, PolicyReasons *dst);
/* Appends the reasons one RAM file adds: blocking unless it lies on the kept
 * filesystem and, where statx can tell, is DAX-mapped. */
int policy_check_kept_file(const KeptMemoryFacts *f, const KeptFileFacts *file, PolicyReasons *ret);
