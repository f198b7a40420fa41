/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The lab's real payload for the benchmarks: kernel 6.1.0-57 and its initrd.
 * Each directory given is searched for vmlinuz-6.1.0-57* and
 * initrd.img-6.1.0-57* (also under boot/ and root/boot/), and first in the lab
 * cache's images/<key>/, newest first: the lab image's /boot, the very files a
 * lab run kexecs. The first directory with a vmlinuz wins.
 */

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "macros.h"

#define PAYLOAD_KERNEL_PREFIX "vmlinuz-6.1.0-57"
#define PAYLOAD_INITRD_PREFIX "initrd.img-6.1.0-57"

static inline char *bench_find_file(const char *dir, const char *prefix) {
	const char *subdirs[] = { "", "/boot", "/root/boot" };

	for (size_t i = 0; i < ELEMENTSOF(subdirs); i++) {
		_cleanup_free_ char *d = NULL;
		DIR *dp;
		struct dirent *de;
		char *found = NULL;

		if (asprintf(&d, "%s%s", dir, subdirs[i]) < 0)
			return NULL;
		dp = opendir(d);
		if (!dp)
			continue;
		while (!found && (de = readdir(dp)))
			if (strncmp(de->d_name, prefix, strlen(prefix)) == 0)
				if (asprintf(&found, "%s/%s", d, de->d_name) < 0)
					found = NULL;
		closedir(dp);
		if (found)
			return found;
	}
	return NULL;
}

/* The lab cache keeps one directory per image recipe (tests/lab/build-image):
 * DIR/images/<key>/ holds the image's vmlinuz and initrd. The newest one that
 * has the payload's kernel, or NULL. */
static inline char *bench_newest_image_dir(const char *dir) {
	_cleanup_free_ char *images = NULL;
	char *best = NULL;
	time_t best_mtime = 0;
	struct dirent *de;
	DIR *dp;

	if (asprintf(&images, "%s/images", dir) < 0)
		return NULL;
	dp = opendir(images);
	if (!dp)
		return NULL;
	while ((de = readdir(dp))) {
		_cleanup_free_ char *d = NULL, *k = NULL;
		struct stat st;

		if (de->d_name[0] == '.' || asprintf(&d, "%s/%s", images, de->d_name) < 0)
			continue;
		k = bench_find_file(d, PAYLOAD_KERNEL_PREFIX);
		if (!k || stat(d, &st) < 0 || (best && st.st_mtime <= best_mtime))
			continue;
		free(best);
		best = TAKE_PTR(d);
		best_mtime = st.st_mtime;
	}
	closedir(dp);
	return best;
}

/* Sets *ret_kernel (NULL when none is found) and *ret_initrd (NULL without one). */
static inline void bench_find_payload(int n, char **dirs, char **ret_kernel, char **ret_initrd) {
	*ret_kernel = *ret_initrd = NULL;
	for (int i = 0; i < n && !*ret_kernel; i++) {
		_cleanup_free_ char *image = bench_newest_image_dir(dirs[i]);
		const char *dir = image ?: dirs[i];

		*ret_kernel = bench_find_file(dir, PAYLOAD_KERNEL_PREFIX);
		if (*ret_kernel)
			*ret_initrd = bench_find_file(dir, PAYLOAD_INITRD_PREFIX);
	}
}
