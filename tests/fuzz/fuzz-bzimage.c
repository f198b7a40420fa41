/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * libFuzzer target for the bzImage header parser. Any input must either be
 * rejected with a named error or produce an info whose invariants hold; the
 * prefix parser must agree with the whole-image parser.
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bzimage.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	struct bzimage_info info, prefix_info;
	BzImageError e, pe;
	size_t avail;

	e = bzimage_parse(data, size, &info);
	if (!bzimage_error_to_string(e))
		abort();
	if (e == BZIMAGE_OK) {
		if (info.setup_size >= size || info.kernel_offset + info.kernel_size != size ||
		    info.syssize_bytes > info.kernel_size || info.header_end > info.setup_size)
			abort();
		if (strnlen(info.version, BZIMAGE_VERSION_MAX) >= BZIMAGE_VERSION_MAX ||
		    strncmp(info.version, info.release, strlen(info.release)) != 0 ||
		    info.release[0] == 0)
			abort();
		if (info.kernel_alignment == 0 || info.pref_address % info.kernel_alignment != 0)
			abort();
	}

	/* Reading only the setup area of the same file gives the same answer. */
	avail = size < BZIMAGE_SETUP_MAX_SIZE ? size : BZIMAGE_SETUP_MAX_SIZE;
	pe = bzimage_parse_prefix(data, avail, size, &prefix_info);
	if (pe != e || (e == BZIMAGE_OK && memcmp(&info, &prefix_info, sizeof(info)) != 0))
		abort();
	return 0;
}
