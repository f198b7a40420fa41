/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The keep-ram strategy's steps (docs/vms.md "Keeping RAM in place"). A VM whose RAM is a
 * shared file (<memoryBacking><source type='file'/><access mode='shared'/>) on memory that
 * survives the kexec saves only its device state: x-ignore-shared makes QEMU's migration
 * stream skip the shared RAM, and a hard link keeps the RAM file alive when libvirt deletes
 * the domain's memory directory. The libvirt hook (upgraded-libvirt-hook) links it back when
 * the domain starts from its managed save, with the new id; an extra monitor in the saved XML
 * lets the hook's helper turn x-ignore-shared on in the restoring QEMU.
 *
 * Called on vm-orchestrate.c's worker threads (vm-checkpoint.c, vm-rollback.c, vm-restore.c):
 *   commit   keep_ram_blocker()      why the VM cannot keep its RAM (-> checkpoint fallback)
 *            keep_ram_before_save()  link + generation mark + manifest entry + capability on
 *            keep_ram_after_save()   extra monitor into the saved XML, digest, entry again
 *            keep_ram_abandon()      the save did not happen: undo all of the above
 *   restore  keep_ram_verify()       the guard: file, size, inode, mark (+ digest)
 *            keep_ram_restored()     the VM runs: capability off, link and entry removed
 *
 * The pmem side asks keep_ram_ram_file() where a VM's RAM file is, and answers through
 * KeepRamConfig.on_kept_memory whether that path survives the kexec.
 */

#include <stdbool.h>
#include <stdint.h>

#include <libvirt/libvirt.h>

#include <json-c/json.h>

#include "keep-ram-digest.h"
#include "vm.h"

/* How the kept file was protected from the save to the restore (the report says which). */
typedef enum KeptRamSeal {
	KEPT_RAM_SEAL_NONE,          /* not sealed yet (or a record from before sealing) */
	KEPT_RAM_SEAL_IMMUTABLE,     /* root's alone, immutable, no writer left at the save */
	KEPT_RAM_SEAL_ROOT_OWNED,    /* the same, on a filesystem without the immutable flag */
	KEPT_RAM_SEAL_DIGEST_FORCED, /* a writer held it after the save: a full digest guards it */
	_KEPT_RAM_SEAL_MAX,
	_KEPT_RAM_SEAL_INVALID = -22,
} KeptRamSeal;

const char *kept_ram_seal_to_string(KeptRamSeal s);
KeptRamSeal kept_ram_seal_from_string(const char *s);

#define KEEP_RAM_QEMU_CONF           "/etc/libvirt/qemu.conf"
#define KEEP_RAM_BACKING_DIR_DEFAULT "/var/lib/libvirt/qemu/ram"
#define KEEP_RAM_START_ATTEMPTS      3 /* restores tried when the capability race is lost */

typedef struct KeepRamConfig {
	const char *root;        /* prefix of upgraded's own state and runtime paths; NULL = "" */
	const char *backing_dir; /* libvirt's memory_backing_dir; NULL = read KEEP_RAM_QEMU_CONF */
	const char *update_id;   /* goes into the generation mark */
	KeepRamDigestMode digest;
	unsigned digest_threads;  /* 0 = online CPUs */
	bool fallback_checkpoint; /* a VM that cannot keep its RAM is checkpointed instead */
	/* Whether path lies on memory that survives the kexec (the persistent-memory region and
	 * its DAX mount); false with a reason refuses the strategy. NULL: not checked. */
	bool (*on_kept_memory)(const char *path, char **ret_reason, void *userdata);
	void *userdata;
} KeepRamConfig;

/* What a keep-ram VM's record carries through the handoff. */
typedef struct KeptRam {
	char *path;      /* the hard link keeping the RAM file */
	char *state_dir; /* where its manifest entry is */
	uint64_t size;
	uint64_t inode;
	char *generation;
	KeepRamDigestMode digest_mode;
	char *digest;            /* hex, NULL in mark mode */
	uint64_t digest_usec;    /* hashing at the save */
	uint64_t verify_usec;    /* the guard before the restore, digest included */
	unsigned start_attempts; /* restores tried (the capability race) */
	KeptRamSeal seal;
	char *fallback_reason; /* set when the VM was checkpointed instead */
} KeptRam;

void kept_ram_free(KeptRam *k);
/* Adds "kept_ram" (object or null) and "fallback_reason" (string or null) to a VM's object of
 * the report; the reverse sets *ret (NULL when the VM kept nothing), -EBADMSG when malformed. */
void kept_ram_add_json(const KeptRam *k, struct json_object *vm);
int kept_ram_from_vm_json(struct json_object *vm, KeptRam **ret);

/* libvirt's memory_backing_dir from qemu.conf (its default when the file does not set it). */
int keep_ram_backing_dir_from_conf(const char *conf_path, char **ret_dir);

/* The running domain's RAM file, or -EOPNOTSUPP and a reason (not file-backed and shared, not
 * running, no single pc.ram). */
int keep_ram_ram_file(virDomainPtr dom, const char *backing_dir, char **ret_path,
                      char **ret_reason);

/* NULL when dom can keep its RAM under cfg, else why not. */
char *keep_ram_blocker(virDomainPtr dom, const KeepRamConfig *cfg);

/* save_dir: where libvirt keeps managed save images (NULL = VM_SAVE_DIR_DEFAULT). */
int keep_ram_before_save(virDomainPtr dom, const KeepRamConfig *cfg, const char *save_dir,
                         VmResult *r);
int keep_ram_after_save(virDomainPtr dom, const KeepRamConfig *cfg, VmResult *r);
void keep_ram_abandon(virDomainPtr dom, VmResult *r);

/* A checkpoint of a VM with shared file RAM: x-ignore-shared must be off (a VM restored by
 * keep-ram had it on), or the image would lack the RAM. */
int keep_ram_before_checkpoint(virDomainPtr dom);

/* The guard: 0 when the kept file is the one left at the save; else a reason in r->error
 * is the caller's to set from *ret_reason. Fills r->kept_ram->verify_usec. */
int keep_ram_verify(VmResult *r, char **ret_reason);
void keep_ram_restored(virDomainPtr dom, VmResult *r);

/* Whether a failed restore lost the race for x-ignore-shared (libvirt's error text). */
bool keep_ram_race_lost(const char *libvirt_error);
