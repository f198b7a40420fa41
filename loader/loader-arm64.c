/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The arm64 path of loader_image_build() (docs/loader.md, "arm64"): the Image,
 * the running kernel's device tree with /chosen rewritten, placement by the
 * boot protocol (Documentation/arch/arm64/booting.rst) in the RAM /proc/iomem
 * names, outside everything reserved, and the purgatory with its parameters.
 * Stage time does everything; the commit is loader_image_load()'s one syscall.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "arm64-fdt.h"
#include "arm64-image.h"
#include "arm64-memory.h"
#include "loader-internal.h"
#include "macros.h"
#include "placer.h"

#define SZ_2M             ((uint64_t)2 << 20)
#define SZ_1G             ((uint64_t)1 << 30)
/* booting.rst: the initrd lies in a 1 GiB aligned window of up to 32 GiB that covers
 * the kernel Image too; the DTB goes in the same window (as kexec-tools' arm64 does). */
#define ARM64_WINDOW_SIZE ((uint64_t)32 << 30)
/* arm64's COMMAND_LINE_SIZE, with the NUL. */
#define ARM64_CMDLINE_MAX 2048
#define ARM64_INITRD_MAX  ((uint64_t)2 << 30)
/* Segments the loader blocks as it places them, beyond the machine's own blockers. */
#define ARM64_PLACED_MAX  8

#define FAIL(err, errno_value)              \
	do {                                \
		if (ret_error)              \
			*ret_error = (err); \
		return (errno_value);       \
	} while (0)

struct arm64_build {
	const struct loader_options *o;
	struct loader_image *img;
	uint8_t *fdt;
	struct arm64_memory *mem;
	struct placer *pl;
	uint64_t window_lo, window_hi; /* [lo, hi) */
	size_t field_off;              /* the stamps field in the command line */
};

static void arm64_build_done(struct arm64_build *b) {
	free(b->fdt);
	free(b->mem);
	free(b->pl);
}

/* 1. The kernel (inflated when wrapped, validated) and the initrd. */
static int read_images(struct arm64_build *b, LoaderError *ret_error) {
	struct loader_image *img = b->img;
	Arm64ImageError e;
	int r;

	r = loader_read_fd_all(b->o->kernel_fd, ARM64_IMAGE_MAX_SIZE, &img->kernel_file,
	                       &img->kernel_file_size);
	if (r == -EFBIG) {
		if (b->o->ret_arm64_image_error)
			*b->o->ret_arm64_image_error = ARM64_IMAGE_ERR_TOO_LARGE;
		FAIL(LOADER_ERR_ARM64_IMAGE, -EFBIG);
	}
	if (r < 0)
		FAIL(LOADER_ERR_READ, r);
	e = arm64_image_unwrap_parse(&img->kernel_file, &img->kernel_file_size, &img->arm64);
	if (b->o->ret_arm64_image_error)
		*b->o->ret_arm64_image_error = e;
	if (e != ARM64_IMAGE_OK)
		FAIL(LOADER_ERR_ARM64_IMAGE, arm64_image_error_to_errno(e));
	if (b->o->initrd_fd >= 0) {
		r = loader_read_fd_all(b->o->initrd_fd, ARM64_INITRD_MAX, &img->initrd,
		                       &img->initrd_size);
		if (r < 0)
			FAIL(LOADER_ERR_READ, r);
	}
	return 0;
}

/* 2. The device tree and the memory: RAM from /proc/iomem (the DT's /memory when it
 * names none), blocked where the old kernel, the firmware or the crash kernel keep
 * memory: iomem's "reserved", the DT's /memreserve/ and /reserved-memory. */
static int read_machine(struct arm64_build *b, LoaderError *ret_error) {
	struct mem_range dt_rsv[ARM64_FDT_MAX_RANGES];
	size_t nr_dt_rsv = 0, fdt_size;
	Arm64FdtError fe;
	int r;

	r = arm64_fdt_read(b->o->root, &b->fdt, &fdt_size, &fe);
	if (r < 0)
		FAIL(fe == ARM64_FDT_ERR_TOO_LARGE ? LOADER_ERR_DTB_TOO_LARGE
		     : fe == ARM64_FDT_ERR_READ    ? LOADER_ERR_DTB_READ
		                                   : LOADER_ERR_DTB_INVALID,
		     r);
	b->mem = calloc(1, sizeof(*b->mem));
	b->pl = calloc(1, sizeof(*b->pl));
	if (!b->mem || !b->pl)
		return -ENOMEM;
	r = arm64_memory_read_iomem(b->o->root, b->mem);
	if (r == -E2BIG)
		FAIL(LOADER_ERR_TOO_MANY_RANGES, r);
	if (r == -EPERM)
		FAIL(LOADER_ERR_IOMEM, r);
	if (r < 0)
		FAIL(LOADER_ERR_IOMEM, -EBADMSG);
	if (b->mem->nr_ram == 0 && arm64_fdt_memory(b->fdt, b->mem->ram, ARM64_MEMORY_MAX_RAM,
	                                            &b->mem->nr_ram) != ARM64_FDT_OK)
		FAIL(LOADER_ERR_TOO_MANY_RANGES, -E2BIG);
	if (b->mem->nr_ram == 0)
		FAIL(LOADER_ERR_IOMEM, -EBADMSG);
	if (b->o->panic && b->mem->nr_crash == 0)
		FAIL(LOADER_ERR_NO_CRASH_RESERVATION, -ENOENT);
	if (arm64_fdt_reserved(b->fdt, dt_rsv, ELEMENTSOF(dt_rsv), &nr_dt_rsv) != ARM64_FDT_OK)
		FAIL(LOADER_ERR_TOO_MANY_RANGES, -E2BIG);
	arm64_memory_digest(b->mem, b->img->memmap_digest);

	if (b->mem->nr_reserved + nr_dt_rsv + b->mem->nr_crash + ARM64_PLACED_MAX >
	    PLACER_MAX_BLOCKERS)
		FAIL(LOADER_ERR_TOO_MANY_RANGES, -E2BIG);
	b->pl->ram = b->o->panic ? b->mem->crash : b->mem->ram;
	b->pl->nr_ram = b->o->panic ? b->mem->nr_crash : b->mem->nr_ram;
	for (size_t i = 0; i < b->mem->nr_reserved; i++)
		placer_block(b->pl, b->mem->reserved[i].start, b->mem->reserved[i].end);
	for (size_t i = 0; i < nr_dt_rsv; i++)
		placer_block(b->pl, dt_rsv[i].start, dt_rsv[i].end);
	if (!b->o->panic)
		for (size_t i = 0; i < b->mem->nr_crash; i++)
			placer_block(b->pl, b->mem->crash[i].start, b->mem->crash[i].end);
	return 0;
}

static void set_segment(struct arm64_build *b, int idx, const void *buf, size_t bufsz, uint64_t mem,
                        uint64_t memsz) {
	b->img->segments[idx] =
	        (struct loader_segment){ .buf = buf, .bufsz = bufsz, .mem = mem, .memsz = memsz };
	placer_block(b->pl, mem, mem + memsz - 1);
}

/* 3. The kernel: text_offset above a 2 MiB aligned base, image_size free from there;
 * the lowest such place (what a kernel without ARM64_IMAGE_FLAG_PHYS_ANY asks for).
 * It fixes the window the initrd and the DTB must share with it. */
static int place_kernel(struct arm64_build *b, LoaderError *ret_error) {
	const struct arm64_image_info *k = &b->img->arm64;
	uint64_t memsz = loader_align_up(k->image_size, LOADER_PAGE_SIZE), base;

	if (!placer_find(b->pl, k->text_offset + memsz, SZ_2M, 0, UINT64_MAX, false, &base))
		FAIL(LOADER_ERR_NO_ROOM_KERNEL, -ENOSPC);
	set_segment(b, LOADER_SEG_KERNEL, b->img->kernel_file, b->img->kernel_file_size,
	            base + k->text_offset, memsz);
	b->window_lo = base & ~(SZ_1G - 1);
	b->window_hi = b->window_lo + ARM64_WINDOW_SIZE;
	if (b->window_hi < b->window_lo)
		b->window_hi = UINT64_MAX;
	return 0;
}

/* 4. The initrd, as high as the window allows; 5. a panic image's ELF core header,
 * in the reservation (placement there is the placer's RAM already). */
static int place_initrd_elfcorehdr(struct arm64_build *b, LoaderError *ret_error) {
	struct loader_image *img = b->img;
	uint64_t addr, memsz;
	size_t size;
	int r;

	if (img->initrd_size > 0) {
		memsz = loader_align_up(img->initrd_size, LOADER_PAGE_SIZE);
		if (!placer_find(b->pl, memsz, LOADER_PAGE_SIZE, b->window_lo, b->window_hi, true,
		                 &addr))
			FAIL(LOADER_ERR_NO_ROOM_INITRD, -ENOSPC);
		set_segment(b, LOADER_SEG_INITRD, img->initrd, img->initrd_size, addr, memsz);
	}
	if (!b->o->panic)
		return 0;
	r = arm64_memory_elfcorehdr(b->o->root, b->mem, &img->elfcorehdr, &size);
	if (r == -E2BIG)
		FAIL(LOADER_ERR_TOO_MANY_RANGES, r);
	if (r < 0)
		return r;
	memsz = loader_align_up(size, LOADER_PAGE_SIZE);
	if (!placer_find(b->pl, memsz, LOADER_PAGE_SIZE, 0, UINT64_MAX, true, &addr))
		FAIL(LOADER_ERR_NO_ROOM_ELFCOREHDR, -ENOSPC);
	set_segment(b, LOADER_SEG_ELFCOREHDR, img->elfcorehdr, size, addr, memsz);
	return 0;
}

/* 6. The DTB: the running one with /chosen rewritten, in the window, within one 2 MiB
 * block (booting.rst: 8-byte aligned, at most 2 MiB, mapped in blocks of 2 MiB). */
static int build_place_dtb(struct arm64_build *b, LoaderError *ret_error) {
	struct loader_image *img = b->img;
	const struct loader_segment *rd = &img->segments[LOADER_SEG_INITRD];
	const struct loader_segment *eh = &img->segments[LOADER_SEG_ELFCOREHDR];
	struct arm64_fdt_chosen c = {
		.bootargs = img->cmdline,
		.initrd_start = rd->bufsz ? rd->mem : 0,
		.initrd_end = rd->bufsz ? rd->mem + rd->bufsz : 0,
		.panic = b->o->panic,
		.elfcorehdr_addr = eh->mem,
		.elfcorehdr_size = eh->bufsz,
		.usable = b->mem->crash,
		.nr_usable = b->mem->nr_crash,
	};
	uint64_t addr, memsz, align = LOADER_PAGE_SIZE;
	size_t bootargs_off;
	Arm64FdtError fe;

	if (getrandom(c.kaslr_seed, sizeof(c.kaslr_seed), 0) != sizeof(c.kaslr_seed) ||
	    getrandom(c.rng_seed, sizeof(c.rng_seed), 0) != sizeof(c.rng_seed))
		return -EIO;
	fe = arm64_fdt_rewrite(b->fdt, &c, &img->params_seg, &img->params_seg_size, &bootargs_off);
	explicit_bzero(&c, sizeof(c));
	if (fe != ARM64_FDT_OK)
		FAIL(fe == ARM64_FDT_ERR_TOO_LARGE ? LOADER_ERR_DTB_TOO_LARGE
		                                   : LOADER_ERR_DTB_INVALID,
		     fe == ARM64_FDT_ERR_TOO_LARGE ? -EFBIG : -EBADMSG);
	memsz = loader_align_up(img->params_seg_size, LOADER_PAGE_SIZE);
	while (align < memsz)
		align <<= 1; /* aligned to its own size <= 2 MiB: never across a 2 MiB block */
	if (!placer_find(b->pl, memsz, align, b->window_lo, b->window_hi, true, &addr))
		FAIL(LOADER_ERR_NO_ROOM_DTB, -ENOSPC);
	set_segment(b, LOADER_SEG_DTB, img->params_seg, img->params_seg_size, addr, memsz);
	/* Where purgatory writes the stamps: inside bootargs, in the DTB segment. */
	b->field_off = bootargs_off + b->field_off;
	return 0;
}

/* 7. Purgatory, in the window, with its parameters: the kernel's entry and x0 (the
 * DTB), the stamps field inside bootargs, the console, reset and CPUs from the DT; 8. the
 * digests of every other segment. */
static int build_purgatory(struct arm64_build *b, LoaderError *ret_error) {
	struct loader_image *img = b->img;
	struct loader_segment digested[_LOADER_SEG_MAX];
	struct arm64_fdt_platform plat;
	struct arm64_fdt_cpus cpus;
	struct purgatory_params *pp;
	const uint8_t *blob;
	size_t blob_size, n = 0;
	uint64_t addr, memsz;

	if (loader_purgatory_blob(LOADER_ARCH_ARM64, &blob, &blob_size) < 0)
		FAIL(LOADER_ERR_ARCH_UNSUPPORTED, -EOPNOTSUPP);
	if (blob_size < PURGATORY_PARAMS_OFFSET + sizeof(*pp))
		return -EINVAL;
	memsz = loader_align_up(blob_size, LOADER_PAGE_SIZE);
	img->purgatory_seg = calloc(1, memsz);
	if (!img->purgatory_seg)
		return -ENOMEM;
	memcpy(img->purgatory_seg, blob, blob_size);
	if (!placer_find(b->pl, memsz, LOADER_PAGE_SIZE, b->window_lo, b->window_hi, true, &addr))
		FAIL(LOADER_ERR_NO_ROOM_PURGATORY, -ENOSPC);
	set_segment(b, LOADER_SEG_PURGATORY, img->purgatory_seg, blob_size, addr, memsz);
	img->entry = addr;

	arm64_fdt_platform(img->params_seg, &plat);
	pp = (struct purgatory_params *)(img->purgatory_seg + PURGATORY_PARAMS_OFFSET);
	*pp = (struct purgatory_params){
		.magic = PURGATORY_ABI_MAGIC,
		.abi_version = PURGATORY_ABI_VERSION,
		.size = sizeof(*pp),
		.entry_pc = img->segments[LOADER_SEG_KERNEL].mem,
		.entry_x0 = img->segments[LOADER_SEG_DTB].mem,
		.mode = handoff_mode_to_purgatory(b->o->mode),
		.flags = b->o->panic ? PURGATORY_FLAG_PANIC : 0,
		.stamps_addr = img->segments[LOADER_SEG_DTB].mem + b->field_off,
		.stamps_len = PURGATORY_STAMPS_FIELD_LEN_ARM64,
		.console_kind = plat.console_kind,
		.console_base = plat.console_base,
		.reset_method = plat.reset_method,
	};
	/* The other CPUs hash too, except for a panic image: at a crash they were
	 * stopped, not turned off, so PSCI cannot start them (one CPU). */
	arm64_fdt_cpus(img->params_seg, &cpus);
	if (!b->o->panic && cpus.nr > 1) {
		pp->psci_conduit = cpus.psci_conduit;
		pp->nr_cpus = cpus.nr;
		memcpy(pp->cpu_mpidr, cpus.mpidr, sizeof(pp->cpu_mpidr));
	}
	for (int i = 0; i < _LOADER_SEG_MAX; i++)
		if (i != LOADER_SEG_PURGATORY)
			digested[n++] = img->segments[i];
	return loader_params_set_digests(pp, digested, n);
}

int loader_image_build_arm64(const struct loader_options *o, struct loader_image *img,
                             LoaderError *ret_error) {
	_cleanup_(arm64_build_done) struct arm64_build b = { .o = o, .img = img };
	LoaderError lerr = LOADER_OK;
	const uint8_t *blob;
	size_t blob_size;
	int r;

	/* A build carries its own architecture's purgatory only: refuse before any work. */
	if (loader_purgatory_blob(LOADER_ARCH_ARM64, &blob, &blob_size) < 0)
		FAIL(LOADER_ERR_ARCH_UNSUPPORTED, -EOPNOTSUPP);
	/* 1. The kernel and the initrd. */
	r = read_images(&b, ret_error);
	if (r < 0)
		return r;
	/* The command line (bootargs) with the stamps placeholder; no x86 CPU word. */
	r = loader_build_cmdline(o, "", PURGATORY_STAMPS_TEMPLATE_ARM64, ARM64_CMDLINE_MAX - 1,
	                         &img->cmdline, &b.field_off, &lerr);
	if (r < 0)
		FAIL(lerr, r);
	/* 2. The device tree and the memory. */
	r = read_machine(&b, ret_error);
	if (r < 0)
		return r;
	/* 3. to 6. The kernel, the initrd, the ELF core header, the DTB. */
	r = place_kernel(&b, ret_error);
	if (r < 0)
		return r;
	r = place_initrd_elfcorehdr(&b, ret_error);
	if (r < 0)
		return r;
	r = build_place_dtb(&b, ret_error);
	if (r < 0)
		return r;
	/* 7. and 8. Purgatory, its parameters and the digests. */
	return build_purgatory(&b, ret_error);
}

int loader_arm64_memory_map_digest(const char *root, uint8_t ret[static SHA256_DIGEST_SIZE]) {
	_cleanup_free_ struct arm64_memory *m = calloc(1, sizeof(*m));
	int r;

	if (!m)
		return -ENOMEM;
	r = arm64_memory_read_iomem(root, m);
	if (r < 0)
		return r;
	arm64_memory_digest(m, ret);
	return 0;
}
