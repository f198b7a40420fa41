/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What stage recorded of one file it staged (the kernel, the initrd): image.c checks against it
 * that the file is still the one staged, the update record (core/update.h) persists it.
 */

#include <stdint.h>

#include "digest.h"

typedef struct UpdateFile {
	char *path;
	uint64_t size;
	uint64_t mtime_usec;
	/* Which file it was at stage time: a rename over it changes the inode, a rewrite
	 * the ctime (which, unlike the mtime, cannot be set back). 0: not recorded. */
	uint64_t inode;
	uint64_t ctime_usec;
	char sha256[DIGEST_SHA256_HEX_SIZE];
} UpdateFile;
