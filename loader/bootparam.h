/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The x86 Linux boot protocol as the loader uses it: every offset and flag
 * gets a name here, so no code indexes the image or the zero page with a bare
 * number. Offsets are from the start of the bzImage file, which is also the
 * start of the zero page (struct boot_params): the setup header sits at the
 * same offset (0x1f1) in both. Values follow the kernel's boot protocol
 * documentation (Documentation/arch/x86/boot.rst) and its uapi bootparam.h.
 * All fields are little-endian.
 */

/* --- The setup header (offset, size in bytes) ------------------------------ */
#define BP_SETUP_SECTS           0x1f1 /* u8: 512-byte setup sectors after the boot sector */
#define BP_ROOT_FLAGS            0x1f2 /* u16 */
#define BP_SYSSIZE               0x1f4 /* u32: protected-mode code size in 16-byte units */
#define BP_RAM_SIZE              0x1f8 /* u16, obsolete */
#define BP_VID_MODE              0x1fa /* u16 */
#define BP_ROOT_DEV              0x1fc /* u16 */
#define BP_BOOT_FLAG             0x1fe /* u16: BOOT_FLAG_MAGIC */
#define BP_JUMP                  0x200 /* u16: short jump; its 2nd byte bounds the header */
#define BP_HEADER                0x202 /* u32: SETUP_HEADER_MAGIC "HdrS" */
#define BP_VERSION               0x206 /* u16: protocol version, (major << 8) | minor */
#define BP_REALMODE_SWTCH        0x208 /* u32 */
#define BP_START_SYS_SEG         0x20c /* u16, obsolete */
#define BP_KERNEL_VERSION        0x20e /* u16: version string offset minus KERNEL_VERSION_BIAS */
#define BP_TYPE_OF_LOADER        0x210 /* u8 */
#define BP_LOADFLAGS             0x211 /* u8: LOADFLAG_* */
#define BP_SETUP_MOVE_SIZE       0x212 /* u16 */
#define BP_CODE32_START          0x214 /* u32 */
#define BP_RAMDISK_IMAGE         0x218 /* u32: initrd address (low 32 bits) */
#define BP_RAMDISK_SIZE          0x21c /* u32: initrd size (low 32 bits) */
#define BP_BOOTSECT_KLUDGE       0x220 /* u32, obsolete */
#define BP_HEAP_END_PTR          0x224 /* u16 */
#define BP_EXT_LOADER_VER        0x226 /* u8 */
#define BP_EXT_LOADER_TYPE       0x227 /* u8 */
#define BP_CMD_LINE_PTR          0x228 /* u32: command line address (low 32 bits) */
#define BP_INITRD_ADDR_MAX       0x22c /* u32: highest address the initrd may end at */
#define BP_KERNEL_ALIGNMENT      0x230 /* u32: physical alignment a relocatable kernel needs */
#define BP_RELOCATABLE_KERNEL    0x234 /* u8: non-zero when the kernel may load anywhere aligned */
#define BP_MIN_ALIGNMENT         0x235 /* u8: log2 of the minimum alignment */
#define BP_XLOADFLAGS            0x236 /* u16: XLF_* */
#define BP_CMDLINE_SIZE          0x238 /* u32: longest command line, without the NUL */
#define BP_HARDWARE_SUBARCH      0x23c /* u32 */
#define BP_HARDWARE_SUBARCH_DATA 0x240 /* u64 */
#define BP_PAYLOAD_OFFSET        0x248 /* u32 */
#define BP_PAYLOAD_LENGTH        0x24c /* u32 */
#define BP_SETUP_DATA            0x250 /* u64: physical address of a setup_data list */
#define BP_PREF_ADDRESS          0x258 /* u64: preferred load address */
#define BP_INIT_SIZE             0x260 /* u32: linear memory the kernel needs to decompress and start */
#define BP_HANDOVER_OFFSET       0x264 /* u32: EFI handover entry */
#define BP_KERNEL_INFO_OFFSET    0x268 /* u32: protocol 2.15+ */

/* The setup header fields this loader reads end here: it must reach this far. */
#define SETUP_HEADER_MIN_END   (BP_HANDOVER_OFFSET + 4)
/* The header ends at BP_JUMP + 2 + (second byte of the jump instruction). */
#define SETUP_HEADER_JUMP_BASE (BP_JUMP + 2)

#define BOOT_FLAG_MAGIC          0xaa55
#define SETUP_HEADER_MAGIC       0x53726448 /* "HdrS" little-endian */
#define BOOT_PROTOCOL_MIN        0x020c     /* 2.12: xloadflags (64-bit entry, above 4G) */
#define SECTOR_SIZE              512
#define SETUP_SECTS_DEFAULT      4     /* setup_sects == 0 means 4 */
#define KERNEL_VERSION_BIAS      0x200 /* kernel_version is relative to the header jump */
#define TYPE_OF_LOADER_UNDEFINED 0xff  /* "undefined boot loader" per boot.rst */

/* The 64-bit entry point is 0x200 bytes into the protected-mode kernel. */
#define KERNEL_ENTRY64_OFFSET 0x200

/* loadflags */
#define LOADFLAG_LOADED_HIGH   (1u << 0) /* protected-mode code runs at 0x100000 (bzImage) */
#define LOADFLAG_KASLR         (1u << 1)
#define LOADFLAG_QUIET         (1u << 5)
#define LOADFLAG_KEEP_SEGMENTS (1u << 6)
#define LOADFLAG_CAN_USE_HEAP  (1u << 7)

/* xloadflags */
#define XLF_KERNEL_64              (1u << 0) /* has the 64-bit entry at +0x200 */
#define XLF_CAN_BE_LOADED_ABOVE_4G (1u << 1) /* kernel, boot_params, cmdline, initrd above 4G */
#define XLF_EFI_HANDOVER_32        (1u << 2)
#define XLF_EFI_HANDOVER_64        (1u << 3)
#define XLF_EFI_KEXEC              (1u << 4)
#define XLF_5LEVEL                 (1u << 5)
#define XLF_5LEVEL_ENABLED         (1u << 6)

/* --- The zero page (struct boot_params) beyond the setup header ------------ */
#define BOOT_PARAMS_SIZE          4096
#define BP_ACPI_RSDP_ADDR         0x070 /* u64 */
#define BP_EXT_RAMDISK_IMAGE      0x0c0 /* u32: initrd address, high 32 bits */
#define BP_EXT_RAMDISK_SIZE       0x0c4 /* u32: initrd size, high 32 bits */
#define BP_EXT_CMD_LINE_PTR       0x0c8 /* u32: command line address, high 32 bits */
#define BP_E820_ENTRIES           0x1e8 /* u8 */
#define BP_SENTINEL               0x1ef /* u8: must be 0 when the loader zeroes the page */
#define BP_E820_TABLE             0x2d0 /* struct boot_e820_entry[E820_MAX_ENTRIES_ZEROPAGE] */
#define E820_MAX_ENTRIES_ZEROPAGE 128
#define E820_ENTRY_SIZE           20 /* u64 addr, u64 size, u32 type (packed) */

/* e820 types */
#define E820_TYPE_RAM           1
#define E820_TYPE_RESERVED      2
#define E820_TYPE_ACPI          3
#define E820_TYPE_NVS           4
#define E820_TYPE_UNUSABLE      5
#define E820_TYPE_PMEM          7
#define E820_TYPE_RESERVED_KERN 128
