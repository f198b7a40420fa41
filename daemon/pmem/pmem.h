/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Kept memory on this host: the facts behind the keep-ram strategy (VM RAM
 * kept in place across the kexec), gathered at stage and at commit. On stock
 * kernels the memory that survives a kexec is a persistent-memory region
 * (memmap=SIZE!OFFSET or an NVDIMM) with a DAX filesystem that holds libvirt's
 * memory_backing_dir (docs/vms.md). This module reads /proc/iomem, the
 * firmware memory map, /sys/block/pmem*, the mount table, libvirt's qemu.conf
 * and the command lines, all below --root; policy/policy-memory.h names what
 * does not hold.
 *
 *   PmemOptions o = { .root = root, .staged_cmdline = u->cmdline, .backend = "kexec_load" };
 *   _cleanup_(pmem_facts_done) PmemFacts f = {};
 *   pmem_facts_gather(&o, &f);            -- f.reasons: named, blocking or info
 *   pmem_facts_ready(&f)                  -- nothing blocks keep-ram on this host
 *   pmem_path_check(&f, root, ram_file, &reasons) -- 1: that file is on kept memory
 *
 * Stage uses pmem_cmdline_carry() first: a memmap= region of the running kernel
 * missing from the operator's --cmdline is carried over (docs/vms.md says why).
 */

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memrange.h"
#include "policy-memory.h"

#define PMEM_DEFAULT_BACKING_DIR "/var/lib/libvirt/qemu/ram"
#define PMEM_QEMU_CONF           "/etc/libvirt/qemu.conf"
#define PMEM_MAX_MEMMAP          32

/* One mount of /proc/self/mountinfo. */
typedef struct PmemMount {
	char *mount_point;
	char *fstype;
	char *source;
	char *options; /* per-mount options, a comma, then the superblock's */
	unsigned major, minor;
} PmemMount;

typedef struct PmemOptions {
	const char *root;
	const char *backing_dir;    /* the policy's MemoryBackingDir=, NULL: qemu.conf */
	const char *staged_cmdline; /* NULL: not staged yet, not compared */
	const char *cmdline_added;  /* what stage carried over, NULL: nothing */
	const char *backend;        /* kexec backend name */
} PmemOptions;

typedef struct PmemFacts {
	KeptMemoryRegion *regions; /* device strings owned here */
	size_t n_regions;
	char *backing_dir;
	const char *backing_dir_from; /* "policy", "qemu.conf", "default" */
	PmemMount mount;              /* of the filesystem holding backing_dir */
	KeptMemoryFacts facts;        /* points into the above */
	PolicyReasons reasons;
} PmemFacts;

void pmem_mount_done(PmemMount *m);
void pmem_facts_done(PmemFacts *f);

/* Gathers every fact and the policy's reasons. Returns 0 (a missing file is a
 * fact, not an error), -ENOMEM. *ret is not touched on failure. */
int pmem_facts_gather(const PmemOptions *o, PmemFacts *ret);
/* No blocking reason: this host keeps VM RAM in backing_dir across the kexec. */
bool pmem_facts_ready(const PmemFacts *f);
/* {"ready":..,"regions":[...],"memory_backing_dir":..,"mount":{..},"reasons":[...]} */
int pmem_facts_to_json(const PmemFacts *f, json_object **ret);

/*
 * For the keep-ram strategy: whether the RAM file at path (absolute, as libvirt
 * names it, without the root prefix) lies on the kept filesystem and, where
 * statx can tell, is DAX-mapped. Returns 1 when it is kept, 0 when not (with a
 * named blocking reason appended to ret_reasons; the host's own reasons too,
 * when the host is not ready), negative errno on failure.
 */
int pmem_path_check(const PmemFacts *f, const char *root, const char *path,
                    PolicyReasons *ret_reasons);

/* The same in the shape of keep-ram's KeepRamConfig.on_kept_memory (daemon/vm/keep-ram.h):
 * userdata is a PmemKeptCheck; false with *ret_reason ("code: text; ...", caller frees)
 * when path is not on kept memory or cannot be checked. */
typedef struct PmemKeptCheck {
	const PmemFacts *facts; /* gathered by pmem_facts_gather() */
	const char *root;
} PmemKeptCheck;
bool pmem_on_kept_memory(const char *path, char **ret_reason, void *userdata);

/* ---- parsers (fuzzed: tests/fuzz/fuzz-pmem.c) ---- */

/* The memmap=SIZE!START entries (comma lists too) of a command line, as
 * type-12 ranges. Other memmap= forms are skipped. -E2BIG past max. */
int pmem_memmap_parse(const char *cmdline, struct mem_range *ret, size_t max, size_t *ret_n);

/*
 * Stage's carry-over: the memmap= words of running (every entry SIZE!START)
 * whose regions staged does not already give. *ret_cmdline is staged with them
 * appended, *ret_added the words ("" and NULL when nothing was missing, then
 * *ret_cmdline is NULL too).
 */
int pmem_cmdline_carry(const char *running, const char *staged, char **ret_cmdline,
                       char **ret_added);

/* The mount holding path (absolute, normalized): the longest mount point that
 * is path or above it, the last one listed on a tie (it is mounted over the
 * others). -ENOENT when none, -EBADMSG when no line parses. */
int pmem_mountinfo_find(const char *data, size_t size, const char *path, PmemMount *ret);

/* memory_backing_dir of a libvirt qemu.conf text; *ret NULL when unset. */
int pmem_qemu_conf_backing_dir(const char *data, size_t size, char **ret);
