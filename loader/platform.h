/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What the host's firmware and kernel allow a kexec loader: the firmware
 * (legacy BIOS or UEFI), UEFI Secure Boot, and the kernel's lockdown mode.
 * They decide which backend can work (kexec_load is refused under lockdown; on
 * UEFI our loader needs the EFI state of efi.h), and Describe() and the report
 * name them, so an operator sees why a host has no fast handoff.
 *
 * Read from /sys below a root (tests use crafted trees):
 *   /sys/firmware/efi                  exists: booted through UEFI
 *   /sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c
 *                                      4 bytes of attributes, then 1 byte: 1 enabled
 *   /sys/kernel/security/lockdown      "none [integrity] confidentiality"
 */

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

typedef enum PlatformFirmware {
	PLATFORM_FIRMWARE_BIOS, /* "bios": no /sys/firmware/efi */
	PLATFORM_FIRMWARE_UEFI, /* "uefi" */
	_PLATFORM_FIRMWARE_MAX,
} PlatformFirmware;

typedef enum PlatformSecureBoot {
	PLATFORM_SECURE_BOOT_UNSUPPORTED, /* "unsupported": not a UEFI boot */
	PLATFORM_SECURE_BOOT_DISABLED,    /* "disabled" */
	PLATFORM_SECURE_BOOT_ENABLED,     /* "enabled" */
	PLATFORM_SECURE_BOOT_UNKNOWN,     /* "unknown": UEFI, but the variable is unreadable */
	_PLATFORM_SECURE_BOOT_MAX,
} PlatformSecureBoot;

typedef enum PlatformLockdown {
	PLATFORM_LOCKDOWN_UNSUPPORTED,     /* "unsupported": the kernel has no lockdown LSM */
	PLATFORM_LOCKDOWN_NONE,            /* "none" */
	PLATFORM_LOCKDOWN_INTEGRITY,       /* "integrity" */
	PLATFORM_LOCKDOWN_CONFIDENTIALITY, /* "confidentiality" */
	PLATFORM_LOCKDOWN_UNKNOWN,         /* "unknown": unreadable or malformed */
	_PLATFORM_LOCKDOWN_MAX,
} PlatformLockdown;

typedef struct PlatformFacts {
	PlatformFirmware firmware;
	PlatformSecureBoot secure_boot;
	PlatformLockdown lockdown;
} PlatformFacts;

#define PLATFORM_SECURE_BOOT_VAR \
	"/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
#define PLATFORM_LOCKDOWN_FILE "/sys/kernel/security/lockdown"

const char *platform_firmware_to_string(PlatformFirmware f);
const char *platform_secure_boot_to_string(PlatformSecureBoot s);
const char *platform_lockdown_to_string(PlatformLockdown l);

/* The bracketed word of the lockdown file's one line. -EBADMSG unless exactly one
 * of none/integrity/confidentiality is bracketed (*ret untouched). */
int platform_lockdown_parse(const char *line, PlatformLockdown *ret);

/* An efivarfs SecureBoot file: 4 bytes of attributes and one data byte, 0 or 1.
 * -EBADMSG for any other size or value (*ret untouched). */
int platform_secure_boot_parse(const uint8_t *data, size_t size, PlatformSecureBoot *ret);

/* Reads the three facts below root (NULL: "/"). A fact that cannot be read or
 * parsed is "unknown"; only -ENOMEM is an error. */
int platform_facts_read(const char *root, PlatformFacts *ret);

/* The lockdown mode alone, as platform_facts_read() gets it; -errno when the file
 * exists but cannot be read (-ENOENT is PLATFORM_LOCKDOWN_UNSUPPORTED, not an error). */
int platform_lockdown_read(const char *root, PlatformLockdown *ret);

/* {"firmware","secure_boot","lockdown"}: the names above (Describe() and the
 * report's host.platform). */
int platform_facts_to_json(const PlatformFacts *f, json_object **ret);
