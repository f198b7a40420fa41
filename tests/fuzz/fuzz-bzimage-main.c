/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Corpus replayer for builds without libFuzzer: runs the target over every file
 * given (directories are walked one level), so the committed corpus and every
 * regression input run in the unit suite, under valgrind and under ASan.
 */

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fileio.h"
#include "macros.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
	_cleanup_free_ char *data = NULL;
	size_t size;
	int r;

	r = read_file_full(path, 64u << 20, &data, &size);
	if (r < 0) {
		fprintf(stderr, "Failed to read '%s': %s\n", path, strerror(-r));
		return r;
	}
	LLVMFuzzerTestOneInput((const uint8_t *)data, size);
	return 0;
}

int main(int argc, char **argv) {
	unsigned n = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;
		DIR *d;
		struct dirent *de;

		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "Failed to stat '%s': %m\n", argv[i]);
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (replay_file(argv[i]) < 0)
				return 1;
			n++;
			continue;
		}
		d = opendir(argv[i]);
		if (!d)
			return 1;
		while ((de = readdir(d))) {
			_cleanup_free_ char *p = NULL;

			if (de->d_name[0] == '.')
				continue;
			if (asprintf(&p, "%s/%s", argv[i], de->d_name) < 0 || replay_file(p) < 0) {
				closedir(d);
				return 1;
			}
			n++;
		}
		closedir(d);
	}
	printf("replayed %u inputs\n", n);
	/* An empty corpus proves nothing. */
	return n > 0 ? 0 : 1;
}
