/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The EFI state the loader hands a kexec'd kernel on a UEFI host (loader/efi.h),
 * built from what an OVMF-booted lab host showed (tests/fixtures/efi-ovmf: its
 * /sys/firmware/efi, /sys/firmware/memmap, /sys/kernel/boot_params/data and
 * /proc/iomem, captured by the lab's uefi scenario), and every malformed piece
 * of it refused by name, with no image built.
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "efi.h"
#include "loader-test-util.h"
#include "memrange.h"

/* What the captured host showed (the files under tests/fixtures/efi-ovmf). */
#define FIX_SYSTAB       0x7f9ec018ULL
#define FIX_ACPI20       0x7fb7e014ULL
#define FIX_SMBIOS       0x7f918000ULL
#define FIX_FW_VENDOR    0x7f91c818ULL
#define FIX_CONFIG_TABLE 0x7f9ecc98ULL
#define FIX_NR_RUNTIME   6
/* A boot-services page the running kernel kept (efi_mem_reserve()): RAM in the
 * firmware map, a runtime region in the runtime map. */
#define FIX_KEPT_PAGE    0x7cb7a000ULL

static int efi_setup(void **state) {
	_cleanup_free_ char *cmd = NULL;
	struct fixture *f;
	int r;

	r = setup(state);
	if (r < 0)
		return r;
	f = *state;
	if (asprintf(&cmd, "cp -a '%s'/. '%s'/", EFI_FIXTURE_DIR, f->root) < 0)
		return -1;
	return system(cmd) == 0 ? 0 : -1;
}

static void test_efi_state_read(void **state) {
	struct fixture *f = *state;
	_cleanup_free_ struct efi_state *s = malloc(sizeof(*s));
	EfiError e = _EFI_ERR_MAX;

	assert_non_null(s);
	assert_int_equal(efi_state_read(f->root, s, &e), 0);
	assert_int_equal(e, EFI_OK);
	assert_int_equal(s->loader_signature, EFI_LOADER_SIGNATURE_64);
	assert_int_equal(s->systab, FIX_SYSTAB);
	assert_int_equal(s->memdesc_version, 1);
	/* boot_params.acpi_rsdp_addr is 0 after the EFI stub: the ACPI 2.0 table. */
	assert_int_equal(s->acpi_rsdp, FIX_ACPI20);
	assert_int_equal(s->smbios, FIX_SMBIOS);
	assert_int_equal(s->fw_vendor, FIX_FW_VENDOR);
	assert_int_equal(s->config_table, FIX_CONFIG_TABLE);
	assert_int_equal(s->nr_map, FIX_NR_RUNTIME);
	for (size_t i = 0; i < s->nr_map; i++) {
		assert_int_equal(efi_runtime_desc_check(&s->map[i]), 0);
		if (i > 0)
			assert_true(s->map[i - 1].phys + s->map[i - 1].pages * 4096 <=
			            s->map[i].phys);
	}
	assert_int_equal(s->map[0].phys, 0);
	assert_int_equal(s->map[1].phys, FIX_KEPT_PAGE);
	assert_int_equal(s->map[1].type, 4);
	assert_int_equal(s->map[1].virt, 0xfffffffefcb7a000ULL);
}

static void test_efi_usable(void **state) {
	struct fixture *f = *state;
	LoaderUnusable u = _LOADER_UNUSABLE_MAX;

	/* The EFI runtime map is x86_64's handover; arm64 passes the EFI state in the DT. */
	if (LOADER_ARCH_NATIVE != LOADER_ARCH_X86_64)
		skip();

	assert_int_equal(loader_check_usable(f->root, &u), 0);
	assert_int_equal(u, LOADER_USABLE);
	write_root_file(f->root, "/sys/firmware/efi/fw_platform_size", "32\n");
	assert_int_equal(loader_check_usable(f->root, &u), 0);
	assert_int_equal(u, LOADER_UNUSABLE_EFI_32BIT);
	write_root_file(f->root, "/sys/firmware/efi/fw_platform_size", "64\n");
	write_root_file(f->root, "/sys/firmware/efi/fw_vendor", "0xzz\n");
	assert_int_equal(loader_check_usable(f->root, &u), 0);
	assert_int_equal(u, LOADER_UNUSABLE_EFI_STATE);
}

/* The e820 table of a zero page: is [start, end] inside one range of this type? */
static bool e820_covers(const uint8_t *zp, uint64_t start, uint64_t end, uint32_t type) {
	for (unsigned i = 0; i < zp[BP_E820_ENTRIES]; i++) {
		size_t off = BP_E820_TABLE + i * E820_ENTRY_SIZE;
		uint64_t a = get_u64(zp, off), size = get_u64(zp, off + 8);

		if (get_u32(zp, off + 16) == type && a <= start && end <= a + size - 1)
			return true;
	}
	return false;
}

static void assert_efi_params(const struct loader_image *img, const struct efi_state *s) {
	const struct loader_segment *seg;
	const uint8_t *zp, *map, *sd;
	uint64_t zp_mem, map_mem, sd_mem;
	size_t n = loader_image_segments(img, &seg);

	zp = seg[LOADER_SEG_PARAMS].buf;
	zp_mem = seg[LOADER_SEG_PARAMS].mem;
	assert_int_equal(get_u32(zp, BP_EFI_LOADER_SIGNATURE), EFI_LOADER_SIGNATURE_64);
	assert_int_equal(get_u32(zp, BP_EFI_SYSTAB) | (uint64_t)get_u32(zp, BP_EFI_SYSTAB_HI) << 32,
	                 FIX_SYSTAB);
	assert_int_equal(get_u32(zp, BP_EFI_MEMDESC_SIZE), EFI_MEMDESC_SIZE);
	assert_int_equal(get_u32(zp, BP_EFI_MEMDESC_VERSION), 1);
	assert_int_equal(get_u32(zp, BP_EFI_MEMMAP_SIZE), FIX_NR_RUNTIME * EFI_MEMDESC_SIZE);
	assert_int_equal(get_u64(zp, BP_ACPI_RSDP_ADDR), FIX_ACPI20);

	/* The EFI memory map lies inside the params segment, after the command line. */
	map_mem = get_u32(zp, BP_EFI_MEMMAP) | (uint64_t)get_u32(zp, BP_EFI_MEMMAP_HI) << 32;
	assert_true(map_mem >= zp_mem + BOOT_PARAMS_SIZE + strlen(loader_image_cmdline(img)) + 1);
	assert_true(map_mem + FIX_NR_RUNTIME * EFI_MEMDESC_SIZE <=
	            zp_mem + seg[LOADER_SEG_PARAMS].bufsz);
	map = zp + (map_mem - zp_mem);
	for (size_t i = 0; i < s->nr_map; i++) {
		const uint8_t *d = map + i * EFI_MEMDESC_SIZE;

		assert_int_equal(get_u32(d, 0), s->map[i].type);
		assert_int_equal(get_u64(d, 8), s->map[i].phys);
		assert_int_equal(get_u64(d, 16), s->map[i].virt);
		assert_int_equal(get_u64(d, 24), s->map[i].pages);
		assert_int_equal(get_u64(d, 32), s->map[i].attribute);
	}

	/* One setup_data entry, SETUP_EFI, the end of the list. */
	sd_mem = get_u64(zp, BP_SETUP_DATA);
	assert_true(sd_mem % 8 == 0);
	assert_true(sd_mem + SETUP_DATA_HEADER_SIZE + EFI_SETUP_DATA_SIZE <=
	            zp_mem + seg[LOADER_SEG_PARAMS].bufsz);
	sd = zp + (sd_mem - zp_mem);
	assert_int_equal(get_u64(sd, 0), 0);
	assert_int_equal(get_u32(sd, 8), SETUP_EFI);
	assert_int_equal(get_u32(sd, 12), EFI_SETUP_DATA_SIZE);
	assert_int_equal(get_u64(sd, 16), FIX_FW_VENDOR);
	assert_int_equal(get_u64(sd, 16 + 16), FIX_CONFIG_TABLE);
	assert_int_equal(get_u64(sd, 16 + 24), FIX_SMBIOS);

	/* No segment in a runtime region; each region reserved in the new e820 table. */
	for (size_t i = 0; i < s->nr_map; i++) {
		uint64_t a = s->map[i].phys, e = a + s->map[i].pages * 4096 - 1;

		for (size_t k = 0; k < n; k++)
			if (seg[k].memsz)
				assert_false(seg[k].mem <= e && a <= seg[k].mem + seg[k].memsz - 1);
		if (a >= 0x100000) /* the first page: the kernel reserves it itself */
			assert_false(e820_covers(zp, a, e, E820_TYPE_RAM));
	}
	assert_true(e820_covers(zp, FIX_KEPT_PAGE, FIX_KEPT_PAGE + 4095, E820_TYPE_RESERVED));
}

static void test_efi_image(void **state) {
	struct fixture *f = *state;
	_cleanup_free_ struct efi_state *s = malloc(sizeof(*s));
	struct loader_options o = opts_for(f);
	struct loader_image *img = NULL;
	LoaderError e = _LOADER_ERR_MAX;

	assert_non_null(s);
	assert_int_equal(efi_state_read(f->root, s, NULL), 0);
	assert_int_equal(loader_image_build(&o, &img, &e, NULL), 0);
	assert_int_equal(e, LOADER_OK);
	assert_efi_params(img, s);
	img = loader_image_free(img);

	/* The panic image too: the crash kernel keeps using the firmware. */
	o.panic = true;
	assert_int_equal(loader_image_build(&o, &img, &e, NULL), 0);
	assert_efi_params(img, s);
	loader_image_free(img);
}

/* One file of the fixture replaced (content NULL: removed), then the state read and an
 * image built: both refuse, by name. */
static void expect_refused(struct fixture *f, const char *path, const char *content,
                           EfiError want) {
	_cleanup_free_ struct efi_state *s = malloc(sizeof(*s));
	_cleanup_free_ char *p = NULL, *saved = NULL;
	struct loader_options o = opts_for(f);
	struct loader_image *img = NULL;
	EfiError e = EFI_OK;
	LoaderError le = LOADER_OK;
	size_t size = 0;

	assert_non_null(s);
	assert_int_equal(path_prefix_root(f->root, path, &p), 0);
	assert_int_equal(read_file_full(p, 8192, &saved, &size), 0);
	if (content)
		assert_int_equal(write_file_atomic(p, content, strlen(content), 0644), 0);
	else
		assert_int_equal(unlink(p), 0);

	assert_true(efi_state_read(f->root, s, &e) < 0);
	if (e != want)
		fail_msg("%s = \"%s\": %s, want %s", path, strna(content), efi_error_to_string(e),
		         efi_error_to_string(want));
	assert_true(loader_image_build(&o, &img, &le, NULL) < 0);
	assert_int_equal(le, LOADER_ERR_EFI_STATE);
	assert_null(img);

	assert_int_equal(write_file_atomic(p, saved, size, 0644), 0);
	assert_int_equal(efi_state_read(f->root, s, &e), 0);
}

static void test_efi_refusals(void **state) {
	struct fixture *f = *state;
	_cleanup_free_ char *p = NULL, *bp = NULL, *orig = NULL;
	char data[BOOT_PARAMS_SIZE];
	size_t size;

	expect_refused(f, "/sys/firmware/efi/systab", "ACPI20=7fb7e014\n", EFI_ERR_SYSTAB);
	expect_refused(f, "/sys/firmware/efi/systab", "ACPI20=0x1\nACPI20=0x2\n", EFI_ERR_SYSTAB);
	expect_refused(f, "/sys/firmware/efi/systab", "ACPI20=0x1 x\n", EFI_ERR_SYSTAB);
	expect_refused(f, "/sys/firmware/efi/systab", NULL, EFI_ERR_SYSTAB);
	expect_refused(f, "/sys/firmware/efi/fw_platform_size", "32\n", EFI_ERR_32BIT);
	expect_refused(f, "/sys/firmware/efi/fw_vendor", "0x\n", EFI_ERR_FW_VENDOR);
	expect_refused(f, "/sys/firmware/efi/fw_vendor", NULL, EFI_ERR_FW_VENDOR);
	expect_refused(f, "/sys/firmware/efi/config_table", "0x0\n", EFI_ERR_CONFIG_TABLE);
	expect_refused(f, "/sys/firmware/efi/config_table", "-0x1\n", EFI_ERR_CONFIG_TABLE);
	/* Runtime regions: no runtime attribute, unaligned, empty, wrapping, unknown type,
	 * overlapping another (region 3 is at 0x7eea1000, 0xc1 pages), a field missing. */
	expect_refused(f, "/sys/firmware/efi/runtime-map/0/attribute", "0xf\n",
	               EFI_ERR_RUNTIME_MAP);
	expect_refused(f, "/sys/firmware/efi/runtime-map/0/phys_addr", "0x7ff50800\n",
	               EFI_ERR_RUNTIME_MAP);
	expect_refused(f, "/sys/firmware/efi/runtime-map/0/num_pages", "0x0\n",
	               EFI_ERR_RUNTIME_MAP);
	expect_refused(f, "/sys/firmware/efi/runtime-map/0/num_pages", "0xfffffffffffff\n",
	               EFI_ERR_RUNTIME_MAP);
	expect_refused(f, "/sys/firmware/efi/runtime-map/0/type", "0x10\n", EFI_ERR_RUNTIME_MAP);
	expect_refused(f, "/sys/firmware/efi/runtime-map/0/phys_addr", "0x7eea2000\n",
	               EFI_ERR_RUNTIME_MAP);
	expect_refused(f, "/sys/firmware/efi/runtime-map/0/virt_addr", NULL, EFI_ERR_RUNTIME_MAP);
	/* A directory that is not a region's index. */
	assert_int_equal(path_prefix_root(f->root, "/sys/firmware/efi/runtime-map/x", &p), 0);
	assert_int_equal(mkdir(p, 0755), 0);
	{
		EfiError e = EFI_OK;

		assert_int_equal(efi_state_read(f->root, &(struct efi_state){}, &e), -EBADMSG);
		assert_int_equal(e, EFI_ERR_RUNTIME_MAP);
	}
	assert_int_equal(rmdir(p), 0);

	/* boot_params: not one page, no signature, a 32-bit firmware, no system table. */
	assert_int_equal(path_prefix_root(f->root, "/sys/kernel/boot_params/data", &bp), 0);
	assert_int_equal(read_file_full(bp, sizeof(data) + 1, &orig, &size), 0);
	assert_int_equal(size, sizeof(data));
	memcpy(data, orig, size);
	expect_refused(f, "/sys/kernel/boot_params/data", "short", EFI_ERR_BOOT_PARAMS);
	expect_refused(f, "/sys/kernel/boot_params/data", NULL, EFI_ERR_BOOT_PARAMS);
	memcpy(data + BP_EFI_LOADER_SIGNATURE, "EL32", 4);
	assert_int_equal(write_file_atomic(bp, data, sizeof(data), 0644), 0);
	assert_true(efi_state_read(f->root, &(struct efi_state){}, NULL) == -EOPNOTSUPP);
	memcpy(data + BP_EFI_LOADER_SIGNATURE, "\0\0\0\0", 4);
	assert_int_equal(write_file_atomic(bp, data, sizeof(data), 0644), 0);
	assert_true(efi_state_read(f->root, &(struct efi_state){}, NULL) == -EBADMSG);
	memcpy(data + BP_EFI_LOADER_SIGNATURE, "EL64", 4);
	memset(data + BP_EFI_SYSTAB, 0, 4);
	assert_int_equal(write_file_atomic(bp, data, sizeof(data), 0644), 0);
	assert_true(efi_state_read(f->root, &(struct efi_state){}, NULL) == -EBADMSG);
}

static void test_efi_systab_parse(void **state) {
	static const struct {
		const char *text;
		int r;
		uint64_t acpi20, acpi, smbios;
	} cases[] = {
		{ "ACPI20=0x7fb7e014\nACPI=0x7fb7e000\nSMBIOS=0x7f918000\n", 0, 0x7fb7e014,
		  0x7fb7e000, 0x7f918000 },
		{ "SMBIOS3=0x1000\nACPI=0x2000\n", 0, 0, 0x2000, 0 },
		{ "", 0, 0, 0, 0 },
		{ "\n\nACPI20=0xA\n", 0, 0xa, 0, 0 },
		{ "ACPI20=0x1", 0, 1, 0, 0 },
		{ "ACPI20=0x1\nACPI20=0x1\n", -EBADMSG, 0, 0, 0 },
		{ "ACPI20=1\n", -EBADMSG, 0, 0, 0 },
		{ "ACPI20=0x\n", -EBADMSG, 0, 0, 0 },
		{ "=0x1\n", -EBADMSG, 0, 0, 0 },
		{ "ACPI20\n", -EBADMSG, 0, 0, 0 },
		{ "acpi20=0x1\n", -EBADMSG, 0, 0, 0 },
		{ "ACPI20=0x 1\n", -EBADMSG, 0, 0, 0 },
		{ "ACPI20=0x-1\n", -EBADMSG, 0, 0, 0 },
		{ "ACPI20=0x11111111111111111\n", -EBADMSG, 0, 0, 0 },
		{ "ACPI20=0x1\xff\n", -EBADMSG, 0, 0, 0 },
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		uint64_t a20 = 99, a = 99, sm = 99;
		int r = efi_systab_parse(cases[i].text, &a20, &a, &sm);

		if (r != cases[i].r)
			fail_msg("\"%s\": %d, want %d", cases[i].text, r, cases[i].r);
		if (r == 0) {
			assert_int_equal(a20, cases[i].acpi20);
			assert_int_equal(a, cases[i].acpi);
			assert_int_equal(sm, cases[i].smbios);
		}
	}
	for (unsigned e = 0; e < _EFI_ERR_MAX; e++)
		assert_non_null(efi_error_to_string(e));
	assert_null(efi_error_to_string(_EFI_ERR_MAX));
}

/* Without a runtime map the host is not usable for kexec_load, and says why. */
static void test_efi_no_runtime_map(void **state) {
	struct fixture *f = *state;
	_cleanup_free_ char *p = NULL, *cmd = NULL;
	struct loader_options o = opts_for(f);
	struct loader_image *img = NULL;
	LoaderUnusable u = _LOADER_UNUSABLE_MAX;
	LoaderError le = LOADER_OK;

	/* The EFI runtime map is x86_64's handover; arm64 passes the EFI state in the DT. */
	if (LOADER_ARCH_NATIVE != LOADER_ARCH_X86_64)
		skip();

	assert_int_equal(path_prefix_root(f->root, "/sys/firmware/efi/runtime-map", &p), 0);
	assert_true(asprintf(&cmd, "rm -rf '%s'", p) > 0);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(loader_check_usable(f->root, &u), 0);
	assert_int_equal(u, LOADER_UNUSABLE_EFI_NO_RUNTIME_MAP);
	assert_true(loader_image_build(&o, &img, &le, NULL) < 0);
	assert_int_equal(le, LOADER_ERR_EFI_STATE);
	assert_null(img);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_efi_state_read, efi_setup, teardown),
		cmocka_unit_test_setup_teardown(test_efi_usable, efi_setup, teardown),
		cmocka_unit_test_setup_teardown(test_efi_image, efi_setup, teardown),
		cmocka_unit_test_setup_teardown(test_efi_refusals, efi_setup, teardown),
		cmocka_unit_test_setup_teardown(test_efi_no_runtime_map, efi_setup, teardown),
		cmocka_unit_test(test_efi_systab_parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
