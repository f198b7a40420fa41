/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>

/* Reads every record currently in path (normally /dev/kmsg) without blocking,
 * newline-separated; a regular file (tests) is read to its end. */
int kmsg_read_all(const char *path, char **ret_text, size_t *ret_size);
