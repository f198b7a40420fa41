/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * upgraded-libvirt-hook: libvirt's qemu hook for the keep-ram strategy, installed as
 * /etc/libvirt/hooks/qemu.d/upgraded (libvirt runs every executable there, and reads the
 * directory only when libvirtd starts).
 *
 * Usage (by libvirtd): upgraded-libvirt-hook [--root=DIR] DOMAIN OPERATION SUB-OPERATION EXTRA,
 * the domain XML on stdin. Only "start begin" does something: libvirt has created the domain's
 * memory directory (named after its NEW id) and QEMU has not opened its RAM file yet. When the
 * daemon left a keep-ram entry for this domain's uuid and its managed save image exists, the
 * kept RAM file is checked (root's alone since the save, its trusted generation mark, size,
 * inode, no writer, the digest where the entry has one) and hard-linked into place
 * (keep-ram-hook.c); if it cannot be trusted the hook exits non-zero, libvirt aborts the start,
 * and the image and the file stay as they are: a QEMU never runs on zeroed or foreign memory.
 *
 * Then, when the XML carries keep-ram's own extra monitor (exactly the argument keep-ram writes
 * for this uuid: the path is never taken from the XML), a detached child drops to the QEMU
 * user's ids, connects to that monitor (server=on,wait=on: QEMU waits for it before its main
 * loop), turns on x-ignore-shared ahead of libvirt's migrate-incoming, and turns it off again
 * once the incoming migration is over, so that a later plain managed save writes the RAM again.
 * Its log: STATE_DIR/<uuid>.qmp.log.
 */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "keep-ram-hook.h"
#include "qmp.h"
#include "fileio.h"
#include "macros.h"

#define XML_MAX             KEEP_RAM_XML_MAX
#define HELPER_CONNECT_USEC (120ULL * 1000000ULL)
#define HELPER_MIGRATE_USEC (600ULL * 1000000ULL)
#define HELPER_POLL_USEC    50000ULL

static const char *arg_root = "";

static int read_stdin(char **ret, size_t *ret_len) {
	size_t len = 0, cap = 0;
	char *buf = NULL;

	for (;;) {
		ssize_t n;

		if (len + 4096 + 1 > cap) {
			char *b;
			cap = cap ? cap * 2 : 65536;
			if (cap > XML_MAX || !(b = realloc(buf, cap))) {
				free(buf);
				return -EFBIG;
			}
			buf = b;
		}
		n = read(STDIN_FILENO, buf + len, cap - len - 1);
		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			free(buf);
			return -errno;
		}
		len += (size_t)n;
	}
	buf = buf ?: calloc(1, 1);
	if (!buf)
		return -ENOMEM;
	buf[len] = 0;
	*ret = buf;
	*ret_len = len;
	return 0;
}

static void helper_log(FILE *f, const char *fmt, ...) _printf_(2, 3);
static void helper_log(FILE *f, const char *fmt, ...) {
	struct timespec ts;
	va_list ap;

	if (!f)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	fprintf(f, "%lld.%06ld ", (long long)ts.tv_sec, ts.tv_nsec / 1000);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	fflush(f);
}

/*
 * The detached child. With on: the capability on before migrate-incoming, off once the
 * incoming migration is over. Without (a start that does not restore on kept RAM, but whose
 * XML still carries the monitor, e.g. a checkpoint after a keep-ram restore): it only makes
 * sure the capability is off, and lets QEMU, which waits for a client, go on.
 */
static int helper_run(const char *sock, bool on, FILE *log) {
	uint64_t t0 = qmp_now(), deadline;
	_cleanup_free_ char *error = NULL;
	Qmp *q = NULL;
	int k;

	k = qmp_connect(sock, t0 + HELPER_CONNECT_USEC, &q);
	if (k < 0) {
		helper_log(log, "connect '%s' failed: %s", sock, strerror(-k));
		return k;
	}
	k = qmp_negotiate_and_set(q, "x-ignore-shared", on, qmp_now() + HELPER_CONNECT_USEC,
	                          &error);
	helper_log(log, "x-ignore-shared %s: %s after %.3f s", on ? "on" : "off",
	           k < 0 ? strna(error) : "ok", (double)(qmp_now() - t0) / 1e6);
	deadline = qmp_now() + HELPER_MIGRATE_USEC;
	while (on && k >= 0) {
		_cleanup_free_ char *status = NULL;

		k = qmp_run_state(q, deadline, &status);
		if (k >= 0 && !streq(status, "inmigrate")) {
			helper_log(log, "incoming migration over (%s)", status);
			break;
		}
		usleep(HELPER_POLL_USEC);
	}
	if (on && k >= 0) {
		free(error);
		error = NULL;
		k = qmp_execute(q,
		                "{\"execute\":\"migrate-set-capabilities\",\"arguments\":"
		                "{\"capabilities\":[{\"capability\":\"x-ignore-shared\","
		                "\"state\":false}]}}",
		                qmp_now() + HELPER_CONNECT_USEC, NULL, &error);
		helper_log(log, "x-ignore-shared off: %s", k < 0 ? strna(error) : "ok");
	} else if (k < 0)
		helper_log(log, "monitor: %s", strerror(-k));
	qmp_close(q);
	return k;
}

/* Forks the helper; the hook itself returns at once (libvirt waits for it). */
static int helper_spawn(const char *state_dir, const KeepRamHookStart *st) {
	_cleanup_free_ char *log_path = NULL;
	FILE *log = NULL;
	pid_t pid;
	int fd;

	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0)
		return 0;

	(void)setsid();
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
	}
	if (mkdir_p(state_dir, 0700) >= 0 &&
	    asprintf(&log_path, "%s/%s.qmp.log", state_dir, st->uuid) >= 0)
		log = fopen(log_path, "ae");
	/* The monitor is the QEMU user's socket in a directory of that user's: the helper talks
	 * to it with that user's rights and no more (the log stays open). */
	if (setgroups(0, NULL) < 0 ||
	    setresgid(st->socket_gid, st->socket_gid, st->socket_gid) < 0 ||
	    setresuid(st->socket_uid, st->socket_uid, st->socket_uid) < 0) {
		helper_log(log, "cannot drop to %u:%u: %s", (unsigned)st->socket_uid,
		           (unsigned)st->socket_gid, strerror(errno));
		_exit(EXIT_FAILURE);
	}
	_exit(helper_run(st->socket, st->linked, log) < 0 ? EXIT_FAILURE : EXIT_SUCCESS);
}

int main(int argc, char *argv[]) {
	static const struct option options[] = {
		{ "root", required_argument, NULL, 'r' },
		{},
	};
	_cleanup_free_ char *xml = NULL, *state_dir = NULL, *msg = NULL;
	KeepRamHookStart st = {};
	size_t len = 0;
	int c, k;

	while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
		if (c == 'r')
			arg_root = optarg;
		else
			return EXIT_FAILURE;
	if (argc - optind < 3) {
		fprintf(stderr, "usage: %s [--root=DIR] DOMAIN OPERATION SUB-OPERATION [EXTRA]\n",
		        argv[0]);
		return EXIT_FAILURE;
	}
	k = read_stdin(&xml, &len);
	if (!streq(argv[optind + 1], "start") || !streq(argv[optind + 2], "begin"))
		return EXIT_SUCCESS;
	if (k < 0) {
		fprintf(stderr, "upgraded: cannot read the domain XML: %s\n", strerror(-k));
		return EXIT_FAILURE;
	}
	if (asprintf(&state_dir, "%s%s", arg_root, KEEP_RAM_STATE_DIR) < 0)
		return EXIT_FAILURE;

	k = keep_ram_hook_start(arg_root, xml, len, &st, &msg);
	if (msg)
		fprintf(stderr, "upgraded: %s\n", msg);
	if (k >= 0 && st.monitor) {
		k = keep_ram_socket_dir_prepare(arg_root, st.uuid, st.socket_uid, st.socket_gid);
		if (k >= 0)
			k = helper_spawn(state_dir, &st);
		if (k < 0)
			fprintf(stderr, "upgraded: cannot start the monitor helper: %s\n",
			        strerror(-k));
	}
	if (st.linked && k >= 0)
		fprintf(stderr, "upgraded: '%s' restores on its kept RAM '%s'\n", strna(st.name),
		        st.kept_path);
	keep_ram_hook_start_done(&st);
	return k < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
