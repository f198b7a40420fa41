/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The arm64 kernel image (arm64-image.h): unwrap (gzip, EFI zboot), then the
 * 64-byte header of booting.rst, every field checked.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "arm64-image.h"
#include "fileio.h"
#include "macros.h"

#define GZIP_MAGIC0       0x1f
#define GZIP_MAGIC1       0x8b
#define INFLATE_CHUNK     ((size_t)4 << 20)
#define TEXT_OFFSET_GRAIN 4096

static const char *const error_table[_ARM64_IMAGE_ERR_MAX] = {
	[ARM64_IMAGE_OK] = "valid arm64 Image",
	[ARM64_IMAGE_ERR_TRUNCATED] = "the file is shorter than the 64-byte arm64 Image header",
	[ARM64_IMAGE_ERR_TOO_LARGE] = "the kernel (or what it inflates to) is larger than 256 MiB",
	[ARM64_IMAGE_ERR_BAD_MAGIC] = "no arm64 Image magic (\"ARM\\x64\" at offset 56)",
	[ARM64_IMAGE_ERR_BIG_ENDIAN] = "the Image is a big-endian kernel",
	[ARM64_IMAGE_ERR_NO_IMAGE_SIZE] =
	        "the Image's image_size is 0 (a pre-3.17 kernel whose size is unknown)",
	[ARM64_IMAGE_ERR_BAD_IMAGE_SIZE] =
	        "the Image's image_size is smaller than the file or larger than 1 GiB",
	[ARM64_IMAGE_ERR_BAD_TEXT_OFFSET] =
	        "the Image's text_offset is not 4 KiB aligned or not below 2 MiB",
	[ARM64_IMAGE_ERR_BAD_FLAGS] = "the Image's flags have reserved bits set",
	[ARM64_IMAGE_ERR_COMPRESSED] = "the gzip (or EFI zboot) kernel does not inflate",
	[ARM64_IMAGE_ERR_ZBOOT_UNSUPPORTED] =
	        "the EFI zboot kernel's payload is not gzip (only gzip is inflated)",
};

const char *arm64_image_error_to_string(Arm64ImageError e) {
	return (unsigned)e < _ARM64_IMAGE_ERR_MAX ? error_table[e] : NULL;
}

int arm64_image_error_to_errno(Arm64ImageError e) {
	return e == ARM64_IMAGE_OK ? 0 : e == ARM64_IMAGE_ERR_TOO_LARGE ? -EFBIG : -EBADMSG;
}

static uint32_t get_le32(const uint8_t *p) {
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_le64(const uint8_t *p) {
	return (uint64_t)get_le32(p) | (uint64_t)get_le32(p + 4) << 32;
}

/* The first word after ARM64_IMAGE_BANNER in the Image, or "" (a kernel needs no
 * banner to boot: its absence is not an error). */
static void find_release(const uint8_t *d, size_t size, char ret[static ARM64_IMAGE_RELEASE_MAX]) {
	const size_t bl = strlen(ARM64_IMAGE_BANNER);
	const uint8_t *p = d, *end = d + size;

	ret[0] = '\0';
	while ((p = memmem(p, end - p, ARM64_IMAGE_BANNER, bl))) {
		size_t n = 0;

		p += bl;
		while (p + n < end && n < ARM64_IMAGE_RELEASE_MAX - 1 && p[n] > ' ' && p[n] < 0x7f)
			n++;
		/* The banner format string (with %s) also lives in the image: skip it. */
		if (n == 0 || memchr(p, '%', n))
			continue;
		memcpy(ret, p, n);
		ret[n] = '\0';
		return;
	}
}

Arm64ImageError arm64_image_parse(const void *data, size_t size,
                                  struct arm64_image_info *ret_info) {
	const uint8_t *d = data;
	struct arm64_image_info info = {};
	unsigned pages;

	if (!d || size < ARM64_IMAGE_HEADER_SIZE)
		return ARM64_IMAGE_ERR_TRUNCATED;
	if (size > ARM64_IMAGE_MAX_SIZE)
		return ARM64_IMAGE_ERR_TOO_LARGE;
	if (get_le32(d + ARM64_IMAGE_MAGIC_OFFSET) != ARM64_IMAGE_MAGIC)
		return ARM64_IMAGE_ERR_BAD_MAGIC;
	info.text_offset = get_le64(d + ARM64_IMAGE_TEXT_OFFSET_OFF);
	info.image_size = get_le64(d + ARM64_IMAGE_SIZE_OFF);
	info.flags = get_le64(d + ARM64_IMAGE_FLAGS_OFF);
	if (info.image_size == 0)
		return ARM64_IMAGE_ERR_NO_IMAGE_SIZE;
	if (info.flags & ARM64_IMAGE_FLAG_BE)
		return ARM64_IMAGE_ERR_BIG_ENDIAN;
	if (info.flags & ~ARM64_IMAGE_FLAGS_KNOWN)
		return ARM64_IMAGE_ERR_BAD_FLAGS;
	if (info.image_size < size || info.image_size > ARM64_IMAGE_MAX_IMAGE_SIZE)
		return ARM64_IMAGE_ERR_BAD_IMAGE_SIZE;
	if (info.text_offset >= ARM64_IMAGE_BASE_ALIGN || info.text_offset % TEXT_OFFSET_GRAIN)
		return ARM64_IMAGE_ERR_BAD_TEXT_OFFSET;
	pages = (info.flags & ARM64_IMAGE_FLAG_PAGE_MASK) >> ARM64_IMAGE_FLAG_PAGE_SHIFT;
	info.page_size = pages == 0 ? 0 : pages == 1 ? 4096 : pages == 2 ? 16384 : 65536;
	info.phys_anywhere = info.flags & ARM64_IMAGE_FLAG_PHYS_ANY;
	info.pe_stub = d[0] == 'M' && d[1] == 'Z';
	info.file_size = size;
	find_release(d, size, info.release);
	*ret_info = info;
	return ARM64_IMAGE_OK;
}

/* Inflates the gzip stream in[0..n) into a new buffer of at most ARM64_IMAGE_MAX_SIZE. */
static Arm64ImageError gunzip(const uint8_t *in, size_t n, uint8_t **ret, size_t *ret_size) {
	_cleanup_free_ uint8_t *out = NULL;
	size_t cap = 0;
	z_stream z = {};
	int zr;

	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
		return ARM64_IMAGE_ERR_COMPRESSED;
	z.next_in = (Bytef *)in;
	z.avail_in = n > UINT32_MAX ? UINT32_MAX : (uInt)n;
	do {
		if (z.total_out == cap) {
			uint8_t *p;

			if (cap >= ARM64_IMAGE_MAX_SIZE) {
				inflateEnd(&z);
				return ARM64_IMAGE_ERR_TOO_LARGE;
			}
			cap = MIN(cap + INFLATE_CHUNK, (size_t)ARM64_IMAGE_MAX_SIZE);
			p = realloc(out, cap);
			if (!p) {
				inflateEnd(&z);
				return ARM64_IMAGE_ERR_TOO_LARGE;
			}
			out = p;
		}
		z.next_out = out + z.total_out;
		z.avail_out = (uInt)(cap - z.total_out);
		zr = inflate(&z, Z_NO_FLUSH);
	} while (zr == Z_OK);
	*ret_size = z.total_out;
	inflateEnd(&z);
	if (zr != Z_STREAM_END)
		return ARM64_IMAGE_ERR_COMPRESSED;
	*ret = TAKE_PTR(out);
	return ARM64_IMAGE_OK;
}

bool arm64_image_sniff(const void *data, size_t size) {
	const uint8_t *d = data;

	if (size >= 2 && d[0] == GZIP_MAGIC0 && d[1] == GZIP_MAGIC1)
		return true;
	if (size >= ARM64_ZBOOT_HEADER_SIZE && d[0] == 'M' && d[1] == 'Z' &&
	    memcmp(d + ARM64_ZBOOT_MAGIC_OFF, ARM64_ZBOOT_MAGIC, 4) == 0)
		return true;
	return size >= ARM64_IMAGE_HEADER_SIZE &&
	       get_le32(d + ARM64_IMAGE_MAGIC_OFFSET) == ARM64_IMAGE_MAGIC;
}

Arm64ImageError arm64_image_unwrap_parse(uint8_t **data, size_t *size,
                                         struct arm64_image_info *ret_info) {
	const uint8_t *d = *data;
	_cleanup_free_ uint8_t *out = NULL;
	Arm64ImageWrap wrap = ARM64_IMAGE_WRAP_NONE;
	size_t out_size = 0;
	Arm64ImageError e;

	if (*size > ARM64_IMAGE_MAX_SIZE)
		return ARM64_IMAGE_ERR_TOO_LARGE;
	if (*size >= 2 && d[0] == GZIP_MAGIC0 && d[1] == GZIP_MAGIC1) {
		wrap = ARM64_IMAGE_WRAP_GZIP;
		e = gunzip(d, *size, &out, &out_size);
	} else if (*size >= ARM64_ZBOOT_HEADER_SIZE && d[0] == 'M' && d[1] == 'Z' &&
	           memcmp(d + ARM64_ZBOOT_MAGIC_OFF, ARM64_ZBOOT_MAGIC, 4) == 0) {
		uint64_t off = get_le32(d + ARM64_ZBOOT_PAYLOAD_OFF);
		uint64_t len = get_le32(d + ARM64_ZBOOT_PAYLOAD_SIZE);

		wrap = ARM64_IMAGE_WRAP_ZBOOT;
		if (memcmp(d + ARM64_ZBOOT_COMP_OFF, "gzip", 5) != 0)
			return ARM64_IMAGE_ERR_ZBOOT_UNSUPPORTED;
		if (off > *size || len > *size - off)
			return ARM64_IMAGE_ERR_TRUNCATED;
		e = gunzip(d + off, len, &out, &out_size);
	} else
		return arm64_image_parse(d, *size, ret_info);
	if (e != ARM64_IMAGE_OK)
		return e;

	e = arm64_image_parse(out, out_size, ret_info);
	if (e != ARM64_IMAGE_OK)
		return e;
	ret_info->wrap = wrap;
	free(*data);
	*data = TAKE_PTR(out);
	*size = out_size;
	return ARM64_IMAGE_OK;
}

int arm64_image_kernel_release(const char *path, char **ret_release, Arm64ImageError *ret_error) {
	_cleanup_free_ char *data = NULL;
	struct arm64_image_info info;
	Arm64ImageError e;
	size_t size;
	uint8_t *buf;
	char *s;
	int r;

	r = read_file_full(path, ARM64_IMAGE_MAX_SIZE, &data, &size);
	if (r == -EFBIG && ret_error)
		*ret_error = ARM64_IMAGE_ERR_TOO_LARGE;
	if (r < 0)
		return r;
	buf = (uint8_t *)TAKE_PTR(data);
	e = arm64_image_unwrap_parse(&buf, &size, &info);
	free(buf);
	if (ret_error)
		*ret_error = e;
	if (e != ARM64_IMAGE_OK)
		return arm64_image_error_to_errno(e);
	if (!info.release[0])
		return -ENODATA;
	s = strdup(info.release);
	if (!s)
		return -ENOMEM;
	*ret_release = s;
	return 0;
}
