/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

/* Absolute, no empty, "." or ".." components, no trailing slash (except "/"). */
bool path_is_normalized(const char *p);
bool path_is_absolute(const char *p);

/* If path equals prefix or lies below it (component-wise), returns the rest of
 * path without leading slashes ("" when equal); otherwise NULL. */
const char *path_startswith(const char *path, const char *prefix);

/* Joins two parts with exactly one slash between them. */
int path_join(const char *a, const char *b, char **ret);

/* Prefixes path with root ("--root=DIR"). root NULL, "" or "/" means no prefix. */
int path_prefix_root(const char *root, const char *path, char **ret);

/* True when root names this system's own root directory: NULL, "", or any spelling of a
 * directory with the device and inode of "/" ("//", "/tmp/..", a symbolic link to it, a bind
 * mount of it). What cannot be looked at is not the root. */
bool path_is_real_root(const char *root);

/* True when path (normalized) is one of roots or below one of them. */
bool path_is_below_any(const char *path, char *const *roots);

/* The last component ("vmlinuz-6.1" of "/boot/vmlinuz-6.1"), or NULL for "/". */
const char *path_basename(const char *p);
