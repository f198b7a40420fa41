/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The purgatory blob this build embeds (purgatory/, blob-to-c.py): its own
 * architecture's only. A file of its own so that tests can wrap the call. */

#include <errno.h>

#include "loader-internal.h"

extern const unsigned char purgatory_blob[];
extern const size_t purgatory_blob_size;

int loader_purgatory_blob(LoaderArch arch, const uint8_t **ret_blob, size_t *ret_size) {
	if (arch != LOADER_ARCH_NATIVE)
		return -EOPNOTSUPP;
	*ret_blob = purgatory_blob;
	*ret_size = purgatory_blob_size;
	return 0;
}
