/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The arm64 path of loader_image_build() against a temporary root: QEMU virt's own
 * device tree (tests/fixtures/arm64-virt, from -M virt,dumpdtb) with the UEFI
 * properties, a /memreserve/ entry and a /reserved-memory child added, and a crafted
 * /proc/iomem. Every /chosen property is read back with libfdt; no segment may touch
 * what is reserved or the crash kernel's region; impossible layouts are refused by
 * name. The purgatory blob is this build's when it is arm64's, else a stand-in of the
 * right size (purgatory's own tests cover the blob).
 */

#include <elf.h>
#include <libfdt.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "arm64-test-util.h"
#include "fileio.h"
#include "loader.h"
#include "macros.h"
#include "path-util.h"
#include "purgatory-abi.h"
#include "purgatory-standin.h"

#define UEFI_SYSTAB   UINT64_C(0xbf5d0018)
#define UEFI_MMAP     UINT64_C(0xbe6a4018)
#define MEMRESERVE_AT UINT64_C(0x41c00000) /* where the kernel would go */
#define MEMRESERVE_SZ UINT64_C(0x00400000)
#define RSVMEM_AT     UINT64_C(0xbc000000) /* where the initrd and DTB would go */
#define RSVMEM_SZ     UINT64_C(0x01c00000)
#define CRASH_START   UINT64_C(0xa0000000)
#define CRASH_END     UINT64_C(0xafffffff)
#define INITRD_BYTES  (200 * 1024 + 3)

static const char iomem_virt[] = "09000000-09000fff : pl011@9000000\n"
                                 "40000000-bfffffff : System RAM\n"
                                 "  40210000-4164ffff : Kernel code\n"
                                 "  41650000-41a6ffff : reserved\n"
                                 "  41a70000-41f6ffff : Kernel data\n"
                                 "  a0000000-afffffff : Crash kernel\n"
                                 "  bdc00000-bfbfffff : reserved\n"
                                 "  bfc00000-bfffffff : reserved\n";

struct ctx {
	char root[64];
	int kernel_fd, initrd_fd;
};

static void write_at(const char *root, const char *path, const void *data, size_t size) {
	_cleanup_free_ char *p = NULL, *dir = NULL;

	assert_int_equal(path_prefix_root(root, path, &p), 0);
	dir = strdup(p);
	*strrchr(dir, '/') = '\0';
	assert_int_equal(mkdir_p(dir, 0755), 0);
	assert_int_equal(write_file_atomic(p, data, size, 0644), 0);
}

/* The fixture's DT with the UEFI properties an EFI stub adds, a /memreserve/ entry
 * and a /reserved-memory child, written to root's /sys/firmware/fdt. */
static void write_fdt(const char *root) {
	_cleanup_free_ char *in = NULL;
	_cleanup_free_ uint8_t *out = NULL;
	size_t size, room;
	int chosen, rm, child;

	assert_int_equal(read_file_full(ARM64_FIXTURE_DIR "/sys/firmware/fdt", 1 << 21, &in, &size),
	                 0);
	room = size + 4096;
	out = calloc(1, room);
	assert_int_equal(fdt_open_into(in, out, room), 0);
	chosen = fdt_path_offset(out, "/chosen");
	assert_true(chosen >= 0);
	assert_int_equal(fdt_setprop_u64(out, chosen, "linux,uefi-system-table", UEFI_SYSTAB), 0);
	assert_int_equal(fdt_setprop_u64(out, chosen, "linux,uefi-mmap-start", UEFI_MMAP), 0);
	assert_int_equal(fdt_setprop_u32(out, chosen, "linux,uefi-mmap-size", 0x1230), 0);
	assert_int_equal(fdt_setprop_u32(out, chosen, "linux,uefi-mmap-desc-size", 0x30), 0);
	assert_int_equal(fdt_setprop_u32(out, chosen, "linux,uefi-mmap-desc-ver", 1), 0);
	assert_int_equal(fdt_add_mem_rsv(out, MEMRESERVE_AT, MEMRESERVE_SZ), 0);
	rm = fdt_add_subnode(out, 0, "reserved-memory");
	assert_true(rm >= 0);
	assert_int_equal(fdt_setprop_u32(out, rm, "#address-cells", 2), 0);
	assert_int_equal(fdt_setprop_u32(out, rm, "#size-cells", 2), 0);
	assert_int_equal(fdt_setprop(out, rm, "ranges", NULL, 0), 0);
	child = fdt_add_subnode(out, rm, "carveout@bc000000");
	assert_true(child >= 0);
	assert_int_equal(fdt_appendprop_addrrange(out, rm, child, "reg", RSVMEM_AT, RSVMEM_SZ), 0);
	assert_int_equal(fdt_setprop(out, child, "no-map", NULL, 0), 0);
	assert_int_equal(fdt_pack(out), 0);
	write_at(root, "/sys/firmware/fdt", out, fdt_totalsize(out));
}

/* The kaslr-seed QEMU put in the fixture. */
static const void *fixture_kaslr_seed(void) {
	static char *blob;
	size_t size;
	const void *p;
	int node;

	if (!blob)
		assert_int_equal(read_file_full(ARM64_FIXTURE_DIR "/sys/firmware/fdt", 1 << 21,
		                                &blob, &size),
		                 0);
	node = fdt_path_offset(blob, "/chosen");
	p = fdt_getprop(blob, node, "kaslr-seed", NULL);
	assert_non_null(p);
	return p;
}

/* Rewrites root's /sys/firmware/fdt with stdout-path given through an alias, the way
 * firmware often writes it: "serial0:115200n8". */
static void write_fdt_alias(const char *root) {
	_cleanup_free_ char *in = NULL, *path = NULL;
	_cleanup_free_ uint8_t *out = NULL;
	size_t size;
	int aliases;

	assert_int_equal(path_prefix_root(root, "/sys/firmware/fdt", &path), 0);
	assert_int_equal(read_file_full(path, 1 << 21, &in, &size), 0);
	out = calloc(1, size + 1024);
	assert_int_equal(fdt_open_into(in, out, size + 1024), 0);
	aliases = fdt_add_subnode(out, 0, "aliases");
	assert_true(aliases >= 0);
	assert_int_equal(fdt_setprop_string(out, aliases, "serial0", "/pl011@9000000"), 0);
	assert_int_equal(fdt_setprop_string(out, fdt_path_offset(out, "/chosen"), "stdout-path",
	                                    "serial0:115200n8"),
	                 0);
	assert_int_equal(fdt_pack(out), 0);
	write_at(root, "/sys/firmware/fdt", out, fdt_totalsize(out));
}

/* Rewrites root's /sys/firmware/fdt with more CPUs under /cpus (the fixture has
 * cpu@0 and cpu@1): cpu@2 disabled, cpu@3 by spin-table, cpu@100 (MPIDR Aff1 = 1)
 * by PSCI, then `extra` more PSCI CPUs; psci_compat replaces /psci's compatible
 * when given. */
static void write_fdt_cpus(const char *root, unsigned extra, const char *psci_compat) {
	static const struct {
		const char *name;
		uint32_t reg;
		const char *method, *status;
	} add[] = {
		{ "cpu@2", 2, "psci", "disabled" },
		{ "cpu@3", 3, "spin-table", NULL },
		{ "cpu@100", 0x100, "psci", "okay" },
	};
	_cleanup_free_ char *in = NULL, *path = NULL;
	_cleanup_free_ uint8_t *out = NULL;
	size_t size, room;
	int cpus, node;

	assert_int_equal(path_prefix_root(root, "/sys/firmware/fdt", &path), 0);
	assert_int_equal(read_file_full(path, 1 << 21, &in, &size), 0);
	room = size + 1024 + 128 * extra;
	out = calloc(1, room);
	assert_int_equal(fdt_open_into(in, out, room), 0);
	cpus = fdt_path_offset(out, "/cpus");
	assert_true(cpus >= 0);
	for (size_t i = 0; i < ELEMENTSOF(add) + extra; i++) {
		char name[32];

		if (i < ELEMENTSOF(add))
			snprintf(name, sizeof(name), "%s", add[i].name);
		else
			snprintf(name, sizeof(name), "cpu@%zx", 0x10000 + i);
		node = fdt_add_subnode(out, cpus, name);
		assert_true(node >= 0);
		assert_int_equal(fdt_setprop_string(out, node, "device_type", "cpu"), 0);
		assert_int_equal(fdt_setprop_u32(out, node, "reg",
		                                 i < ELEMENTSOF(add) ? add[i].reg : 0x10000 + i),
		                 0);
		assert_int_equal(fdt_setprop_string(out, node, "enable-method",
		                                    i < ELEMENTSOF(add) ? add[i].method : "psci"),
		                 0);
		if (i < ELEMENTSOF(add) && add[i].status)
			assert_int_equal(fdt_setprop_string(out, node, "status", add[i].status), 0);
	}
	if (psci_compat)
		assert_int_equal(fdt_setprop_string(out, fdt_path_offset(out, "/psci"),
		                                    "compatible", psci_compat),
		                 0);
	assert_int_equal(fdt_pack(out), 0);
	write_at(root, "/sys/firmware/fdt", out, fdt_totalsize(out));
}

static int open_tmp(const void *data, size_t size) {
	char path[] = "/tmp/test-arm64-XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(write_all(fd, data, size), 0);
	return fd;
}

static int setup(void **state) {
	struct ctx *c = calloc(1, sizeof(*c));
	uint8_t img[TEST_IMAGE_FILE_SIZE];
	_cleanup_free_ uint8_t *rd = malloc(INITRD_BYTES);

	strcpy(c->root, "/tmp/test-arm64-root-XXXXXX");
	assert_non_null(mkdtemp(c->root));
	write_fdt(c->root);
	write_at(c->root, "/proc/iomem", iomem_virt, strlen(iomem_virt));
	test_make_image(img);
	c->kernel_fd = open_tmp(img, sizeof(img));
	memset(rd, 0x5a, INITRD_BYTES);
	c->initrd_fd = open_tmp(rd, INITRD_BYTES);
	*state = c;
	return 0;
}

static int teardown(void **state) {
	struct ctx *c = *state;
	char cmd[128];

	close(c->kernel_fd);
	close(c->initrd_fd);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", c->root);
	assert_int_equal(system(cmd), 0);
	free(c);
	return 0;
}

static int build(struct ctx *c, bool panic, bool initrd, struct loader_image **ret,
                 LoaderError *ret_err) {
	Arm64ImageError ae = ARM64_IMAGE_OK;
	struct loader_options o = {
		.arch = LOADER_ARCH_ARM64,
		.root = c->root,
		.kernel_fd = c->kernel_fd,
		.initrd_fd = initrd ? c->initrd_fd : -1,
		.cmdline = "console=ttyAMA0 root=/dev/vda",
		.mode = HANDOFF_MODE_VERIFIED,
		.panic = panic,
		.ret_arm64_image_error = &ae,
	};
	*ret_err = LOADER_OK;
	return loader_image_build(&o, ret, ret_err, NULL);
}

static const void *chosen_prop(const void *fdt, const char *name, int *len) {
	int node = fdt_path_offset(fdt, "/chosen");

	assert_true(node >= 0);
	return fdt_getprop(fdt, node, name, len);
}

static uint64_t be_cells(const void *p, int cells) {
	const fdt32_t *c = p;
	uint64_t v = 0;

	for (int i = 0; i < cells; i++)
		v = v << 32 | fdt32_to_cpu(c[i]);
	return v;
}

static bool overlaps(const struct loader_segment *s, uint64_t start, uint64_t size) {
	return s->memsz && s->mem < start + size && start < s->mem + s->memsz;
}

/* Invariants of every arm64 image: nothing reserved is touched, the kernel sits at a
 * 2 MiB aligned base + text_offset, the DTB and the initrd share its 32 GiB window. */
static void check_layout(const struct loader_image *img, bool panic) {
	const struct loader_segment *s;
	size_t n = loader_image_segments(img, &s);

	assert_int_equal(n, _LOADER_SEG_MAX);
	assert_int_equal(s[LOADER_SEG_KERNEL].mem % (2 << 20), 0); /* text_offset 0 */
	assert_true(s[LOADER_SEG_KERNEL].memsz >= TEST_IMAGE_SIZE);
	assert_int_equal(s[LOADER_SEG_DTB].mem % 8, 0);
	assert_int_equal(s[LOADER_SEG_DTB].mem >> 21,
	                 (s[LOADER_SEG_DTB].mem + s[LOADER_SEG_DTB].memsz - 1) >> 21);
	for (size_t i = 0; i < n; i++) {
		assert_false(overlaps(&s[i], MEMRESERVE_AT, MEMRESERVE_SZ));
		assert_false(overlaps(&s[i], RSVMEM_AT, RSVMEM_SZ));
		assert_false(overlaps(&s[i], 0x41650000, 0x420000)); /* iomem "reserved" */
		assert_false(overlaps(&s[i], 0xbdc00000, 0x2400000));
		if (s[i].memsz == 0)
			continue;
		if (panic)
			assert_true(s[i].mem >= CRASH_START &&
			            s[i].mem + s[i].memsz - 1 <= CRASH_END);
		else
			assert_false(overlaps(&s[i], CRASH_START, CRASH_END - CRASH_START + 1));
		for (size_t j = 0; j < i; j++)
			assert_false(overlaps(&s[j], s[i].mem, s[i].memsz));
	}
}

static void test_arm64_loader_normal(void **state) {
	struct ctx *c = *state;
	struct loader_image *img = NULL;
	const struct loader_segment *s;
	const struct purgatory_params *pp;
	const void *fdt, *p;
	LoaderError e;
	int len;

	assert_int_equal(build(c, false, true, &img, &e), 0);
	check_layout(img, false);
	loader_image_segments(img, &s);
	fdt = s[LOADER_SEG_DTB].buf;
	assert_int_equal(fdt_check_full(fdt, s[LOADER_SEG_DTB].bufsz), 0);
	assert_int_equal(s[LOADER_SEG_ELFCOREHDR].memsz, 0);

	/* bootargs: the caller's line, the handoff mark and the arm64 stamps field. */
	p = chosen_prop(fdt, "bootargs", &len);
	assert_non_null(p);
	assert_string_equal(p, loader_image_cmdline(img));
	assert_non_null(strstr(p, "console=ttyAMA0 root=/dev/vda " LOADER_HANDOFF_CMDLINE_MARK
	                          " " PURGATORY_STAMPS_KEY PURGATORY_STAMPS_TEMPLATE_ARM64));
	/* The initrd, as the segment says; u64 values. */
	p = chosen_prop(fdt, "linux,initrd-start", &len);
	assert_int_equal(len, 8);
	assert_int_equal(be_cells(p, 2), s[LOADER_SEG_INITRD].mem);
	p = chosen_prop(fdt, "linux,initrd-end", &len);
	assert_int_equal(be_cells(p, 2), s[LOADER_SEG_INITRD].mem + INITRD_BYTES);
	/* Fresh seeds: the fixture's kaslr-seed is QEMU's; ours is new and sized. */
	p = chosen_prop(fdt, "kaslr-seed", &len);
	assert_non_null(p);
	assert_int_equal(len, 8);
	assert_memory_not_equal(p, fixture_kaslr_seed(), 8);
	assert_non_null(chosen_prop(fdt, "rng-seed", &len));
	assert_int_equal(len, 64);
	/* The UEFI boot's properties are kept as they were. */
	p = chosen_prop(fdt, "linux,uefi-system-table", &len);
	assert_int_equal(len, 8);
	assert_int_equal(be_cells(p, 2), UEFI_SYSTAB);
	p = chosen_prop(fdt, "linux,uefi-mmap-start", &len);
	assert_int_equal(be_cells(p, 2), UEFI_MMAP);
	p = chosen_prop(fdt, "linux,uefi-mmap-size", &len);
	assert_int_equal(be_cells(p, 1), 0x1230);
	assert_non_null(chosen_prop(fdt, "stdout-path", &len));
	assert_null(chosen_prop(fdt, "linux,elfcorehdr", &len));
	assert_null(chosen_prop(fdt, "linux,usable-memory-range", &len));
	/* The reservation stays in the DT the next kernel reads. */
	assert_int_equal(fdt_num_mem_rsv(fdt), 1);

	/* Purgatory: the kernel's entry, x0 the DTB, the stamps inside bootargs, QEMU
	 * virt's PL011 and PSCI by HVC. */
	pp = loader_image_params(img);
	assert_int_equal(loader_image_entry(img), s[LOADER_SEG_PURGATORY].mem);
	assert_int_equal(pp->entry_pc, s[LOADER_SEG_KERNEL].mem);
	assert_int_equal(pp->entry_x0, s[LOADER_SEG_DTB].mem);
	assert_int_equal(pp->stamps_len, PURGATORY_STAMPS_FIELD_LEN_ARM64);
	assert_memory_equal((const uint8_t *)fdt + (pp->stamps_addr - s[LOADER_SEG_DTB].mem),
	                    PURGATORY_STAMPS_TEMPLATE_ARM64, PURGATORY_STAMPS_FIELD_LEN_ARM64);
	assert_int_equal(pp->console_kind, PURGATORY_CONSOLE_PL011);
	assert_int_equal(pp->console_base, 0x9000000);
	assert_int_equal(pp->reset_method, PURGATORY_RESET_PSCI_HVC);
	assert_int_equal(pp->mode, PURGATORY_MODE_VERIFIED);
	assert_int_equal(pp->flags, 0);
	/* Kernel, initrd, DTB digested; purgatory not. */
	assert_int_equal(pp->nr_segments, 3);
	assert_int_equal(pp->segments[0].addr, s[LOADER_SEG_KERNEL].mem);
	assert_string_equal(loader_image_release(img), TEST_IMAGE_RELEASE);
	/* The placement inputs' digest, as a commit takes it again (on an arm64 build, from
	 * /proc/iomem), matches the one taken at build; another iomem does not. */
	if (LOADER_ARCH_NATIVE == LOADER_ARCH_ARM64) {
		static const char moved[] = "40000000-bfffffff : System RAM\n";
		uint8_t now[SHA256_DIGEST_SIZE];

		assert_int_equal(loader_memory_map_digest(c->root, now), 0);
		assert_memory_equal(now, loader_image_memory_map_digest(img), sizeof(now));
		write_at(c->root, "/proc/iomem", moved, strlen(moved));
		assert_int_equal(loader_memory_map_digest(c->root, now), 0);
		assert_memory_not_equal(now, loader_image_memory_map_digest(img), sizeof(now));
		write_at(c->root, "/proc/iomem", iomem_virt, strlen(iomem_virt));
	}
	loader_image_free(img);
}

/* Without an initrd, the running kernel's initrd properties are deleted. */
static void test_arm64_loader_no_initrd(void **state) {
	struct ctx *c = *state;
	struct loader_image *img = NULL;
	const struct loader_segment *s;
	LoaderError e;
	int len;

	assert_int_equal(build(c, false, false, &img, &e), 0);
	check_layout(img, false);
	loader_image_segments(img, &s);
	assert_int_equal(s[LOADER_SEG_INITRD].memsz, 0);
	assert_null(chosen_prop(s[LOADER_SEG_DTB].buf, "linux,initrd-start", &len));
	assert_null(chosen_prop(s[LOADER_SEG_DTB].buf, "linux,initrd-end", &len));
	loader_image_free(img);
}

/* The panic image: inside the reservation, always verified, with the ELF core
 * header (a PT_LOAD per System RAM range outside the reservation) and the usable
 * memory range in /chosen. */
static void test_arm64_loader_panic(void **state) {
	struct ctx *c = *state;
	struct loader_image *img = NULL;
	const struct loader_segment *s;
	const Elf64_Ehdr *eh;
	const Elf64_Phdr *ph;
	const void *fdt, *p;
	LoaderError e;
	int len;

	/* What the old kernel names of its notes (a crash kernel's /proc/vmcore needs them);
	 * CPU 1 has none, which ends the list. */
	write_at(c->root, "/sys/kernel/vmcoreinfo", "bf5e0000 1024\n", 14);
	write_at(c->root, "/sys/devices/system/cpu/cpu0/crash_notes", "bf600000\n", 9);
	write_at(c->root, "/sys/devices/system/cpu/cpu0/crash_notes_size", "432\n", 4);
	assert_int_equal(build(c, true, true, &img, &e), 0);
	check_layout(img, true);
	loader_image_segments(img, &s);
	fdt = s[LOADER_SEG_DTB].buf;
	assert_true(s[LOADER_SEG_ELFCOREHDR].memsz > 0);

	p = chosen_prop(fdt, "linux,elfcorehdr", &len);
	assert_int_equal(len, 16); /* the root's #address-cells and #size-cells: 2 and 2 */
	assert_int_equal(be_cells(p, 2), s[LOADER_SEG_ELFCOREHDR].mem);
	assert_int_equal(be_cells((const fdt32_t *)p + 2, 2), s[LOADER_SEG_ELFCOREHDR].bufsz);
	p = chosen_prop(fdt, "linux,usable-memory-range", &len);
	assert_int_equal(len, 16);
	assert_int_equal(be_cells(p, 2), CRASH_START);
	assert_int_equal(be_cells((const fdt32_t *)p + 2, 2), CRASH_END - CRASH_START + 1);
	assert_non_null(strstr(chosen_prop(fdt, "bootargs", &len), LOADER_PANIC_CMDLINE_MARK));
	assert_non_null(chosen_prop(fdt, "linux,uefi-system-table", &len));

	eh = s[LOADER_SEG_ELFCOREHDR].buf;
	assert_memory_equal(eh->e_ident, ELFMAG, SELFMAG);
	assert_int_equal(eh->e_ident[EI_CLASS], ELFCLASS64);
	assert_int_equal(eh->e_type, ET_CORE);
	assert_int_equal(eh->e_machine, EM_AARCH64);
	assert_int_equal(eh->e_phnum, 2 + 2); /* vmcoreinfo, CPU 0's notes, two PT_LOADs */
	ph = (const Elf64_Phdr *)((const uint8_t *)eh + eh->e_phoff);
	assert_int_equal(ph[0].p_type, PT_NOTE);
	assert_int_equal(ph[0].p_paddr, 0xbf5e0000);
	assert_int_equal(ph[0].p_filesz, 0x1024);
	assert_int_equal(ph[1].p_type, PT_NOTE);
	assert_int_equal(ph[1].p_paddr, 0xbf600000);
	assert_int_equal(ph[1].p_filesz, 432);
	ph += 2;
	assert_int_equal(ph[0].p_type, PT_LOAD);
	assert_int_equal(ph[0].p_paddr, 0x40000000);
	assert_int_equal(ph[0].p_memsz, CRASH_START - 0x40000000);
	assert_int_equal(ph[1].p_paddr, CRASH_END + 1);
	assert_int_equal(ph[1].p_paddr + ph[1].p_memsz, 0xc0000000);

	assert_int_equal(loader_image_params(img)->flags, PURGATORY_FLAG_PANIC);
	assert_int_equal(loader_image_set_mode(img, HANDOFF_MODE_FAST), -EINVAL);
	/* Four digested segments: kernel, initrd, DTB, ELF core header. */
	assert_int_equal(loader_image_params(img)->nr_segments, 4);
	loader_image_free(img);
}

/* With the reservation at the top of RAM, where top-down placement would go first,
 * a normal image still keeps out of it. */
static void test_arm64_loader_crash_at_top(void **state) {
	static const char iomem[] = "40000000-bfffffff : System RAM\n"
	                            "  b0000000-bfffffff : Crash kernel\n";
	struct ctx *c = *state;
	struct loader_image *img = NULL;
	const struct loader_segment *s;
	size_t n;
	LoaderError e;

	write_at(c->root, "/proc/iomem", iomem, strlen(iomem));
	assert_int_equal(build(c, false, true, &img, &e), 0);
	n = loader_image_segments(img, &s);
	for (size_t i = 0; i < n; i++)
		assert_false(overlaps(&s[i], 0xb0000000, 0x10000000));
	loader_image_free(img);
	write_at(c->root, "/proc/iomem", iomem_virt, strlen(iomem_virt));
}

static void expect_refusal(struct ctx *c, const char *iomem, bool panic, LoaderError want) {
	struct loader_image *img = NULL;
	LoaderError e;

	write_at(c->root, "/proc/iomem", iomem, strlen(iomem));
	assert_true(build(c, panic, true, &img, &e) < 0);
	assert_null(img);
	assert_int_equal(e, want);
	assert_non_null(loader_error_to_string(want));
	write_at(c->root, "/proc/iomem", iomem_virt, strlen(iomem_virt));
}

/* Layouts that cannot be honoured are refused by name. */
static void test_arm64_loader_refusals(void **state) {
	struct ctx *c = *state;

	/* 512 KiB of RAM: less than image_size (1 MiB). */
	expect_refusal(c, "40000000-4007ffff : System RAM\n", false, LOADER_ERR_NO_ROOM_KERNEL);
	/* 1 MiB for the kernel and 64 KiB more: no room for the initrd. */
	expect_refusal(c, "40000000-400fffff : System RAM\n40100000-4010ffff : System RAM\n", false,
	               LOADER_ERR_NO_ROOM_INITRD);
	/* Exactly the kernel and the initrd (0x33000 bytes in pages): none for the DTB. */
	expect_refusal(c, "40000000-400fffff : System RAM\n40100000-40132fff : System RAM\n", false,
	               LOADER_ERR_NO_ROOM_DTB);
	/* The kernel's window (1 GiB aligned, 32 GiB) holds no other RAM. */
	expect_refusal(c, "40000000-400fffff : System RAM\n1000000000-10ffffffff : System RAM\n",
	               false, LOADER_ERR_NO_ROOM_INITRD);
	/* A panic image without a reservation. */
	expect_refusal(c, "40000000-bfffffff : System RAM\n", true,
	               LOADER_ERR_NO_CRASH_RESERVATION);
	/* A reservation too small for the crash kernel. */
	expect_refusal(c, "40000000-bfffffff : System RAM\n  a0000000-a007ffff : Crash kernel\n",
	               true, LOADER_ERR_NO_ROOM_KERNEL);
	/* Addresses hidden (read without CAP_SYS_ADMIN). */
	expect_refusal(c, "00000000-00000000 : System RAM\n", false, LOADER_ERR_IOMEM);
}

/* A missing or malformed device tree is refused by name; a panic image in fast
 * mode too. */
static void test_arm64_loader_bad_inputs(void **state) {
	struct ctx *c = *state;
	struct loader_image *img = NULL;
	_cleanup_free_ char *p = NULL;
	LoaderError e = LOADER_OK;
	struct loader_options o = {
		.arch = LOADER_ARCH_ARM64,
		.root = c->root,
		.kernel_fd = c->kernel_fd,
		.initrd_fd = -1,
		.mode = HANDOFF_MODE_FAST,
		.panic = true,
	};

	assert_int_equal(loader_image_build(&o, &img, &e, NULL), -EINVAL);
	assert_int_equal(e, LOADER_ERR_PANIC_NOT_VERIFIED);

	write_at(c->root, "/sys/firmware/fdt", "\xd0\x0d\xfe\xed garbage", 12);
	assert_true(build(c, false, false, &img, &e) < 0);
	assert_int_equal(e, LOADER_ERR_DTB_INVALID);
	assert_int_equal(path_prefix_root(c->root, "/sys/firmware/fdt", &p), 0);
	assert_int_equal(unlink(p), 0);
	assert_true(build(c, false, false, &img, &e) < 0);
	assert_int_equal(e, LOADER_ERR_DTB_READ);
	write_fdt(c->root);
	assert_null(img);
}

/* Without /proc/iomem, RAM is what the DT's /memory nodes say (QEMU virt: 2 GiB at
 * 1 GiB); the console is found through an alias with options. */
static void test_arm64_loader_dt_memory_alias(void **state) {
	struct ctx *c = *state;
	_cleanup_free_ char *p = NULL;
	struct loader_image *img = NULL;
	const struct loader_segment *s;
	size_t n;
	LoaderError e;

	assert_int_equal(path_prefix_root(c->root, "/proc/iomem", &p), 0);
	assert_int_equal(unlink(p), 0);
	write_fdt_alias(c->root);
	assert_int_equal(build(c, false, true, &img, &e), 0);
	n = loader_image_segments(img, &s);
	for (size_t i = 0; i < n; i++)
		if (s[i].memsz)
			assert_true(s[i].mem >= 0x40000000 && s[i].mem + s[i].memsz <= 0xc0000000);
	assert_int_equal(loader_image_params(img)->console_kind, PURGATORY_CONSOLE_PL011);
	assert_int_equal(loader_image_params(img)->console_base, 0x9000000);
	loader_image_free(img);
	write_fdt(c->root);
	write_at(c->root, "/proc/iomem", iomem_virt, strlen(iomem_virt));
}

static bool has_mpidr(const struct purgatory_params *pp, uint64_t mpidr) {
	for (unsigned i = 0; i < pp->nr_cpus; i++)
		if (pp->cpu_mpidr[i] == mpidr)
			return true;
	return false;
}

/* The CPUs purgatory hashes on: every /cpus node PSCI starts and not disabled, with
 * /psci's conduit; one CPU (nothing listed) for a panic image and
 * without PSCI 0.2; at most PURGATORY_MAX_CPUS. */
static void test_arm64_loader_cpus(void **state) {
	struct ctx *c = *state;
	struct loader_image *img = NULL;
	const struct purgatory_params *pp;
	LoaderError e;

	/* The fixture: QEMU -smp 2, PSCI 1.0 by HVC. */
	assert_int_equal(build(c, false, true, &img, &e), 0);
	pp = loader_image_params(img);
	assert_int_equal(pp->psci_conduit, PURGATORY_PSCI_HVC);
	assert_int_equal(pp->nr_cpus, 2);
	assert_int_equal(pp->cpu_mpidr[0], 0);
	assert_int_equal(pp->cpu_mpidr[1], 1);
	loader_image_free(img);

	write_fdt_cpus(c->root, 0, NULL);
	assert_int_equal(build(c, false, true, &img, &e), 0);
	pp = loader_image_params(img);
	assert_int_equal(pp->psci_conduit, PURGATORY_PSCI_HVC);
	assert_int_equal(pp->nr_cpus, 3);
	assert_true(has_mpidr(pp, 0) && has_mpidr(pp, 1) && has_mpidr(pp, 0x100));
	assert_int_equal(pp->cpu_mpidr[3], 0);
	loader_image_free(img);

	/* A crash kernel boots on one CPU: the others were stopped, not turned off. */
	assert_int_equal(build(c, true, true, &img, &e), 0);
	assert_int_equal(loader_image_params(img)->nr_cpus, 0);
	assert_int_equal(loader_image_params(img)->psci_conduit, PURGATORY_PSCI_NONE);
	loader_image_free(img);

	/* PSCI 0.1 only: its function numbers are the firmware's own. The reset
	 * still takes the conduit. */
	write_fdt(c->root);
	write_fdt_cpus(c->root, 0, "arm,psci");
	assert_int_equal(build(c, false, true, &img, &e), 0);
	assert_int_equal(loader_image_params(img)->nr_cpus, 0);
	assert_int_equal(loader_image_params(img)->reset_method, PURGATORY_RESET_PSCI_HVC);
	loader_image_free(img);

	/* More CPUs than the block holds: the first PURGATORY_MAX_CPUS. */
	write_fdt(c->root);
	write_fdt_cpus(c->root, PURGATORY_MAX_CPUS, NULL);
	assert_int_equal(build(c, false, true, &img, &e), 0);
	pp = loader_image_params(img);
	assert_int_equal(pp->nr_cpus, PURGATORY_MAX_CPUS);
	for (unsigned i = 0; i < PURGATORY_MAX_CPUS; i++)
		assert_false(pp->cpu_mpidr[i] == 2 || pp->cpu_mpidr[i] == 3);
	loader_image_free(img);
	write_fdt(c->root);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_arm64_loader_normal),
		cmocka_unit_test(test_arm64_loader_no_initrd),
		cmocka_unit_test(test_arm64_loader_panic),
		cmocka_unit_test(test_arm64_loader_crash_at_top),
		cmocka_unit_test(test_arm64_loader_refusals),
		cmocka_unit_test(test_arm64_loader_bad_inputs),
		cmocka_unit_test(test_arm64_loader_dt_memory_alias),
		cmocka_unit_test(test_arm64_loader_cpus),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
