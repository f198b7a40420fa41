/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The two ways the loader reads the kernel's sysfs tables (/sys/firmware/memmap,
 * /sys/firmware/efi/runtime-map): one small file per field, each a "0x"-prefixed hex
 * number. Private to the loader.
 */

#include <stdint.h>

/* "0x" followed by hex digits and nothing else (no sign, no space): 0 or -EINVAL. */
int sysfs_parse_hex(const char *s, uint64_t *ret);

/* dir/name/field (at most 4 KiB) into a string without surrounding white space. */
int sysfs_read_field(const char *dir, const char *name, const char *field, char **ret);
