/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The kept-memory readers take text the daemon does not control: /proc/iomem,
 * the mount table, libvirt's qemu.conf and command lines. Every parser must
 * take anything; the first byte picks which one sees the rest.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "memrange.h"
#include "pmem.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input as an iomem listing: its regions carved out of a fixed map. */
static void fuzz_iomem(const char *text, size_t size) {
	static const struct mem_range map[] = {
		{ 0x0, 0x9fbff, 1 },
		{ 0x100000, 0x7fffffff, 1 },
		{ 0x80000000, 0x8fffffff, 2 },
		{ 0x100000000, 0x1ffffffff, 1 },
	};
	struct mem_range pm[MEMRANGE_MAX_PMEM], out[64];
	size_t n = 0, nout = 0;

	if (memrange_parse_iomem_pmem(text, size, pm, ELEMENTSOF(pm), &n) == 0)
		(void)memrange_keep_out(map, ELEMENTSOF(map), pm, n, out, ELEMENTSOF(out), &nout);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	struct mem_range r[PMEM_MAX_MEMMAP];
	PmemMount m = {};
	char *text, *a = NULL, *b = NULL, *split;
	size_t n;

	if (size < 1)
		return 0;
	text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = 0;
	switch (data[0] % 5) {
	case 0:
		fuzz_iomem(text, size - 1);
		break;
	case 1:
		(void)pmem_memmap_parse(text, r, ELEMENTSOF(r), &n);
		split = strchr(text, '|'); /* running|staged */
		if (split)
			*split++ = 0;
		if (pmem_cmdline_carry(text, split ?: "", &a, &b) == 0) {
			free(a);
			free(b);
		}
		break;
	case 2:
		if (pmem_mountinfo_find(text, size - 1, "/var/lib/libvirt/qemu/ram", &m) == 0)
			pmem_mount_done(&m);
		break;
	case 3:
		if (pmem_qemu_conf_backing_dir(text, size - 1, &a) == 0)
			free(a);
		break;
	default:
		/* Not NUL-terminated: the parsers must respect the size. */
		fuzz_iomem((const char *)data + 1, size - 1);
		if (pmem_mountinfo_find((const char *)data + 1, size - 1, "/", &m) == 0)
			pmem_mount_done(&m);
		break;
	}
	free(text);
	return 0;
}
