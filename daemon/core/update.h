/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * One update: what was staged, where its commit stands, and the timestamps of
 * the phases it went through. Persisted as JSON in
 * <root>/var/lib/upgraded/updates/<id>.json (docs/state-machine.md).
 */

#include <stdbool.h>
#include <stdint.h>
#include <json-c/json.h>

#include "digest.h"
#include "handoff-mode.h"
#include "macros.h"
#include "staged-file.h"

typedef enum UpdateState {
	UPDATE_STAGED,
	UPDATE_COMMITTING,
	UPDATE_COMPLETING,
	UPDATE_DONE,
	UPDATE_CANCELLED,
	UPDATE_FAILED,
	_UPDATE_STATE_MAX,
	_UPDATE_STATE_INVALID = -1,
} UpdateState;

/* Phases inside a state (Update.Phase on the bus). */
#define PHASE_STAGED            "staged"
#define PHASE_PRE_HANDOFF       "pre-handoff"
#define PHASE_HANDOFF           "handoff"           /* handoff record persisted and synced */
#define PHASE_HANDOFF_REQUESTED "handoff-requested" /* systemd accepted kexec.target */
#define PHASE_PANIC_HANDOFF     "panic-handoff"     /* crash kernel loading the staged one */
#define PHASE_ROLLBACK          "rollback"
#define PHASE_POST_BOOT         "post-boot"
#define PHASE_DONE              "done"
#define PHASE_CANCELLED         "cancelled"
#define PHASE_FAILED            "failed"

#define UPDATE_ID_LEN 16 /* hex digits */

typedef struct UpdateStamp {
	char *name;
	uint64_t realtime_usec;
	uint64_t monotonic_usec;
	uint64_t tsc; /* 0 when not taken */
	char boot_id[33];
} UpdateStamp;

typedef struct Update {
	char *id;
	UpdateState state;
	char *phase;
	unsigned progress; /* percent */

	UpdateFile kernel;
	char *kernel_version;
	char *kernel_version_source;
	UpdateFile initrd; /* path NULL: none */
	char *cmdline;
	bool reuse_cmdline;

	char *backend;
	bool crash_image_loaded;
	char *backend_reason; /* why this backend (the default one could not be used), or NULL */
	char *crash_image_before;  /* who had a crash image loaded before stage, or NULL: none */
	char *crash_image_restore; /* what cancel did about that image, or NULL */
	char *kdump_initrd; /* kdump's initrd for the staged kernel (context-kdump.c), or NULL */
	uint64_t verified_bytes; /* kexec_load: what purgatory hashes when verified; 0: n/a */
	char *old_kernel;        /* running when staged */
	HandoffMode handoff;     /* set at commit; _HANDOFF_MODE_INVALID before */
	char *handoff_reason;
	char *handoff_boot_id; /* boot that requested the handoff */
	/* The panic path (docs/state-machine.md): the crash kernel's boot that took
	 * the update over, and the phase the record was in when the old kernel
	 * crashed. NULL: the old kernel never crashed during this update. */
	char *panic_boot_id;
	char *panic_from_phase;
	/* The crash kernel ran on another CPU than the machine's boot CPU: the staged kernel
	 * was told to leave that one parked (loader/boot-cpu.h), its APIC id. */
	bool panic_parked_cpu;
	uint32_t panic_parked_apicid;
	char *booted_kernel; /* running when the commit was resolved */
	char *error;         /* why it failed */
	char **hooks_done;   /* "<kind>:<name>" of finished hook steps */
	/* Owned by the VM steps (daemon/vm/vm-steps*.c), carried opaquely here so that the next
	 * kernel's daemon and the report have them. NULL: none yet. */
	json_object *decisions;   /* the policy's decisions at commit (docs/policy.md) */
	json_object *kept_memory; /* daemon/pmem facts at stage, again at commit; NULL: none */
	json_object *shutdown;    /* the old kernel's way down (handoff-shutdown.h); NULL: none */
	json_object *platform;    /* firmware, Secure Boot, lockdown at stage; NULL: none */
	json_object *vms;         /* per-VM results, vm_results_to_json() */
	json_object *deferred;    /* {units, released_after}: deferred-units.h; NULL: none */

	UpdateStamp *stamps;
	size_t n_stamps;

	/* Measurement carried across the kexec (daemon/measure/measure.c owns its content):
	 * the reboot-request clock sample and the old kernel's probe figures. NULL: none. */
	json_object *measure;
} Update;

const char *update_state_to_string(UpdateState s);
UpdateState update_state_from_string(const char *s);
bool update_state_is_terminal(UpdateState s);

bool update_id_is_valid(const char *id);
int update_id_new(char **ret);

Update *update_new(const char *id);
Update *update_free(Update *u);
DEFINE_TRIVIAL_CLEANUP_FUNC(Update *, update_free);

int update_set_string(char **field, const char *value);
/* Appends a phase stamp taken now; boot_id names the boot it belongs to. */
int update_add_stamp(Update *u, const char *name, bool with_tsc, const char *boot_id);
/* Takes back the stamp update_add_stamp() appended last (its transition failed). */
void update_drop_last_stamp(Update *u);
const UpdateStamp *update_find_stamp(const Update *u, const char *name);
bool update_hook_done(const Update *u, const char *key);

int update_to_json(const Update *u, json_object **ret);
int update_from_json(json_object *o, Update **ret);
/* Reads a record as stored on disk: JSON text up to its NUL. -EBADMSG when it is not JSON or
 * not a record. */
int update_from_record(const char *text, Update **ret);

/* Deep copy through JSON (used to restore an update when persisting fails). */
int update_copy(const Update *u, Update **ret);
