/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The kexec segment builder and the kexec_load call. Stage time does all the
 * work (read, validate, place, hash) so that the commit path is one syscall.
 */

#include <dirent.h>
#include <errno.h>
#include <linux/kexec.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "boot-cpu.h"
#include "bootparam.h"
#include "efi.h"
#include "fileio.h"
#include "kernel-cmdline.h"
#include "loader-internal.h"
#include "loader.h"
#include "machine-memory.h"
#include "macros.h"
#include "memrange.h"
#include "path-util.h"
#include "placer.h"
#include "platform.h"
#include "sha256.h"
#include "string-util.h"

#define PAGE_SIZE              LOADER_PAGE_SIZE
#define LOW_MEMORY_END         PLACER_LOW_MEMORY_END
#define LOW_RAM_CRASH_END      0xa0000ULL   /* the crash kernel gets the first 640 KiB */
#define KERNEL_MIN_ADDR        0x1000000ULL /* search for the kernel from 16 MiB */
#define FOUR_GIB               0x100000000ULL
#define LOADER_INITRD_MAX_SIZE (2ULL << 30)
#define MEMMAP_MAX_RANGES      MEMRANGE_MAX_RANGES

static const char *const unusable_table[_LOADER_UNUSABLE_MAX] = {
	[LOADER_USABLE] = "kexec_load can be used",
	[LOADER_UNUSABLE_LOCKDOWN] =
	        "kernel lockdown (integrity or confidentiality) forbids kexec_load",
	[LOADER_UNUSABLE_EFI_NO_RUNTIME_MAP] =
	        "EFI-booted host without /sys/firmware/efi/runtime-map (EFI state unknown)",
	[LOADER_UNUSABLE_EFI_32BIT] = "EFI-booted host with 32-bit firmware (mixed mode)",
	[LOADER_UNUSABLE_EFI_STATE] =
	        "EFI-booted host whose EFI state (runtime map, systab) is malformed",
	[LOADER_UNUSABLE_LOAD_DISABLED] = "kexec_load is disabled (kernel.kexec_load_disabled=1)",
};

static const char *const error_table[_LOADER_ERR_MAX] = {
	[LOADER_OK] = "success",
	[LOADER_ERR_BZIMAGE] = "the kernel image is not a valid x86_64 bzImage",
	[LOADER_ERR_READ] = "the kernel or initrd could not be read",
	[LOADER_ERR_MEMMAP] =
	        "the firmware memory map (/sys/firmware/memmap) is missing or malformed",
	[LOADER_ERR_TOO_MANY_E820] = "the memory map has more ranges than boot_params can hold",
	[LOADER_ERR_CMDLINE_TOO_LONG] = "the command line is longer than the new kernel accepts",
	[LOADER_ERR_CMDLINE_INVALID] =
	        "the command line has control characters, a \"--\" or upgraded.stamps=",
	[LOADER_ERR_NO_ROOM_KERNEL] = "no free RAM at the kernel's alignment for its init_size",
	[LOADER_ERR_NO_ROOM_INITRD] = "no free RAM below initrd_addr_max for the initrd",
	[LOADER_ERR_NO_ROOM_PARAMS] =
	        "no free RAM below 4 GiB for boot_params and the command line",
	[LOADER_ERR_NO_ROOM_PURGATORY] = "no free RAM below 4 GiB for purgatory",
	[LOADER_ERR_NO_CRASH_RESERVATION] = "no crashkernel= reservation for a panic image",
	[LOADER_ERR_PANIC_NOT_VERIFIED] = "a panic image is always verified: fast mode refused",
	[LOADER_ERR_EFI_STATE] = "the EFI state the next kernel needs is missing or malformed",
	[LOADER_ERR_PMEM_HIDDEN] =
	        "/proc/iomem hides the persistent memory's addresses (read without CAP_SYS_ADMIN)",
	[LOADER_ERR_ARCH_UNSUPPORTED] =
	        "this build carries no purgatory for that architecture (build on or for it)",
	[LOADER_ERR_ARM64_IMAGE] = "the kernel image is not a valid arm64 Image",
	[LOADER_ERR_DTB_READ] =
	        "the running kernel's device tree (/sys/firmware/fdt) is missing or unreadable",
	[LOADER_ERR_DTB_INVALID] = "the running kernel's device tree is malformed",
	[LOADER_ERR_DTB_TOO_LARGE] =
	        "the device tree exceeds the 2 MiB the arm64 boot protocol allows",
	[LOADER_ERR_IOMEM] = "no System RAM in /proc/iomem nor /memory in the device tree",
	[LOADER_ERR_TOO_MANY_RANGES] = "more RAM or reserved ranges than the loader handles",
	[LOADER_ERR_NO_ROOM_DTB] =
	        "no free RAM for the device tree in the kernel's 32 GiB window (one 2 MiB block)",
	[LOADER_ERR_NO_ROOM_ELFCOREHDR] =
	        "no room for the ELF core header in the crash kernel reservation",
};

static const char *const arch_table[_LOADER_ARCH_MAX] = {
	[LOADER_ARCH_X86_64] = "x86_64",
	[LOADER_ARCH_ARM64] = "arm64",
};

const char *loader_arch_to_string(LoaderArch a) {
	if (a == LOADER_ARCH_DEFAULT)
		a = LOADER_ARCH_NATIVE;
	return (unsigned)a < _LOADER_ARCH_MAX ? arch_table[a] : NULL;
}

LoaderArch loader_arch_from_string(const char *s) {
	if (!s)
		return _LOADER_ARCH_INVALID;
	if (streq(s, "aarch64"))
		return LOADER_ARCH_ARM64;
	for (int a = LOADER_ARCH_X86_64; a < _LOADER_ARCH_MAX; a++)
		if (streq(s, arch_table[a]))
			return a;
	return _LOADER_ARCH_INVALID;
}

const char *loader_unusable_to_string(LoaderUnusable u) {
	return (unsigned)u < _LOADER_UNUSABLE_MAX ? unusable_table[u] : NULL;
}

const char *loader_error_to_string(LoaderError e) {
	return (unsigned)e < _LOADER_ERR_MAX ? error_table[e] : NULL;
}

int loader_error_to_errno(LoaderError e) {
	switch (e) {
	case LOADER_OK:
		return 0;
	case LOADER_ERR_READ:
		return -EIO;
	case LOADER_ERR_BZIMAGE:
	case LOADER_ERR_MEMMAP:
	case LOADER_ERR_EFI_STATE:
	case LOADER_ERR_ARM64_IMAGE:
	case LOADER_ERR_DTB_INVALID:
	case LOADER_ERR_IOMEM:
		return -EBADMSG;
	case LOADER_ERR_DTB_READ:
		return -ENOENT;
	case LOADER_ERR_DTB_TOO_LARGE:
		return -EFBIG;
	case LOADER_ERR_ARCH_UNSUPPORTED:
		return -EOPNOTSUPP;
	case LOADER_ERR_TOO_MANY_RANGES:
		return -E2BIG;
	case LOADER_ERR_CMDLINE_TOO_LONG:
		return -E2BIG;
	case LOADER_ERR_CMDLINE_INVALID:
	case LOADER_ERR_PANIC_NOT_VERIFIED:
		return -EINVAL;
	case LOADER_ERR_NO_CRASH_RESERVATION:
		return -ENOENT;
	case LOADER_ERR_PMEM_HIDDEN:
		return -EPERM;
	default:
		return -ENOSPC;
	}
}

/* --- helpers --------------------------------------------------------------- */

#define align_up loader_align_up

static void put_u8(uint8_t *p, size_t off, uint8_t v) {
	p[off] = v;
}

static void put_u32(uint8_t *p, size_t off, uint32_t v) {
	for (int i = 0; i < 4; i++)
		p[off + i] = v >> (8 * i);
}

static void put_u64(uint8_t *p, size_t off, uint64_t v) {
	put_u32(p, off, (uint32_t)v);
	put_u32(p, off + 4, (uint32_t)(v >> 32));
}

/* Reads root-prefixed path into a stripped string. */
static int read_one_line(const char *root, const char *path, char **ret) {
	_cleanup_free_ char *data = NULL;
	size_t size;
	int r;

	r = read_root_file(root, path, 64 * 1024, &data, &size);
	if (r < 0)
		return r;
	strstrip(data);
	*ret = TAKE_PTR(data);
	return 0;
}

static bool path_exists_root(const char *root, const char *path) {
	_cleanup_free_ char *p = NULL;

	return path_prefix_root(root, path, &p) >= 0 && access(p, F_OK) == 0;
}

int loader_read_fd_all(int fd, uint64_t max, uint8_t **ret, size_t *ret_size) {
	_cleanup_free_ uint8_t *buf = NULL;
	struct stat st;
	size_t got = 0;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EBADFD;
	if ((uint64_t)st.st_size > max)
		return -EFBIG;
	buf = malloc(MAX((size_t)st.st_size, (size_t)1));
	if (!buf)
		return -ENOMEM;
	while (got < (size_t)st.st_size) {
		ssize_t n = pread(fd, buf + got, st.st_size - got, got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO; /* shrank while reading */
		got += n;
	}
	*ret = TAKE_PTR(buf);
	*ret_size = got;
	return 0;
}

/* --- usability ------------------------------------------------------------- */

int loader_check_usable(const char *root, LoaderUnusable *ret_reason) {
	_cleanup_free_ char *disabled = NULL;
	PlatformLockdown lockdown;
	int r;

	r = platform_lockdown_read(root, &lockdown);
	if (r < 0)
		return r;
	if (lockdown == PLATFORM_LOCKDOWN_INTEGRITY ||
	    lockdown == PLATFORM_LOCKDOWN_CONFIDENTIALITY) {
		*ret_reason = LOADER_UNUSABLE_LOCKDOWN;
		return 0;
	}

	r = read_one_line(root, "/proc/sys/kernel/kexec_load_disabled", &disabled);
	if (r < 0 && r != -ENOENT)
		return r;
	if (disabled && streq(disabled, "1")) {
		*ret_reason = LOADER_UNUSABLE_LOAD_DISABLED;
		return 0;
	}

	/* x86_64's EFI handover needs the runtime map; arm64 passes the EFI state on in the
	 * device tree's /chosen, which the loader keeps as it is. */
	if (LOADER_ARCH_NATIVE == LOADER_ARCH_X86_64 &&
	    path_exists_root(root, "/sys/firmware/efi")) {
		_cleanup_free_ struct efi_state *efi = malloc(sizeof(*efi));
		EfiError e;

		if (!efi)
			return -ENOMEM;
		r = efi_state_read(root, efi, &e);
		if (r == -ENOMEM)
			return r;
		*ret_reason = r >= 0                        ? LOADER_USABLE
		              : e == EFI_ERR_NO_RUNTIME_MAP ? LOADER_UNUSABLE_EFI_NO_RUNTIME_MAP
		              : e == EFI_ERR_32BIT          ? LOADER_UNUSABLE_EFI_32BIT
		                                            : LOADER_UNUSABLE_EFI_STATE;
		return 0;
	}

	*ret_reason = LOADER_USABLE;
	return 0;
}

int loader_is_loaded(const char *root, bool panic) {
	_cleanup_free_ char *v = NULL;
	int r;

	r = read_one_line(
	        root, panic ? "/sys/kernel/kexec_crash_loaded" : "/sys/kernel/kexec_loaded", &v);
	if (r < 0)
		return r;
	return streq(v, "1");
}

/* --- the memory map (the machine's side: machine-memory.c) ----------------- */

static int cmp_range(const void *a, const void *b) {
	const struct mem_range *x = a, *y = b;
	return (x->start > y->start) - (x->start < y->start);
}

const uint8_t *loader_image_memory_map_digest(const struct loader_image *img) {
	return img->memmap_digest;
}

/* --- building -------------------------------------------------------------- */

/* On an EFI boot (root/sys/firmware/efi), img->efi read, and its runtime regions
 * typed reserved in *map wherever *map says RAM. */
static int read_efi(const char *root, struct loader_image *img, struct mem_range **map, size_t *n) {
	struct mem_range keep[EFI_RUNTIME_MAP_MAX];
	int r;

	if (!path_exists_root(root, "/sys/firmware/efi"))
		return 0;
	img->efi = malloc(sizeof(*img->efi));
	if (!img->efi)
		return -ENOMEM;
	r = efi_state_read(root, img->efi, NULL);
	if (r < 0)
		return r == -E2BIG ? -EBADMSG : r;
	for (size_t i = 0; i < img->efi->nr_map; i++) {
		const struct efi_runtime_desc *d = &img->efi->map[i];

		keep[i] = (struct mem_range){ d->phys, d->phys + d->pages * EFI_PAGE_SIZE - 1,
			                      E820_TYPE_RESERVED };
	}
	return memrange_keep_out_map(map, n, keep, img->efi->nr_map);
}

/* disable_cpu_apicid=<BSP> and a blank, or "" (boot-cpu.h): a crash image always names the
 * BSP; any other image when this kernel does not run on it. */
static void boot_cpu_word(const struct loader_options *o,
                          char buf[static sizeof(BOOT_CPU_PARAM_MAX)]) {
	BootCpu b;

	buf[0] = '\0';
	if (boot_cpu_read(o->root, &b) < 0 || !b.known)
		return;
	if (o->panic || boot_cpu_parked(&b))
		snprintf(buf, sizeof(BOOT_CPU_PARAM_MAX), BOOT_CPU_PARAM "%u ", b.bsp);
}

int loader_build_cmdline(const struct loader_options *o, const char *extra, const char *template,
                         size_t max, char **ret, size_t *ret_field_offset, LoaderError *ret_error) {
	const char *user = o->cmdline ?: "";
	_cleanup_free_ char *s = NULL;
	int n;

	/* Our words go after the caller's: after a "--" the kernel would give them to init. */
	if (string_has_cc(user) || strstr(user, PURGATORY_STAMPS_KEY) ||
	    kernel_cmdline_has_init_separator(user)) {
		*ret_error = LOADER_ERR_CMDLINE_INVALID;
		return -EINVAL;
	}
	n = asprintf(&s, "%s%s%s%s%s%s", user, *user ? " " : "", extra,
	             o->panic ? LOADER_PANIC_CMDLINE_MARK " " : LOADER_HANDOFF_CMDLINE_MARK " ",
	             PURGATORY_STAMPS_KEY, template);
	if (n < 0)
		return -ENOMEM;
	if ((size_t)n > max) {
		*ret_error = LOADER_ERR_CMDLINE_TOO_LONG;
		return -E2BIG;
	}
	*ret_field_offset = (size_t)n - strlen(template);
	*ret = TAKE_PTR(s);
	return 0;
}

static int build_cmdline(const struct loader_options *o, const struct bzimage_info *bz, char **ret,
                         size_t *ret_field_offset, LoaderError *ret_error) {
	char cpu[sizeof(BOOT_CPU_PARAM_MAX)];

	boot_cpu_word(o, cpu);
	return loader_build_cmdline(o, cpu, PURGATORY_STAMPS_TEMPLATE, bz->cmdline_size, ret,
	                            ret_field_offset, ret_error);
}

/* The e820 table the new kernel sees: the firmware map, or for a panic image
 * the first 640 KiB and the crash reservation as RAM plus every non-RAM range
 * (ACPI tables, NVS, reserved) as it is. */
static int fill_e820(uint8_t *zp, const struct mem_range *map, size_t n,
                     const struct mem_range *crash, size_t nr_crash, bool panic) {
	struct mem_range out[E820_MAX_ENTRIES_ZEROPAGE + 1];
	size_t k = 0;

	if (panic) {
		out[k++] = (struct mem_range){ 0, LOW_RAM_CRASH_END - 1, E820_TYPE_RAM };
		for (size_t i = 0; i < nr_crash && k <= E820_MAX_ENTRIES_ZEROPAGE; i++)
			out[k++] = crash[i];
	}
	for (size_t i = 0; i < n && k <= E820_MAX_ENTRIES_ZEROPAGE; i++)
		if (!panic || map[i].type != E820_TYPE_RAM)
			out[k++] = map[i];
	if (k > E820_MAX_ENTRIES_ZEROPAGE)
		return -E2BIG;
	qsort(out, k, sizeof(out[0]), cmp_range);

	put_u8(zp, BP_E820_ENTRIES, (uint8_t)k);
	for (size_t i = 0; i < k; i++) {
		size_t off = BP_E820_TABLE + i * E820_ENTRY_SIZE;
		put_u64(zp, off, out[i].start);
		put_u64(zp, off + 8, out[i].end - out[i].start + 1);
		put_u32(zp, off + 16, out[i].type);
	}
	return 0;
}

struct loader_image *loader_image_free(struct loader_image *img) {
	if (!img)
		return NULL;
	free(img->kernel_file);
	free(img->initrd);
	free(img->params_seg);
	free(img->purgatory_seg);
	free(img->efi);
	free(img->elfcorehdr);
	if (img->arch == LOADER_ARCH_ARM64)
		free(img->cmdline);
	free(img);
	return NULL;
}

static void loader_image_freep(struct loader_image **img) {
	loader_image_free(*img);
}

#define FAIL(err, errno_value)              \
	do {                                \
		if (ret_error)              \
			*ret_error = (err); \
		return (errno_value);       \
	} while (0)

/* Step 1 of loader_image_build(): the kernel, read and validated, and the initrd. */
static int read_images(const struct loader_options *o, struct loader_image *img,
                       LoaderError *ret_error, BzImageError *ret_bzimage_error) {
	BzImageError be;
	int r;

	/* 1. The kernel, validated; the initrd. */
	r = loader_read_fd_all(o->kernel_fd, BZIMAGE_MAX_SIZE, &img->kernel_file,
	                       &img->kernel_file_size);
	if (r == -EFBIG) {
		if (ret_bzimage_error)
			*ret_bzimage_error = BZIMAGE_ERR_TOO_LARGE;
		FAIL(LOADER_ERR_BZIMAGE, -EFBIG);
	}
	if (r < 0)
		FAIL(LOADER_ERR_READ, r);
	be = bzimage_parse(img->kernel_file, img->kernel_file_size, &img->bz);
	if (ret_bzimage_error)
		*ret_bzimage_error = be;
	if (be != BZIMAGE_OK)
		FAIL(LOADER_ERR_BZIMAGE, bzimage_error_to_errno(be));
	if (o->initrd_fd >= 0) {
		r = loader_read_fd_all(o->initrd_fd, LOADER_INITRD_MAX_SIZE, &img->initrd,
		                       &img->initrd_size);
		if (r < 0)
			FAIL(LOADER_ERR_READ, r);
	}
	return 0;
}

/* Steps 4 and 5 of loader_image_build(): the kernel and the initrd placed in RAM. */
static int place_kernel_initrd(struct loader_image *img, struct placer *pl,
                               LoaderError *ret_error) {
	uint64_t kernel_memsz, addr;

	/* 4. The kernel: pref_address when free, else the lowest aligned hole
	 * (below 4 GiB first). It needs init_size bytes from its load address. */
	kernel_memsz = align_up(MAX((uint64_t)img->bz.init_size, img->bz.kernel_size), PAGE_SIZE);
	if (placer_fits(pl, img->bz.pref_address, kernel_memsz, LOW_MEMORY_END, UINT64_MAX))
		addr = img->bz.pref_address;
	else if (!placer_find(pl, kernel_memsz, img->bz.kernel_alignment, KERNEL_MIN_ADDR, FOUR_GIB,
	                      false, &addr) &&
	         !placer_find(pl, kernel_memsz, img->bz.kernel_alignment, LOW_MEMORY_END,
	                      img->bz.can_load_above_4g ? UINT64_MAX : FOUR_GIB, false, &addr))
		FAIL(LOADER_ERR_NO_ROOM_KERNEL, -ENOSPC);
	img->segments[LOADER_SEG_KERNEL] = (struct loader_segment){
		.buf = img->kernel_file + img->bz.kernel_offset,
		.bufsz = img->bz.kernel_size,
		.mem = addr,
		.memsz = kernel_memsz,
	};
	placer_block(pl, addr, addr + kernel_memsz - 1);
	img->entry = addr; /* until purgatory is placed */

	/* 5. The initrd: as high as allowed, ending at or below initrd_addr_max. */
	if (img->initrd_size > 0) {
		uint64_t memsz = align_up(img->initrd_size, PAGE_SIZE);

		if (!placer_find(pl, memsz, PAGE_SIZE, LOW_MEMORY_END,
		                 (uint64_t)img->bz.initrd_addr_max + 1, true, &addr))
			FAIL(LOADER_ERR_NO_ROOM_INITRD, -ENOSPC);
		img->segments[LOADER_SEG_INITRD] = (struct loader_segment){
			.buf = img->initrd, .bufsz = img->initrd_size, .mem = addr, .memsz = memsz
		};
		placer_block(pl, addr, addr + memsz - 1);
	}
	return 0;
}

/* Step 6 of loader_image_build(): boot_params (the zero page) with the e820 table of
 * map and crash, followed by the command line, placed below 4 GiB. */
static int build_params(const struct loader_options *o, struct loader_image *img, struct placer *pl,
                        const struct mem_range *map, size_t nr_map, const struct mem_range *crash,
                        size_t nr_crash, const char *cmdline, LoaderError *ret_error) {
	size_t cmdline_len = strlen(cmdline);
	uint64_t addr;
	uint8_t *zp;

	/* 6. boot_params (zero page) followed by the command line, and on an EFI boot the
	 * EFI memory map and the SETUP_EFI entry (efi.h), below 4 GiB. */
	img->params_seg_size = BOOT_PARAMS_SIZE + cmdline_len + 1;
	if (img->efi) {
		img->efi_offset = align_up(img->params_seg_size, 8);
		img->params_seg_size = img->efi_offset + efi_params_size(img->efi);
	}
	img->params_seg = calloc(1, img->params_seg_size);
	if (!img->params_seg)
		return -ENOMEM;
	{
		uint64_t memsz = align_up(img->params_seg_size, PAGE_SIZE);

		if (!placer_find(pl, memsz, PAGE_SIZE, LOW_MEMORY_END, FOUR_GIB, true, &addr))
			FAIL(LOADER_ERR_NO_ROOM_PARAMS, -ENOSPC);
		img->segments[LOADER_SEG_PARAMS] =
		        (struct loader_segment){ .buf = img->params_seg,
			                         .bufsz = img->params_seg_size,
			                         .mem = addr,
			                         .memsz = memsz };
		placer_block(pl, addr, addr + memsz - 1);
	}
	zp = img->params_seg;
	memcpy(zp + BP_SETUP_SECTS, img->kernel_file + BP_SETUP_SECTS,
	       img->bz.header_end - BP_SETUP_SECTS);
	put_u8(zp, BP_TYPE_OF_LOADER, TYPE_OF_LOADER_UNDEFINED);
	put_u8(zp, BP_LOADFLAGS, LOADFLAG_LOADED_HIGH);
	{
		uint64_t cl = img->segments[LOADER_SEG_PARAMS].mem + BOOT_PARAMS_SIZE;
		const struct loader_segment *rd = &img->segments[LOADER_SEG_INITRD];

		put_u32(zp, BP_CMD_LINE_PTR, (uint32_t)cl);
		put_u32(zp, BP_EXT_CMD_LINE_PTR, (uint32_t)(cl >> 32));
		put_u32(zp, BP_RAMDISK_IMAGE, (uint32_t)rd->mem);
		put_u32(zp, BP_EXT_RAMDISK_IMAGE, (uint32_t)(rd->mem >> 32));
		put_u32(zp, BP_RAMDISK_SIZE, (uint32_t)rd->bufsz);
		put_u32(zp, BP_EXT_RAMDISK_SIZE, (uint32_t)((uint64_t)rd->bufsz >> 32));
	}
	if (fill_e820(zp, map, nr_map, crash, nr_crash, o->panic) < 0)
		FAIL(LOADER_ERR_TOO_MANY_E820, -E2BIG);
	img->cmdline = (char *)zp + BOOT_PARAMS_SIZE;
	memcpy(img->cmdline, cmdline, cmdline_len + 1);
	if (img->efi)
		efi_params_write(img->efi, zp, img->segments[LOADER_SEG_PARAMS].mem,
		                 img->efi_offset);
	return 0;
}

/* Steps 7 and 8 of loader_image_build(): purgatory placed, with its parameters and the
 * digests of every other segment; field_off is where the stamps go in the command line. */
static int build_purgatory(const struct loader_options *o, struct loader_image *img,
                           struct placer *pl, size_t field_off, LoaderError *ret_error) {
	struct purgatory_params *pp;
	const uint8_t *blob;
	size_t blob_size;
	uint64_t addr;
	int r;

	/* 7. Purgatory with its parameters; entry is purgatory's first byte. */
	if (loader_purgatory_blob(LOADER_ARCH_X86_64, &blob, &blob_size) < 0)
		FAIL(LOADER_ERR_ARCH_UNSUPPORTED, -EOPNOTSUPP);
	img->purgatory_seg = calloc(1, align_up(blob_size, PAGE_SIZE));
	if (!img->purgatory_seg)
		return -ENOMEM;
	memcpy(img->purgatory_seg, blob, blob_size);
	{
		uint64_t memsz = align_up(blob_size, PAGE_SIZE);

		if (!placer_find(pl, memsz, PAGE_SIZE, LOW_MEMORY_END, FOUR_GIB, true, &addr))
			FAIL(LOADER_ERR_NO_ROOM_PURGATORY, -ENOSPC);
		img->segments[LOADER_SEG_PURGATORY] = (struct loader_segment){
			.buf = img->purgatory_seg, .bufsz = blob_size, .mem = addr, .memsz = memsz
		};
		placer_block(pl, addr, addr + memsz - 1);
	}
	img->entry = img->segments[LOADER_SEG_PURGATORY].mem;

	pp = (struct purgatory_params *)(img->purgatory_seg + PURGATORY_PARAMS_OFFSET);
	*pp = (struct purgatory_params){
		.magic = PURGATORY_ABI_MAGIC,
		.abi_version = PURGATORY_ABI_VERSION,
		.size = sizeof(*pp),
		.entry_rip = img->segments[LOADER_SEG_KERNEL].mem + KERNEL_ENTRY64_OFFSET,
		.entry_rsi = img->segments[LOADER_SEG_PARAMS].mem,
		.mode = handoff_mode_to_purgatory(o->mode),
		.flags = o->panic ? PURGATORY_FLAG_PANIC : 0,
		.stamps_addr = img->segments[LOADER_SEG_PARAMS].mem + BOOT_PARAMS_SIZE + field_off,
		.stamps_len = PURGATORY_STAMPS_FIELD_LEN,
		.console_port = o->console_port,
	};

	/* 8. Digests of every segment but purgatory (which carries them): the
	 * file part in chunks; purgatory checks the rest to memsz for zeros. */
	r = loader_params_set_digests(pp, img->segments, LOADER_SEG_PURGATORY);
	if (r < 0)
		return r;
	return 0;
}

/* Steps 1 to 8 for an x86_64 bzImage into img. */
static int build_x86_64(const struct loader_options *o, struct loader_image *img,
                        LoaderError *ret_error, BzImageError *ret_bzimage_error) {
	_cleanup_free_ struct mem_range *map = NULL;
	_cleanup_free_ char *cmdline = NULL;
	_cleanup_free_ struct placer *pl = NULL;
	struct mem_range crash[8], ram[MEMMAP_MAX_RANGES];
	size_t nr_map = 0, nr_crash = 0, nr_ram = 0, field_off = 0;
	LoaderError lerr = LOADER_OK;
	int r;

	/* 1. The kernel, validated; the initrd. */
	r = read_images(o, img, ret_error, ret_bzimage_error);
	if (r < 0)
		return r;

	/* 2. The command line with the stamps placeholder. */
	r = build_cmdline(o, &img->bz, &cmdline, &field_off, &lerr);
	if (r < 0)
		FAIL(lerr, r);

	/* 3. Where RAM is: the firmware map, or the crash reservation. */
	r = memrange_read_memmap(o->root, o->memmap_dir, &map, &nr_map);
	if (r < 0)
		FAIL(LOADER_ERR_MEMMAP, r == -ENOENT ? -ENOENT : -EBADMSG);
	/* The crash reservation: the panic image's RAM, and for a normal image
	 * where not to go (a panic image lives there). For a normal image an
	 * unreadable /proc/iomem only means we cannot tell. */
	r = machine_memory_read_crash(o->root, crash, ELEMENTSOF(crash), &nr_crash);
	if (o->panic && r < 0 && r != -ENOENT)
		FAIL(LOADER_ERR_NO_CRASH_RESERVATION, r);
	if (o->panic && nr_crash == 0)
		FAIL(LOADER_ERR_NO_CRASH_RESERVATION, -ENOENT);
	/* Same inputs as loader_memory_map_digest(): the map and the reservation. */
	machine_memory_digest(map, nr_map, crash, nr_crash, img->memmap_digest);
	/* Persistent memory is RAM in the firmware map (memmap=!): out of it. */
	r = machine_memory_keep_persistent(o->root, o->memmap_dir, &map, &nr_map);
	if (r == -EPERM)
		FAIL(LOADER_ERR_PMEM_HIDDEN, r);
	if (r < 0)
		FAIL(LOADER_ERR_TOO_MANY_E820, r);
	/* An EFI boot: what the next kernel needs of the firmware, its runtime regions
	 * out of the RAM. */
	r = read_efi(o->root, img, &map, &nr_map);
	if (r == -E2BIG)
		FAIL(LOADER_ERR_TOO_MANY_E820, r);
	if (r < 0)
		FAIL(LOADER_ERR_EFI_STATE, r);
	if (o->panic) {
		memcpy(ram, crash, nr_crash * sizeof(crash[0]));
		nr_ram = nr_crash;
	} else
		for (size_t i = 0; i < nr_map; i++)
			if (map[i].type == E820_TYPE_RAM)
				ram[nr_ram++] = map[i];

	r = machine_memory_new_placer(o, map, nr_map, crash, nr_crash, ram, nr_ram, &pl);
	if (r == -E2BIG)
		FAIL(LOADER_ERR_TOO_MANY_E820, r);
	if (r < 0)
		return r;

	/* 4. and 5. The kernel and the initrd. */
	r = place_kernel_initrd(img, pl, ret_error);
	if (r < 0)
		return r;
	/* 6. boot_params and the command line. */
	r = build_params(o, img, pl, map, nr_map, crash, nr_crash, cmdline, ret_error);
	if (r < 0)
		return r;
	/* 7. and 8. Purgatory, its parameters and the digests. */
	return build_purgatory(o, img, pl, field_off, ret_error);
}

int loader_image_build(const struct loader_options *o, struct loader_image **ret_image,
                       LoaderError *ret_error, BzImageError *ret_bzimage_error) {
	_cleanup_(loader_image_freep) struct loader_image *img = NULL;
	int r;

	if (!o || !ret_image || o->kernel_fd < 0 || (unsigned)o->arch >= _LOADER_ARCH_MAX)
		return -EINVAL;
	if (o->panic && o->mode != HANDOFF_MODE_VERIFIED)
		FAIL(LOADER_ERR_PANIC_NOT_VERIFIED, -EINVAL);

	img = calloc(1, sizeof(*img));
	if (!img)
		return -ENOMEM;
	img->panic = o->panic;
	img->arch = o->arch == LOADER_ARCH_DEFAULT ? LOADER_ARCH_NATIVE : o->arch;
	if (img->arch == LOADER_ARCH_ARM64)
		r = loader_image_build_arm64(o, img, ret_error);
	else
		r = build_x86_64(o, img, ret_error, ret_bzimage_error);
	if (r < 0)
		return r;

	img->nr_segments = _LOADER_SEG_MAX;
	if (ret_error)
		*ret_error = LOADER_OK;
	*ret_image = TAKE_PTR(img);
	return 0;
}

size_t loader_image_segments(const struct loader_image *img,
                             const struct loader_segment **ret_segments) {
	*ret_segments = img->segments;
	return img->nr_segments;
}

uint64_t loader_image_entry(const struct loader_image *img) {
	return img->entry;
}

const struct purgatory_params *loader_image_params(const struct loader_image *img) {
	return (const struct purgatory_params *)(img->purgatory_seg + PURGATORY_PARAMS_OFFSET);
}

const char *loader_image_cmdline(const struct loader_image *img) {
	return img->cmdline;
}

const struct bzimage_info *loader_image_bzimage(const struct loader_image *img) {
	return img->arch == LOADER_ARCH_X86_64 ? &img->bz : NULL;
}

const struct arm64_image_info *loader_image_arm64(const struct loader_image *img) {
	return img->arch == LOADER_ARCH_ARM64 ? &img->arm64 : NULL;
}

LoaderArch loader_image_arch(const struct loader_image *img) {
	return img->arch;
}

const char *loader_image_release(const struct loader_image *img) {
	return img->arch == LOADER_ARCH_ARM64 ? img->arm64.release : img->bz.release;
}

static unsigned long kexec_arch_flags(LoaderArch arch) {
	return arch == LOADER_ARCH_ARM64 ? KEXEC_ARCH_AARCH64 : KEXEC_ARCH_X86_64;
}

int loader_image_set_mode(struct loader_image *img, HandoffMode mode) {
	struct purgatory_params *pp =
	        (struct purgatory_params *)(img->purgatory_seg + PURGATORY_PARAMS_OFFSET);

	if (mode != HANDOFF_MODE_VERIFIED && mode != HANDOFF_MODE_FAST)
		return -EINVAL;
	/* The panic path always verifies: no way to turn it off after the build either. */
	if (img->panic && mode != HANDOFF_MODE_VERIFIED)
		return loader_error_to_errno(LOADER_ERR_PANIC_NOT_VERIFIED);
	pp->mode = handoff_mode_to_purgatory(mode);
	return 0;
}

bool loader_image_is_panic(const struct loader_image *img) {
	return img->panic;
}

void loader_image_corrupt_digest_for_test(struct loader_image *img) {
	struct purgatory_params *pp =
	        (struct purgatory_params *)(img->purgatory_seg + PURGATORY_PARAMS_OFFSET);

	pp->chunk_sha256[pp->segments[LOADER_SEG_KERNEL].first_chunk][0] ^= 0x01;
}

/* --- the syscall ----------------------------------------------------------- */

int loader_image_load(const struct loader_image *img) {
	struct kexec_segment segs[_LOADER_SEG_MAX];
	unsigned long flags = kexec_arch_flags(img->arch) | (img->panic ? KEXEC_ON_CRASH : 0);
	size_t n = 0;

	if (img->arch != LOADER_ARCH_NATIVE)
		return -EOPNOTSUPP;
	for (size_t i = 0; i < img->nr_segments; i++) {
		if (img->segments[i].memsz == 0)
			continue;
		segs[n++] = (struct kexec_segment){
			.buf = img->segments[i].buf,
			.bufsz = img->segments[i].bufsz,
			.mem = (const void *)(uintptr_t)img->segments[i].mem,
			.memsz = img->segments[i].memsz,
		};
	}
	if (syscall(SYS_kexec_load, (unsigned long)img->entry, (unsigned long)n, segs, flags) < 0)
		return -errno;
	return 0;
}

int loader_unload(bool panic) {
	unsigned long flags = kexec_arch_flags(LOADER_ARCH_NATIVE) | (panic ? KEXEC_ON_CRASH : 0);

	if (syscall(SYS_kexec_load, 0UL, 0UL, NULL, flags) < 0)
		return -errno;
	return 0;
}
