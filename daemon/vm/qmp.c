/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A QMP client small enough to read in one sitting: one line per message (QEMU ends each JSON
 * object with CRLF), poll() before every read and write so that no call outlives its deadline.
 */

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include <json-c/json.h>

#include "qmp.h"
#include "fileio.h"
#include "macros.h"

#define QMP_LINE_MAX     (1024 * 1024)
#define QMP_CONNECT_POLL 5000ULL /* µs between connection attempts */

struct Qmp {
	int fd;
	char *buf;
	size_t len, cap;
};

uint64_t qmp_now(void) {
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000ULL;
}

void qmp_close(Qmp *q) {
	if (!q)
		return;
	if (q->fd >= 0)
		close(q->fd);
	free(q->buf);
	free(q);
}

static int wait_fd(int fd, short events, uint64_t deadline) {
	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		uint64_t now = qmp_now();
		int k;

		if (now >= deadline)
			return -ETIMEDOUT;
		k = poll(&p, 1, (int)MIN((deadline - now + 999) / 1000, (uint64_t)INT32_MAX));
		if (k > 0)
			return 0;
		if (k < 0 && errno != EINTR)
			return -errno;
	}
}

/* Reads one line (without its CR LF) into a new string. */
static int read_line(Qmp *q, uint64_t deadline, char **ret_line) {
	for (;;) {
		char *nl = q->len ? memchr(q->buf, '\n', q->len) : NULL;
		ssize_t n;
		int k;

		if (nl) {
			size_t l = (size_t)(nl - q->buf);
			char *line = strndup(q->buf, l && nl[-1] == '\r' ? l - 1 : l);

			if (!line)
				return -ENOMEM;
			memmove(q->buf, nl + 1, q->len - l - 1);
			q->len -= l + 1;
			*ret_line = line;
			return 0;
		}
		if (q->len == q->cap) {
			size_t cap = q->cap ? q->cap * 2 : 4096;
			char *b;

			if (cap > QMP_LINE_MAX)
				return -EMSGSIZE;
			b = realloc(q->buf, cap);
			if (!b)
				return -ENOMEM;
			q->buf = b;
			q->cap = cap;
		}
		k = wait_fd(q->fd, POLLIN, deadline);
		if (k < 0)
			return k;
		n = read(q->fd, q->buf + q->len, q->cap - q->len);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0 && errno != EINTR && errno != EAGAIN)
			return -errno;
		if (n > 0)
			q->len += (size_t)n;
	}
}

static int send_line(Qmp *q, const char *cmd, uint64_t deadline) {
	int k = wait_fd(q->fd, POLLOUT, deadline);

	if (k < 0)
		return k;
	k = write_all(q->fd, cmd, strlen(cmd));
	return k < 0 ? k : write_all(q->fd, "\n", 1);
}

int qmp_connect(const char *path, uint64_t deadline, Qmp **ret) {
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_free_ char *greeting = NULL;
	Qmp *q;
	int k;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	for (;;) {
		q->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (q->fd < 0) {
			k = -errno;
			break;
		}
		if (connect(q->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			k = 0;
			break;
		}
		k = -errno;
		close(q->fd);
		q->fd = -1;
		if ((k != -ENOENT && k != -ECONNREFUSED) || qmp_now() >= deadline) {
			k = k == -ENOENT || k == -ECONNREFUSED ? -ETIMEDOUT : k;
			break;
		}
		usleep(QMP_CONNECT_POLL);
	}
	if (k >= 0)
		k = read_line(q, deadline, &greeting);
	if (k >= 0 && !strstr(greeting, "\"QMP\""))
		k = -EPROTO;
	if (k < 0) {
		qmp_close(q);
		return k;
	}
	*ret = q;
	return 0;
}

/* Waits for the next answer ("return" or "error"), skipping events. */
static int read_answer(Qmp *q, uint64_t deadline, char **ret_reply, char **ret_error) {
	for (;;) {
		_cleanup_free_ char *line = NULL;
		struct json_object *j, *v, *desc;
		int k = read_line(q, deadline, &line);

		if (k < 0)
			return k;
		j = json_tokener_parse(line);
		if (!j || !json_object_is_type(j, json_type_object)) {
			json_object_put(j);
			return -EPROTO;
		}
		if (json_object_object_get_ex(j, "return", &v))
			k = 0;
		else if (json_object_object_get_ex(j, "error", &v)) {
			k = -EREMOTEIO;
			if (ret_error && json_object_object_get_ex(v, "desc", &desc))
				*ret_error = strdup(json_object_get_string(desc));
		} else {
			json_object_put(j); /* an event */
			continue;
		}
		json_object_put(j);
		if (ret_reply)
			*ret_reply = TAKE_PTR(line);
		return k;
	}
}

int qmp_execute(Qmp *q, const char *cmd, uint64_t deadline, char **ret_reply, char **ret_error) {
	int k = send_line(q, cmd, deadline);

	return k < 0 ? k : read_answer(q, deadline, ret_reply, ret_error);
}

int qmp_negotiate_and_set(Qmp *q, const char *capability, bool on, uint64_t deadline,
                          char **ret_error) {
	_cleanup_free_ char *set = NULL;
	int k;

	if (asprintf(&set,
	             "{\"execute\":\"migrate-set-capabilities\",\"arguments\":{\"capabilities\":"
	             "[{\"capability\":\"%s\",\"state\":%s}]}}",
	             capability, on ? "true" : "false") < 0)
		return -ENOMEM;
	k = send_line(q, "{\"execute\":\"qmp_capabilities\"}", deadline);
	if (k >= 0)
		k = send_line(q, set, deadline);
	if (k >= 0)
		k = read_answer(q, deadline, NULL, ret_error);
	return k < 0 ? k : read_answer(q, deadline, NULL, ret_error);
}

int qmp_run_state(Qmp *q, uint64_t deadline, char **ret_status) {
	_cleanup_free_ char *reply = NULL;
	struct json_object *j, *r, *s;
	int k;

	k = qmp_execute(q, "{\"execute\":\"query-status\"}", deadline, &reply, NULL);
	if (k < 0)
		return k;
	j = json_tokener_parse(reply);
	k = -EPROTO;
	if (j && json_object_object_get_ex(j, "return", &r) &&
	    json_object_object_get_ex(r, "status", &s) &&
	    json_object_is_type(s, json_type_string)) {
		*ret_status = strdup(json_object_get_string(s));
		k = *ret_status ? 0 : -ENOMEM;
	}
	json_object_put(j);
	return k;
}
