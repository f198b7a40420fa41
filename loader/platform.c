/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "macros.h"
#include "path-util.h"
#include "platform.h"
#include "string-util.h"

static const char *const firmware_names[_PLATFORM_FIRMWARE_MAX] = {
	[PLATFORM_FIRMWARE_BIOS] = "bios",
	[PLATFORM_FIRMWARE_UEFI] = "uefi",
};

static const char *const secure_boot_names[_PLATFORM_SECURE_BOOT_MAX] = {
	[PLATFORM_SECURE_BOOT_UNSUPPORTED] = "unsupported",
	[PLATFORM_SECURE_BOOT_DISABLED] = "disabled",
	[PLATFORM_SECURE_BOOT_ENABLED] = "enabled",
	[PLATFORM_SECURE_BOOT_UNKNOWN] = "unknown",
};

static const char *const lockdown_names[_PLATFORM_LOCKDOWN_MAX] = {
	[PLATFORM_LOCKDOWN_UNSUPPORTED] = "unsupported",
	[PLATFORM_LOCKDOWN_NONE] = "none",
	[PLATFORM_LOCKDOWN_INTEGRITY] = "integrity",
	[PLATFORM_LOCKDOWN_CONFIDENTIALITY] = "confidentiality",
	[PLATFORM_LOCKDOWN_UNKNOWN] = "unknown",
};

const char *platform_firmware_to_string(PlatformFirmware f) {
	return f >= 0 && f < _PLATFORM_FIRMWARE_MAX ? firmware_names[f] : NULL;
}

const char *platform_secure_boot_to_string(PlatformSecureBoot s) {
	return s >= 0 && s < _PLATFORM_SECURE_BOOT_MAX ? secure_boot_names[s] : NULL;
}

const char *platform_lockdown_to_string(PlatformLockdown l) {
	return l >= 0 && l < _PLATFORM_LOCKDOWN_MAX ? lockdown_names[l] : NULL;
}

int platform_lockdown_parse(const char *line, PlatformLockdown *ret) {
	static const PlatformLockdown modes[] = { PLATFORM_LOCKDOWN_NONE,
		                                  PLATFORM_LOCKDOWN_INTEGRITY,
		                                  PLATFORM_LOCKDOWN_CONFIDENTIALITY };
	PlatformLockdown found = PLATFORM_LOCKDOWN_UNKNOWN;
	size_t nr_brackets = 0;

	if (!line)
		return -EBADMSG;
	for (const char *p = line; *p; p++)
		nr_brackets += *p == '[';
	if (nr_brackets != 1)
		return -EBADMSG;
	for (size_t i = 0; i < ELEMENTSOF(modes); i++) {
		const char *name = lockdown_names[modes[i]];
		const char *b = strchr(line, '[');
		size_t n = strlen(name);

		if (strncmp(b + 1, name, n) == 0 && b[1 + n] == ']')
			found = modes[i];
	}
	if (found == PLATFORM_LOCKDOWN_UNKNOWN)
		return -EBADMSG;
	*ret = found;
	return 0;
}

int platform_secure_boot_parse(const uint8_t *data, size_t size, PlatformSecureBoot *ret) {
	/* efivarfs: a 32-bit attribute word, then the variable's data (one byte). */
	if (!data || size != 5 || data[4] > 1)
		return -EBADMSG;
	*ret = data[4] ? PLATFORM_SECURE_BOOT_ENABLED : PLATFORM_SECURE_BOOT_DISABLED;
	return 0;
}

int platform_lockdown_read(const char *root, PlatformLockdown *ret) {
	_cleanup_free_ char *data = NULL;
	size_t size;
	int r;

	r = read_root_file(root, PLATFORM_LOCKDOWN_FILE, 4096, &data, &size);
	if (r == -ENOENT) {
		*ret = PLATFORM_LOCKDOWN_UNSUPPORTED;
		return 0;
	}
	if (r < 0)
		return r;
	if (platform_lockdown_parse(strstrip(data), ret) < 0)
		*ret = PLATFORM_LOCKDOWN_UNKNOWN;
	return 0;
}

static PlatformSecureBoot secure_boot_read(const char *root) {
	_cleanup_free_ char *data = NULL;
	PlatformSecureBoot sb;
	size_t size;

	if (read_root_file(root, PLATFORM_SECURE_BOOT_VAR, 64, &data, &size) < 0 ||
	    platform_secure_boot_parse((const uint8_t *)data, size, &sb) < 0)
		return PLATFORM_SECURE_BOOT_UNKNOWN;
	return sb;
}

int platform_facts_read(const char *root, PlatformFacts *ret) {
	_cleanup_free_ char *efi = NULL;
	PlatformFacts f = {};
	int r;

	r = path_prefix_root(root, "/sys/firmware/efi", &efi);
	if (r < 0)
		return r;
	if (access(efi, F_OK) == 0) {
		f.firmware = PLATFORM_FIRMWARE_UEFI;
		f.secure_boot = secure_boot_read(root);
	} else {
		f.firmware = PLATFORM_FIRMWARE_BIOS;
		f.secure_boot = PLATFORM_SECURE_BOOT_UNSUPPORTED;
	}
	r = platform_lockdown_read(root, &f.lockdown);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		f.lockdown = PLATFORM_LOCKDOWN_UNKNOWN;
	*ret = f;
	return 0;
}

int platform_facts_to_json(const PlatformFacts *f, json_object **ret) {
	const char *v[] = { platform_firmware_to_string(f->firmware),
		            platform_secure_boot_to_string(f->secure_boot),
		            platform_lockdown_to_string(f->lockdown) };
	const char *keys[] = { "firmware", "secure_boot", "lockdown" };
	json_object *o;

	for (size_t i = 0; i < ELEMENTSOF(v); i++)
		if (!v[i])
			return -EINVAL;
	o = json_object_new_object();
	if (!o)
		return -ENOMEM;
	for (size_t i = 0; i < ELEMENTSOF(v); i++) {
		json_object *s = json_object_new_string(v[i]);

		if (!s || json_object_object_add(o, keys[i], s) < 0) {
			json_object_put(s);
			json_object_put(o);
			return -ENOMEM;
		}
	}
	*ret = o;
	return 0;
}
