/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Replaces path with data so that a crash or power cut at any moment leaves
 * either the old or the new content, never a mix: write a temporary file in the
 * same directory, fsync it, rename it over path, fsync the directory.
 */
int write_file_atomic(const char *path, const void *data, size_t size, mode_t mode);

/* Reads a whole file of at most max_size bytes. The buffer is NUL-terminated
 * (not counted in *ret_size). -EFBIG when the file is larger than max_size. */
int read_file_full(const char *path, size_t max_size, char **ret_data, size_t *ret_size);

/* The same for path below root (NULL or "/": the host), as path_prefix_root() joins them. */
int read_root_file(const char *root, const char *path, size_t max_size, char **ret_data,
                   size_t *ret_size);

/* Creates path and its missing parents with mode. Existing directories are fine. */
/* A small file that holds one unsigned decimal and whitespace (sysfs, procfs). */
int read_u64_file(const char *path, unsigned long long *ret);

int mkdir_p(const char *path, mode_t mode);

/* Writes all of buf to fd, retrying on EINTR and short writes. */
int write_all(int fd, const void *buf, size_t size);

/* One read(2) (offset < 0) or pread(2) at offset, retried on EINTR: the number of bytes
 * read (0 at the end of the file) or -errno. */
ssize_t read_at(int fd, void *buf, size_t size, int64_t offset);
