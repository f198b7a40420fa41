/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What a kernel started by kexec on a UEFI host needs to keep using the firmware,
 * read from the running kernel and written into the new kernel's boot_params.
 *
 * After the first kernel called SetVirtualAddressMap(), the firmware's runtime
 * services live at the virtual addresses that kernel chose, and the system table's
 * pointers were converted to them: the next kernel can neither call
 * SetVirtualAddressMap() again nor trust those pointers. So it is told, the way the
 * kernel's own kexec_file_load (arch/x86/kernel/kexec-bzimage64.c) and kexec-tools
 * tell it:
 *   - efi_info in the zero page: the loader signature ("EL64") and the system
 *     table's physical address, both from the running kernel's boot_params
 *     (/sys/kernel/boot_params/data), and an EFI memory map made of the runtime
 *     regions only (/sys/firmware/efi/runtime-map), each with the virtual address
 *     it is mapped at, which the next kernel maps again at the same address;
 *   - a SETUP_EFI setup_data entry with the physical addresses the system table
 *     no longer holds: the firmware vendor string, the configuration tables (which
 *     lead to ACPI and SMBIOS) and SMBIOS (/sys/firmware/efi/{fw_vendor,
 *     config_table,systab});
 *   - acpi_rsdp_addr: the running kernel's, else the ACPI 2.0 table, else ACPI 1.0;
 *   - secure_boot: the running kernel's.
 * The runtime regions are also kept out of the RAM the loader places segments in,
 * and typed reserved in the e820 table the next kernel gets.
 */

#include <stddef.h>
#include <stdint.h>

#define EFI_RUNTIME_MAP_MAX     256
#define EFI_MEMDESC_SIZE        40 /* u32 type, u32 pad, u64 phys, virt, pages, attribute */
#define EFI_MEMDESC_VERSION     1
#define EFI_PAGE_SIZE           4096ULL
#define EFI_MEMORY_RUNTIME      (1ULL << 63)
#define EFI_MEMORY_TYPE_MAX     16         /* EFI_MAX_MEMORY_TYPE: types are 0..15 */
#define EFI_LOADER_SIGNATURE_64 0x34364c45 /* "EL64" little-endian */
#define EFI_LOADER_SIGNATURE_32 0x32334c45 /* "EL32": a 32-bit firmware */
#define SETUP_DATA_HEADER_SIZE  16         /* u64 next, u32 type, u32 len */
#define SETUP_EFI               4
#define EFI_SETUP_DATA_SIZE     96 /* u64 fw_vendor, __unused, tables, smbios, reserved[8] */

/* struct efi_info in the zero page (offsets within boot_params). */
#define BP_EFI_LOADER_SIGNATURE 0x1c0 /* u32 */
#define BP_EFI_SYSTAB           0x1c4 /* u32: low 32 bits */
#define BP_EFI_MEMDESC_SIZE     0x1c8 /* u32 */
#define BP_EFI_MEMDESC_VERSION  0x1cc /* u32 */
#define BP_EFI_MEMMAP           0x1d0 /* u32: low 32 bits */
#define BP_EFI_MEMMAP_SIZE      0x1d4 /* u32 */
#define BP_EFI_SYSTAB_HI        0x1d8 /* u32 */
#define BP_EFI_MEMMAP_HI        0x1dc /* u32 */
#define BP_SECURE_BOOT          0x1ec /* u8 */

typedef enum EfiError {
	EFI_OK,
	EFI_ERR_BOOT_PARAMS,    /* /sys/kernel/boot_params/data missing, or not one page */
	EFI_ERR_32BIT,          /* the firmware is 32-bit (signature EL32, fw_platform_size 32) */
	EFI_ERR_SIGNATURE,      /* efi_loader_signature is neither EL64 nor EL32 */
	EFI_ERR_SYSTAB,         /* no system table address, or /sys/firmware/efi/systab malformed */
	EFI_ERR_NO_RUNTIME_MAP, /* /sys/firmware/efi/runtime-map missing or empty */
	EFI_ERR_RUNTIME_MAP,    /* a runtime-map entry malformed, or two overlap */
	EFI_ERR_TOO_MANY,       /* more than EFI_RUNTIME_MAP_MAX runtime regions */
	EFI_ERR_FW_VENDOR,      /* /sys/firmware/efi/fw_vendor missing or malformed */
	EFI_ERR_CONFIG_TABLE,   /* /sys/firmware/efi/config_table missing or malformed */
	_EFI_ERR_MAX,
} EfiError;

struct efi_runtime_desc {
	uint32_t type;
	uint64_t phys;
	uint64_t virt;
	uint64_t pages;
	uint64_t attribute;
};

struct efi_state {
	uint32_t loader_signature;
	uint64_t systab;
	uint32_t memdesc_version;
	uint8_t secure_boot;
	uint64_t acpi_rsdp; /* 0: none known */
	uint64_t fw_vendor;
	uint64_t config_table;
	uint64_t smbios; /* 0: none */
	size_t nr_map;
	struct efi_runtime_desc map[EFI_RUNTIME_MAP_MAX]; /* sorted by phys, disjoint */
};

const char *efi_error_to_string(EfiError e);

/*
 * The systab text (/sys/firmware/efi/systab: "KEY=0xHEX" lines): the ACPI 2.0, ACPI 1.0
 * and SMBIOS addresses (0 when the line is absent). A line that is not KEY=0xHEX, or a
 * key given twice, is -EBADMSG.
 */
int efi_systab_parse(const char *text, uint64_t *ret_acpi20, uint64_t *ret_acpi,
                     uint64_t *ret_smbios);

/* One runtime region checked: a known type, EFI_MEMORY_RUNTIME set, page-aligned
 * addresses, at least one page, no wrap. 0 or -EBADMSG. */
int efi_runtime_desc_check(const struct efi_runtime_desc *d);

/*
 * Everything the next kernel needs, read below root (NULL or "/" for the host).
 * -errno with *ret_error naming the part that is missing or malformed.
 */
int efi_state_read(const char *root, struct efi_state *ret, EfiError *ret_error);

/* Bytes efi_params_write() appends after the command line: the EFI memory map and
 * the SETUP_EFI entry (8-byte aligned from where it starts). */
size_t efi_params_size(const struct efi_state *s);

/*
 * Fills the zero page zp (which the new kernel finds at physical address zp_mem) and
 * writes the EFI memory map and the SETUP_EFI entry at zp + off (8-byte aligned,
 * efi_params_size() bytes inside the same buffer), linking that entry at the head of
 * the zero page's setup_data list.
 */
void efi_params_write(const struct efi_state *s, uint8_t *zp, uint64_t zp_mem, size_t off);
