/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bootparam.h"
#include "bzimage.h"
#include "macros.h"

static const char *const bzimage_error_table[_BZIMAGE_ERR_MAX] = {
	[BZIMAGE_OK] = "valid bzImage",
	[BZIMAGE_ERR_TRUNCATED] = "file is truncated: shorter than its setup header requires",
	[BZIMAGE_ERR_TOO_LARGE] = "file is larger than the 512 MiB a kernel image may have",
	[BZIMAGE_ERR_BAD_BOOT_FLAG] = "no boot flag 0xAA55 at offset 0x1fe: not a Linux x86 kernel",
	[BZIMAGE_ERR_NO_HEADER_MAGIC] = "no \"HdrS\" setup header magic at offset 0x202",
	[BZIMAGE_ERR_PROTOCOL_TOO_OLD] = "boot protocol older than 2.12 (no 64-bit load flags)",
	[BZIMAGE_ERR_HEADER_TOO_SHORT] = "setup header ends before the fields a 2.12 header has",
	[BZIMAGE_ERR_NO_KERNEL] = "no protected-mode kernel after the setup sectors",
	[BZIMAGE_ERR_SYSSIZE] = "syssize claims more kernel code than the file contains",
	[BZIMAGE_ERR_NOT_LOADED_HIGH] = "not a bzImage (LOADED_HIGH is not set)",
	[BZIMAGE_ERR_NOT_64BIT] = "kernel has no 64-bit entry point (XLF_KERNEL_64)",
	[BZIMAGE_ERR_NOT_RELOCATABLE] = "kernel is not relocatable",
	[BZIMAGE_ERR_BAD_ALIGNMENT] =
	        "kernel_alignment or min_alignment is not a sane power of two",
	[BZIMAGE_ERR_BAD_PREF_ADDRESS] = "pref_address is not aligned to kernel_alignment",
	[BZIMAGE_ERR_BAD_INIT_SIZE] =
	        "init_size is zero, smaller than the kernel code, or too large",
	[BZIMAGE_ERR_BAD_CMDLINE_SIZE] = "cmdline_size is zero",
	[BZIMAGE_ERR_BAD_INITRD_ADDR_MAX] = "initrd_addr_max is zero",
	[BZIMAGE_ERR_BAD_VERSION_STRING] =
	        "kernel version string is missing, outside the setup area or not text",
};

const char *bzimage_error_to_string(BzImageError e) {
	if ((unsigned)e >= _BZIMAGE_ERR_MAX)
		return NULL;
	return bzimage_error_table[e];
}

int bzimage_error_to_errno(BzImageError e) {
	switch (e) {
	case BZIMAGE_OK:
		return 0;
	case BZIMAGE_ERR_TOO_LARGE:
		return -EFBIG;
	default:
		return -EBADMSG;
	}
}

static uint8_t get_u8(const uint8_t *p, size_t off) {
	return p[off];
}

static uint16_t get_u16(const uint8_t *p, size_t off) {
	return (uint16_t)(p[off] | p[off + 1] << 8);
}

static uint32_t get_u32(const uint8_t *p, size_t off) {
	return (uint32_t)p[off] | (uint32_t)p[off + 1] << 8 | (uint32_t)p[off + 2] << 16 |
	       (uint32_t)p[off + 3] << 24;
}

static uint64_t get_u64(const uint8_t *p, size_t off) {
	return get_u32(p, off) | (uint64_t)get_u32(p, off + 4) << 32;
}

static bool is_pow2(uint64_t v) {
	return v != 0 && (v & (v - 1)) == 0;
}

/*
 * The version string lives in the setup area at kernel_version + 0x200; it must
 * end (NUL) inside the data we have and inside the setup area, and be printable.
 */
static BzImageError parse_version(const uint8_t *p, size_t avail, uint32_t setup_size,
                                  char ret_version[static BZIMAGE_VERSION_MAX],
                                  char ret_release[static BZIMAGE_VERSION_MAX]) {
	uint16_t rel = get_u16(p, BP_KERNEL_VERSION);
	size_t start, end, limit, n;

	if (rel == 0)
		return BZIMAGE_ERR_BAD_VERSION_STRING;
	start = (size_t)rel + KERNEL_VERSION_BIAS;
	limit = MIN((size_t)setup_size, avail);
	if (start >= limit)
		return BZIMAGE_ERR_BAD_VERSION_STRING;

	for (end = start; end < limit && p[end] != 0; end++)
		if (p[end] < 0x20 || p[end] >= 0x7f)
			return BZIMAGE_ERR_BAD_VERSION_STRING;
	if (end >= limit || end == start)
		return BZIMAGE_ERR_BAD_VERSION_STRING;

	/* Keep at most BZIMAGE_VERSION_MAX - 1 characters. */
	n = MIN(end - start, (size_t)BZIMAGE_VERSION_MAX - 1);
	memcpy(ret_version, p + start, n);
	ret_version[n] = 0;

	for (n = 0; ret_version[n] && ret_version[n] != ' '; n++)
		ret_release[n] = ret_version[n];
	ret_release[n] = 0;
	if (n == 0)
		return BZIMAGE_ERR_BAD_VERSION_STRING;
	return BZIMAGE_OK;
}

BzImageError bzimage_parse_prefix(const void *data, size_t avail, uint64_t file_size,
                                  struct bzimage_info *ret_info) {
	const uint8_t *p = data;
	struct bzimage_info info = {};
	unsigned setup_sects;
	BzImageError r;

	if (!data || avail > file_size)
		return BZIMAGE_ERR_TRUNCATED;
	if (file_size > BZIMAGE_MAX_SIZE)
		return BZIMAGE_ERR_TOO_LARGE;

	/* 1. Magic numbers: the boot flag, then the "HdrS" header and its version. */
	if (avail < BP_BOOT_FLAG + 2)
		return BZIMAGE_ERR_TRUNCATED;
	if (get_u16(p, BP_BOOT_FLAG) != BOOT_FLAG_MAGIC)
		return BZIMAGE_ERR_BAD_BOOT_FLAG;
	if (avail < BP_VERSION + 2)
		return BZIMAGE_ERR_TRUNCATED;
	if (get_u32(p, BP_HEADER) != SETUP_HEADER_MAGIC)
		return BZIMAGE_ERR_NO_HEADER_MAGIC;
	info.protocol = get_u16(p, BP_VERSION);
	if (info.protocol < BOOT_PROTOCOL_MIN)
		return BZIMAGE_ERR_PROTOCOL_TOO_OLD;

	/* 2. The header's own length (from the jump) must cover every field we read. */
	info.header_end = SETUP_HEADER_JUMP_BASE + get_u8(p, BP_JUMP + 1);
	if (info.header_end < SETUP_HEADER_MIN_END)
		return BZIMAGE_ERR_HEADER_TOO_SHORT;
	if (avail < info.header_end)
		return BZIMAGE_ERR_TRUNCATED;

	/* 3. Sizes: setup sectors, then a protected-mode kernel that syssize covers. */
	setup_sects = get_u8(p, BP_SETUP_SECTS);
	if (setup_sects == 0)
		setup_sects = SETUP_SECTS_DEFAULT;
	info.setup_size = (setup_sects + 1) * SECTOR_SIZE;
	if (info.header_end > info.setup_size)
		return BZIMAGE_ERR_HEADER_TOO_SHORT;
	if (file_size <= info.setup_size)
		return BZIMAGE_ERR_NO_KERNEL;
	info.kernel_offset = info.setup_size;
	info.kernel_size = file_size - info.setup_size;
	info.syssize_bytes = (uint64_t)get_u32(p, BP_SYSSIZE) * 16;
	if (info.syssize_bytes == 0 || info.syssize_bytes > info.kernel_size)
		return BZIMAGE_ERR_SYSSIZE;

	/* 4. A 64-bit, relocatable bzImage. */
	info.loadflags = get_u8(p, BP_LOADFLAGS);
	info.xloadflags = get_u16(p, BP_XLOADFLAGS);
	if (!(info.loadflags & LOADFLAG_LOADED_HIGH))
		return BZIMAGE_ERR_NOT_LOADED_HIGH;
	if (!(info.xloadflags & XLF_KERNEL_64))
		return BZIMAGE_ERR_NOT_64BIT;
	if (get_u8(p, BP_RELOCATABLE_KERNEL) == 0)
		return BZIMAGE_ERR_NOT_RELOCATABLE;
	info.can_load_above_4g = info.xloadflags & XLF_CAN_BE_LOADED_ABOVE_4G;

	/* 5. Placement constraints. */
	info.kernel_alignment = get_u32(p, BP_KERNEL_ALIGNMENT);
	info.min_alignment = get_u8(p, BP_MIN_ALIGNMENT);
	if (!is_pow2(info.kernel_alignment) || info.kernel_alignment < 4096 ||
	    info.kernel_alignment > BZIMAGE_MAX_ALIGNMENT || info.min_alignment < 12 ||
	    ((uint64_t)1 << MIN(info.min_alignment, 63)) > info.kernel_alignment)
		return BZIMAGE_ERR_BAD_ALIGNMENT;
	info.pref_address = get_u64(p, BP_PREF_ADDRESS);
	if (info.pref_address % info.kernel_alignment != 0)
		return BZIMAGE_ERR_BAD_PREF_ADDRESS;
	info.init_size = get_u32(p, BP_INIT_SIZE);
	if (info.init_size == 0 || info.init_size < info.syssize_bytes ||
	    info.init_size > BZIMAGE_MAX_INIT_SIZE)
		return BZIMAGE_ERR_BAD_INIT_SIZE;
	info.cmdline_size = get_u32(p, BP_CMDLINE_SIZE);
	if (info.cmdline_size == 0)
		return BZIMAGE_ERR_BAD_CMDLINE_SIZE;
	info.initrd_addr_max = get_u32(p, BP_INITRD_ADDR_MAX);
	if (info.initrd_addr_max == 0)
		return BZIMAGE_ERR_BAD_INITRD_ADDR_MAX;

	/* 6. The version string, which names the kernel. */
	r = parse_version(p, avail, info.setup_size, info.version, info.release);
	if (r != BZIMAGE_OK)
		return r;

	*ret_info = info;
	return BZIMAGE_OK;
}

BzImageError bzimage_parse(const void *data, size_t size, struct bzimage_info *ret_info) {
	return bzimage_parse_prefix(data, size, size, ret_info);
}

int bzimage_parse_file(const char *path, struct bzimage_info *ret_info, BzImageError *ret_error) {
	_cleanup_close_ int fd = -EBADF;
	_cleanup_free_ uint8_t *buf = NULL;
	struct bzimage_info info;
	struct stat st;
	size_t want, got = 0;
	BzImageError e;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return S_ISDIR(st.st_mode) ? -EISDIR : -EBADFD;

	want = (size_t)MIN((uint64_t)st.st_size, (uint64_t)BZIMAGE_SETUP_MAX_SIZE);
	buf = malloc(MAX(want, (size_t)1));
	if (!buf)
		return -ENOMEM;
	while (got < want) {
		ssize_t n = read(fd, buf + got, want - got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break; /* shrank under us: parse reports it truncated */
		got += n;
	}

	e = bzimage_parse_prefix(buf, got, (uint64_t)st.st_size, &info);
	if (ret_error)
		*ret_error = e;
	if (e != BZIMAGE_OK)
		return bzimage_error_to_errno(e);
	if (ret_info)
		*ret_info = info;
	return 0;
}

int bzimage_kernel_release(const char *path, char **ret_release, BzImageError *ret_error) {
	struct bzimage_info info;
	char *s;
	int r;

	r = bzimage_parse_file(path, &info, ret_error);
	if (r < 0)
		return r;
	s = strdup(info.release);
	if (!s)
		return -ENOMEM;
	*ret_release = s;
	return 0;
}
