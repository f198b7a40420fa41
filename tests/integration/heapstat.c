/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * TEST-ONLY, preloaded into the daemon by bench-stage-cancel.sh: tells a growing structure
 * from a fragmented heap. VmRSS alone cannot: both make it rise.
 *
 * With HEAPSTAT_DIR set, a thread waits on the FIFO $HEAPSTAT_DIR/req. For each byte read
 * it answers one line on the FIFO $HEAPSTAT_DIR/resp:
 *   's'  "INUSE FREE MMAPPED": mallinfo2()'s uordblks, fordblks and hblkhd, in bytes
 *   't'  the same, after malloc_trim(0) gave back what it can
 * Nothing else of the daemon changes; the thread allocates nothing.
 */

#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char req_path[PATH_MAX], resp_path[PATH_MAX];

static void answer(char what) {
	struct mallinfo2 mi;
	char line[96];
	int fd, len;

	if (what == 't')
		(void)malloc_trim(0);
	mi = mallinfo2();
	len = snprintf(line, sizeof(line), "%zu %zu %zu\n", mi.uordblks, mi.fordblks, mi.hblkhd);
	fd = open(resp_path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (write(fd, line, (size_t)len) != len) {
		/* the reader went away: it sees a short line and says so */
	}
	close(fd);
}

static void *serve(void *arg) {
	(void)arg;
	for (;;) {
		char buf[16];
		ssize_t n;
		int fd = open(req_path, O_RDONLY | O_CLOEXEC);

		if (fd < 0)
			return NULL;
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			for (ssize_t i = 0; i < n; i++)
				if (buf[i] == 's' || buf[i] == 't')
					answer(buf[i]);
		close(fd);
	}
}

__attribute__((constructor)) static void heapstat_init(void) {
	const char *dir = getenv("HEAPSTAT_DIR");
	pthread_t t;

	if (!dir || snprintf(req_path, sizeof(req_path), "%s/req", dir) >= (int)sizeof(req_path) ||
	    snprintf(resp_path, sizeof(resp_path), "%s/resp", dir) >= (int)sizeof(resp_path))
		return;
	if (pthread_create(&t, NULL, serve, NULL) == 0)
		pthread_detach(t);
}
