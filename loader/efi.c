/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The EFI state a kexec'd kernel needs (efi.h): read from the running kernel's
 * sysfs, checked, and written into the next kernel's boot_params.
 */

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootparam.h"
#include "efi.h"
#include "fileio.h"
#include "macros.h"
#include "path-util.h"
#include "string-util.h"
#include "sysfs-util.h"

#define EFI_DIR         "/sys/firmware/efi"
#define RUNTIME_MAP_DIR EFI_DIR "/runtime-map"
#define BOOT_PARAMS     "/sys/kernel/boot_params/data"

static const char *const error_table[_EFI_ERR_MAX] = {
	[EFI_OK] = "success",
	[EFI_ERR_BOOT_PARAMS] = "/sys/kernel/boot_params/data is missing or not one page",
	[EFI_ERR_32BIT] = "the firmware is 32-bit (a 64-bit kernel cannot be kexec'd with it)",
	[EFI_ERR_SIGNATURE] = "boot_params has no EFI loader signature (EL64)",
	[EFI_ERR_SYSTAB] = "no EFI system table address, or /sys/firmware/efi/systab malformed",
	[EFI_ERR_NO_RUNTIME_MAP] = "/sys/firmware/efi/runtime-map is missing or empty",
	[EFI_ERR_RUNTIME_MAP] = "an EFI runtime-map entry is malformed, or two overlap",
	[EFI_ERR_TOO_MANY] = "the EFI runtime map has more regions than this loader passes",
	[EFI_ERR_FW_VENDOR] = "/sys/firmware/efi/fw_vendor is missing or malformed",
	[EFI_ERR_CONFIG_TABLE] = "/sys/firmware/efi/config_table is missing or malformed",
};

const char *efi_error_to_string(EfiError e) {
	return (unsigned)e < _EFI_ERR_MAX ? error_table[e] : NULL;
}

static uint32_t get_u32(const uint8_t *p, size_t off) {
	uint32_t v;

	memcpy(&v, p + off, sizeof(v));
	return le32toh(v);
}

static uint64_t get_u64(const uint8_t *p, size_t off) {
	uint64_t v;

	memcpy(&v, p + off, sizeof(v));
	return le64toh(v);
}

static void put_u32(uint8_t *p, size_t off, uint32_t v) {
	v = htole32(v);
	memcpy(p + off, &v, sizeof(v));
}

static void put_u64(uint8_t *p, size_t off, uint64_t v) {
	v = htole64(v);
	memcpy(p + off, &v, sizeof(v));
}

/* --- parsing --------------------------------------------------------------- */

int efi_systab_parse(const char *text, uint64_t *ret_acpi20, uint64_t *ret_acpi,
                     uint64_t *ret_smbios) {
	static const char *const keys[] = { "ACPI20", "ACPI", "SMBIOS" };
	uint64_t v[ELEMENTSOF(keys)] = {};
	bool seen[ELEMENTSOF(keys)] = {};
	const char *p = text;

	while (*p) {
		const char *eol = strchrnul(p, '\n'), *eq = memchr(p, '=', eol - p);
		char val[32];
		uint64_t x;
		size_t k;

		if (eol == p) { /* an empty line */
			p++;
			continue;
		}
		if (!eq || eq == p || (size_t)(eol - eq - 1) >= sizeof(val))
			return -EBADMSG;
		memcpy(val, eq + 1, eol - eq - 1);
		val[eol - eq - 1] = '\0';
		if (sysfs_parse_hex(val, &x) < 0)
			return -EBADMSG;
		for (k = 0; k < ELEMENTSOF(keys); k++)
			if (strlen(keys[k]) == (size_t)(eq - p) && !memcmp(keys[k], p, eq - p))
				break;
		for (const char *c = p; c < eq; c++) /* other keys (SMBIOS3, MPS, ...) */
			if (!((*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_'))
				return -EBADMSG;
		if (k < ELEMENTSOF(keys)) {
			if (seen[k])
				return -EBADMSG;
			seen[k] = true;
			v[k] = x;
		}
		p = *eol ? eol + 1 : eol;
	}
	*ret_acpi20 = v[0];
	*ret_acpi = v[1];
	*ret_smbios = v[2];
	return 0;
}

int efi_runtime_desc_check(const struct efi_runtime_desc *d) {
	if (d->type >= EFI_MEMORY_TYPE_MAX || !(d->attribute & EFI_MEMORY_RUNTIME))
		return -EBADMSG;
	if (d->phys % EFI_PAGE_SIZE || d->virt % EFI_PAGE_SIZE || d->pages == 0)
		return -EBADMSG;
	/* phys + pages * 4096 - 1 must not wrap, nor the virtual end. */
	if (d->pages > (UINT64_MAX - d->phys) / EFI_PAGE_SIZE ||
	    d->pages > (UINT64_MAX - d->virt) / EFI_PAGE_SIZE)
		return -EBADMSG;
	return 0;
}

/* --- reading --------------------------------------------------------------- */

static int read_hex_file(const char *root, const char *path, uint64_t *ret) {
	_cleanup_free_ char *data = NULL;
	size_t size;
	int r;

	r = read_root_file(root, path, 4096, &data, &size);
	if (r < 0)
		return r;
	if (strlen(data) != size)
		return -EBADMSG;
	strstrip(data);
	return sysfs_parse_hex(data, ret) < 0 ? -EBADMSG : 0;
}

static int read_runtime_desc(const char *dir, const char *name, struct efi_runtime_desc *d) {
	static const char *const fields[] = { "type", "phys_addr", "virt_addr", "num_pages",
		                              "attribute" };
	uint64_t v[ELEMENTSOF(fields)];
	int r;

	for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
		_cleanup_free_ char *s = NULL;

		r = sysfs_read_field(dir, name, fields[i], &s);
		if (r < 0)
			return r == -ENOENT ? -EBADMSG : r;
		if (sysfs_parse_hex(s, &v[i]) < 0)
			return -EBADMSG;
	}
	if (v[0] > UINT32_MAX)
		return -EBADMSG;
	*d = (struct efi_runtime_desc){
		.type = (uint32_t)v[0], .phys = v[1], .virt = v[2], .pages = v[3], .attribute = v[4]
	};
	return efi_runtime_desc_check(d);
}

static int cmp_desc(const void *a, const void *b) {
	const struct efi_runtime_desc *x = a, *y = b;
	return (x->phys > y->phys) - (x->phys < y->phys);
}

static bool name_is_index(const char *s) {
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

/* The runtime map, sorted by physical address; -ENOENT when absent or empty. */
static int read_runtime_map(const char *root, struct efi_state *s, EfiError *ret_error) {
	_cleanup_free_ char *dir = NULL;
	struct dirent *de;
	DIR *d;
	int r = 0;

	r = path_prefix_root(root, RUNTIME_MAP_DIR, &dir);
	if (r < 0)
		return r;
	d = opendir(dir);
	if (!d) {
		*ret_error = EFI_ERR_NO_RUNTIME_MAP;
		return -errno;
	}
	s->nr_map = 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (!name_is_index(de->d_name)) {
			*ret_error = EFI_ERR_RUNTIME_MAP;
			r = -EBADMSG;
			break;
		}
		if (s->nr_map >= EFI_RUNTIME_MAP_MAX) {
			*ret_error = EFI_ERR_TOO_MANY;
			r = -E2BIG;
			break;
		}
		r = read_runtime_desc(dir, de->d_name, &s->map[s->nr_map]);
		if (r < 0) {
			*ret_error = EFI_ERR_RUNTIME_MAP;
			break;
		}
		s->nr_map++;
	}
	closedir(d);
	if (r < 0)
		return r;
	if (s->nr_map == 0) {
		*ret_error = EFI_ERR_NO_RUNTIME_MAP;
		return -ENOENT;
	}
	qsort(s->map, s->nr_map, sizeof(s->map[0]), cmp_desc);
	for (size_t i = 1; i < s->nr_map; i++)
		if (s->map[i - 1].phys + s->map[i - 1].pages * EFI_PAGE_SIZE > s->map[i].phys) {
			*ret_error = EFI_ERR_RUNTIME_MAP;
			return -EBADMSG;
		}
	return 0;
}

/* efi_info, secure_boot and acpi_rsdp_addr of the running kernel's boot_params. */
static int read_boot_params(const char *root, struct efi_state *s, EfiError *ret_error) {
	_cleanup_free_ char *data = NULL;
	const uint8_t *bp;
	size_t size;
	int r;

	r = read_root_file(root, BOOT_PARAMS, 2 * BOOT_PARAMS_SIZE, &data, &size);
	if (r < 0 || size != BOOT_PARAMS_SIZE) {
		*ret_error = EFI_ERR_BOOT_PARAMS;
		return r < 0 ? r : -EBADMSG;
	}
	bp = (const uint8_t *)data;
	s->loader_signature = get_u32(bp, BP_EFI_LOADER_SIGNATURE);
	if (s->loader_signature == EFI_LOADER_SIGNATURE_32) {
		*ret_error = EFI_ERR_32BIT;
		return -EOPNOTSUPP;
	}
	if (s->loader_signature != EFI_LOADER_SIGNATURE_64) {
		*ret_error = EFI_ERR_SIGNATURE;
		return -EBADMSG;
	}
	s->systab = get_u32(bp, BP_EFI_SYSTAB) | (uint64_t)get_u32(bp, BP_EFI_SYSTAB_HI) << 32;
	if (s->systab == 0) {
		*ret_error = EFI_ERR_SYSTAB;
		return -EBADMSG;
	}
	s->memdesc_version = get_u32(bp, BP_EFI_MEMDESC_VERSION) ?: EFI_MEMDESC_VERSION;
	s->secure_boot = bp[BP_SECURE_BOOT];
	s->acpi_rsdp = get_u64(bp, BP_ACPI_RSDP_ADDR);
	return 0;
}

/* fw_platform_size, the system table's ACPI and SMBIOS addresses, fw_vendor, config_table. */
static int read_efi_dir(const char *root, struct efi_state *s, EfiError *ret_error) {
	_cleanup_free_ char *text = NULL, *bits = NULL;
	uint64_t acpi20, acpi;
	size_t size;
	int r;

	if (read_root_file(root, EFI_DIR "/fw_platform_size", 64, &bits, &size) >= 0 &&
	    !streq(strstrip(bits), "64")) {
		*ret_error = EFI_ERR_32BIT;
		return -EOPNOTSUPP;
	}
	r = read_root_file(root, EFI_DIR "/systab", 4096, &text, &size);
	if (r >= 0 && strlen(text) != size)
		r = -EBADMSG;
	if (r >= 0)
		r = efi_systab_parse(text, &acpi20, &acpi, &s->smbios);
	if (r < 0) {
		*ret_error = EFI_ERR_SYSTAB;
		return r;
	}
	if (s->acpi_rsdp == 0)
		s->acpi_rsdp = acpi20 ?: acpi;
	r = read_hex_file(root, EFI_DIR "/fw_vendor", &s->fw_vendor);
	if (r < 0) {
		*ret_error = EFI_ERR_FW_VENDOR;
		return r;
	}
	r = read_hex_file(root, EFI_DIR "/config_table", &s->config_table);
	if (r < 0 || s->config_table == 0) {
		*ret_error = EFI_ERR_CONFIG_TABLE;
		return r < 0 ? r : -EBADMSG;
	}
	return 0;
}

int efi_state_read(const char *root, struct efi_state *ret, EfiError *ret_error) {
	EfiError e = EFI_OK;
	int r;

	*ret = (struct efi_state){};
	r = read_runtime_map(root, ret, &e);
	if (r >= 0)
		r = read_boot_params(root, ret, &e);
	if (r >= 0)
		r = read_efi_dir(root, ret, &e);
	if (ret_error)
		*ret_error = e;
	return r;
}

/* --- writing --------------------------------------------------------------- */

size_t efi_params_size(const struct efi_state *s) {
	return s->nr_map * EFI_MEMDESC_SIZE + SETUP_DATA_HEADER_SIZE + EFI_SETUP_DATA_SIZE;
}

void efi_params_write(const struct efi_state *s, uint8_t *zp, uint64_t zp_mem, size_t off) {
	size_t map_size = s->nr_map * EFI_MEMDESC_SIZE, sd = off + map_size;
	uint64_t map_mem = zp_mem + off;

	for (size_t i = 0; i < s->nr_map; i++) {
		uint8_t *d = zp + off + i * EFI_MEMDESC_SIZE;

		memset(d, 0, EFI_MEMDESC_SIZE);
		put_u32(d, 0, s->map[i].type);
		put_u64(d, 8, s->map[i].phys);
		put_u64(d, 16, s->map[i].virt);
		put_u64(d, 24, s->map[i].pages);
		put_u64(d, 32, s->map[i].attribute);
	}
	put_u32(zp, BP_EFI_LOADER_SIGNATURE, s->loader_signature);
	put_u32(zp, BP_EFI_SYSTAB, (uint32_t)s->systab);
	put_u32(zp, BP_EFI_SYSTAB_HI, (uint32_t)(s->systab >> 32));
	put_u32(zp, BP_EFI_MEMDESC_SIZE, EFI_MEMDESC_SIZE);
	put_u32(zp, BP_EFI_MEMDESC_VERSION, s->memdesc_version);
	put_u32(zp, BP_EFI_MEMMAP, (uint32_t)map_mem);
	put_u32(zp, BP_EFI_MEMMAP_HI, (uint32_t)(map_mem >> 32));
	put_u32(zp, BP_EFI_MEMMAP_SIZE, (uint32_t)map_size);
	zp[BP_SECURE_BOOT] = s->secure_boot;
	put_u64(zp, BP_ACPI_RSDP_ADDR, s->acpi_rsdp);

	/* struct setup_data { next, type, len } + struct efi_setup_data, at the list's head. */
	memset(zp + sd, 0, SETUP_DATA_HEADER_SIZE + EFI_SETUP_DATA_SIZE);
	put_u64(zp, sd, get_u64(zp, BP_SETUP_DATA));
	put_u32(zp, sd + 8, SETUP_EFI);
	put_u32(zp, sd + 12, EFI_SETUP_DATA_SIZE);
	put_u64(zp, sd + SETUP_DATA_HEADER_SIZE + 0, s->fw_vendor);
	put_u64(zp, sd + SETUP_DATA_HEADER_SIZE + 16, s->config_table);
	put_u64(zp, sd + SETUP_DATA_HEADER_SIZE + 24, s->smbios);
	put_u64(zp, BP_SETUP_DATA, zp_mem + sd);
}
