/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The EFI state the loader passes a kexec'd kernel (loader/efi.c) comes from the
 * running kernel's sysfs: the systab text and the runtime map's numbers. The
 * first byte picks what sees the rest:
 *   0  the rest as /sys/firmware/efi/systab text;
 *   1  the rest as runtime regions (40 bytes each: type, phys, virt, pages,
 *      attribute), the accepted ones written into a zero page sized exactly for
 *      them, whose efi_info and setup_data must then describe them;
 *  2  the rest as /proc/cpuinfo text, 3 as /proc/cmdline (loader/boot-cpu.c: which CPU
 *      the machine booted on, for the disable_cpu_apicid= word of the next kernel).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot-cpu.h"
#include "bootparam.h"
#include "efi.h"
#include "macros.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t get_u64(const uint8_t *p) {
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static void fuzz_regions(const uint8_t *data, size_t size) {
	struct efi_state *s = calloc(1, sizeof(*s));
	uint8_t *zp;
	size_t off = BOOT_PARAMS_SIZE + 3, total;
	uint32_t v;

	if (!s)
		return;
	for (size_t i = 0; i + EFI_MEMDESC_SIZE <= size && s->nr_map < EFI_RUNTIME_MAP_MAX;
	     i += EFI_MEMDESC_SIZE) {
		struct efi_runtime_desc d;

		memcpy(&v, data + i, sizeof(v));
		d = (struct efi_runtime_desc){ .type = v,
			                       .phys = get_u64(data + i + 8),
			                       .virt = get_u64(data + i + 16),
			                       .pages = get_u64(data + i + 24),
			                       .attribute = get_u64(data + i + 32) };
		if (efi_runtime_desc_check(&d) == 0)
			s->map[s->nr_map++] = d;
	}
	off = (off + 7) & ~(size_t)7;
	total = off + efi_params_size(s);
	zp = calloc(1, total);
	if (zp) {
		efi_params_write(s, zp, 0x10000, off);
		memcpy(&v, zp + BP_EFI_MEMMAP_SIZE, sizeof(v));
		if (v != s->nr_map * EFI_MEMDESC_SIZE ||
		    get_u64(zp + BP_SETUP_DATA) != 0x10000 + off + v)
			abort();
	}
	free(zp);
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	uint64_t a, b, c;
	uint32_t v;
	char *text;

	if (size < 1)
		return 0;
	if (data[0] == 1) {
		fuzz_regions(data + 1, size - 1);
		return 0;
	}
	text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	if (data[0] == 2)
		(void)boot_cpu_parse_cpuinfo(text, &v);
	else if (data[0] == 3 && boot_cpu_parse_cmdline(text, &v) == 0) {
		/* What the loader appends must read back as the same CPU. */
		char word[sizeof(BOOT_CPU_PARAM_MAX)];
		uint32_t back;

		snprintf(word, sizeof(word), BOOT_CPU_PARAM "%u", v);
		if (boot_cpu_parse_cmdline(word, &back) != 0 || back != v)
			abort();
	} else
		(void)efi_systab_parse(text, &a, &b, &c);
	free(text);
	return 0;
}
