/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The arm64 loader's inputs from disk (loader/arm64-image.c, arm64-fdt.c,
 * arm64-memory.c). The first byte picks what sees the rest:
 *   0  an arm64 kernel file: the bare Image, Image.gz or EFI zboot (inflated within
 *      the size limit), then its header;
 *   1  the running kernel's device tree (/sys/firmware/fdt): checked whole, asked
 *      for /memory, the reservations, the console and PSCI, then rewritten as for a
 *      panic image, and the result must pass libfdt's full check with our bootargs;
 *   2  /proc/iomem text, and the ELF core header built from what it names.
 */
#include <libfdt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arm64-fdt.h"
#include "arm64-image.h"
#include "arm64-memory.h"
#include "macros.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_image(const uint8_t *data, size_t size) {
	uint8_t *buf = malloc(MAX(size, (size_t)1));
	struct arm64_image_info info;

	if (!buf)
		return;
	memcpy(buf, data, size);
	if (arm64_image_unwrap_parse(&buf, &size, &info) == ARM64_IMAGE_OK) {
		if (info.image_size < info.file_size ||
		    info.text_offset >= ARM64_IMAGE_BASE_ALIGN ||
		    strlen(info.release) >= ARM64_IMAGE_RELEASE_MAX)
			abort();
	}
	(void)arm64_image_sniff(data, size);
	free(buf);
}

static void fuzz_fdt(const uint8_t *data, size_t size) {
	static const struct mem_range usable[] = { { 0xa0000000, 0xafffffff, 0 } };
	struct mem_range r[ARM64_FDT_MAX_RANGES];
	struct arm64_fdt_platform plat;
	struct arm64_fdt_cpus cpus;
	struct arm64_fdt_chosen c = { .bootargs = "console=ttyAMA0 upgraded.panic=1",
		                      .initrd_start = 0x48000000,
		                      .initrd_end = 0x48100000,
		                      .panic = true,
		                      .elfcorehdr_addr = 0xaff00000,
		                      .elfcorehdr_size = 0x1000,
		                      .usable = usable,
		                      .nr_usable = ELEMENTSOF(usable) };
	uint8_t *copy = malloc(MAX(size, (size_t)8)), *out = NULL;
	size_t n, out_size, off;

	if (!copy)
		return;
	/* libfdt reads the blob in place: aligned, as the kernel's is. */
	memcpy(copy, data, size);
	if (arm64_fdt_check(copy, size) != ARM64_FDT_OK)
		goto out;
	(void)arm64_fdt_memory(copy, r, ELEMENTSOF(r), &n);
	(void)arm64_fdt_reserved(copy, r, ELEMENTSOF(r), &n);
	arm64_fdt_platform(copy, &plat);
	arm64_fdt_cpus(copy, &cpus);
	if (cpus.nr > PURGATORY_MAX_CPUS ||
	    (cpus.nr > 0 && cpus.psci_conduit == PURGATORY_PSCI_NONE))
		abort();
	if (arm64_fdt_rewrite(copy, &c, &out, &out_size, &off) == ARM64_FDT_OK) {
		if (out_size > ARM64_FDT_MAX_SIZE || fdt_check_full(out, out_size) != 0 ||
		    off >= out_size || strcmp((const char *)out + off, c.bootargs) != 0)
			abort();
		free(out);
	}
out:
	free(copy);
}

static void fuzz_iomem(const uint8_t *data, size_t size) {
	struct arm64_memory *m = calloc(1, sizeof(*m));
	uint8_t *hdr = NULL;
	size_t hdr_size;

	if (!m)
		return;
	if (arm64_memory_parse_iomem((const char *)data, size, m) == 0 &&
	    arm64_memory_elfcorehdr("/nonexistent", m, &hdr, &hdr_size) == 0)
		free(hdr);
	free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	if (size < 1)
		return 0;
	switch (data[0] % 3) {
	case 0:
		fuzz_image(data + 1, size - 1);
		break;
	case 1:
		fuzz_fdt(data + 1, size - 1);
		break;
	default:
		fuzz_iomem(data + 1, size - 1);
	}
	return 0;
}
