/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "handoff-shutdown.h"
#include "json-util.h"
#include "macros.h"
#include "path-util.h"
#include "time-util.h"

#define JOURNAL_VARLINK_SOCKET "/run/systemd/journal/io.systemd.journal"
#define VARLINK_REPLY_MAX      4096

/* Waits until fd is ready for events, at most until deadline; -ETIMEDOUT after it. */
static int wait_fd(int fd, short events, uint64_t deadline) {
	for (;;) {
		uint64_t now = now_monotonic_usec();
		struct pollfd p = { .fd = fd, .events = events };
		int r;

		if (now >= deadline)
			return -ETIMEDOUT;
		r = poll(&p, 1, (int)((deadline - now + 999) / 1000));
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

/* One varlink call without parameters on a connected socket: the request, then the reply
 * up to its NUL. 0 when the reply has no "error"; -EPROTO with *ret_error set otherwise. */
static int varlink_call(int fd, const char *method, uint64_t deadline, char **ret_error) {
	char req[256], reply[VARLINK_REPLY_MAX];
	size_t len, got = 0;
	json_object *o, *e;
	int n, r;

	n = snprintf(req, sizeof(req), "{\"method\":\"%s\"}", method);
	if (n < 0 || (size_t)n >= sizeof(req))
		return -EINVAL;
	len = (size_t)n + 1; /* with its NUL: varlink's message end */
	for (size_t off = 0; off < len;) {
		ssize_t k;

		r = wait_fd(fd, POLLOUT, deadline);
		if (r < 0)
			return r;
		k = send(fd, req + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		off += k > 0 ? (size_t)k : 0;
	}
	while (!memchr(reply, 0, got)) {
		ssize_t k;

		if (got == sizeof(reply))
			return -EMSGSIZE;
		r = wait_fd(fd, POLLIN, deadline);
		if (r < 0)
			return r;
		k = recv(fd, reply + got, sizeof(reply) - got, MSG_DONTWAIT);
		if (k == 0)
			return -ECONNRESET;
		if (k < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		got += k > 0 ? (size_t)k : 0;
	}
	o = json_tokener_parse(reply);
	if (!o)
		return -EBADMSG;
	r = 0;
	if (json_object_object_get_ex(o, "error", &e) && e) {
		*ret_error = strdup(json_object_get_string(e));
		r = -EPROTO;
	}
	json_object_put(o);
	return r;
}

int journal_sync(const char *root, char **ret_why) {
	_cleanup_free_ char *path = NULL, *error = NULL;
	_cleanup_close_ int fd = -EBADF;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	uint64_t deadline = now_monotonic_usec() + JOURNAL_SYNC_TIMEOUT_USEC;
	int r;

	r = path_prefix_root(root, JOURNAL_VARLINK_SOCKET, &path);
	if (r < 0)
		return r;
	if (strlen(path) >= sizeof(sa.sun_path))
		r = -ENAMETOOLONG;
	else {
		memcpy(sa.sun_path, path, strlen(path) + 1);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		r = fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
	}
	if (r >= 0)
		r = varlink_call(fd, "io.systemd.Journal.Synchronize", deadline, &error);
	if (r < 0 && asprintf(ret_why, "the journal could not be flushed (%s at %s): %s",
	                      "io.systemd.Journal.Synchronize", path,
	                      error
	                              ?: r == -ETIMEDOUT ? "journald did not answer within 5 s"
	                                                 : strerror(-r)) < 0)
		*ret_why = NULL;
	return r;
}

static int add_reason(json_object *reasons, const char *fmt, ...) _printf_(2, 3);
static int add_reason(json_object *reasons, const char *fmt, ...) {
	_cleanup_free_ char *s = NULL;
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (r < 0)
		return -ENOMEM;
	return json_object_array_add(reasons, json_object_new_string(s)) < 0 ? -ENOMEM : 0;
}

/* Each VM left in a state an unordered stop would harm: running (strategy ignore), failed,
 * or anything but saved or shut down. Returns how many. */
static int vms_unprotected(const Update *u, json_object *reasons) {
	int n = 0;

	for (size_t i = 0; u->vms && i < json_object_array_length(u->vms); i++) {
		json_object *v = json_object_array_get_idx(u->vms, i), *name, *result;
		const char *res;

		if (!json_object_object_get_ex(v, "name", &name) ||
		    !json_object_object_get_ex(v, "result", &result))
			continue;
		res = json_object_get_string(result);
		if (streq_ptr(res, "saved") || streq_ptr(res, "shut-down"))
			continue;
		n++;
		if (add_reason(reasons, "VM %s is %s, not saved or shut down%s",
		               json_object_get_string(name), res ?: "in an unknown state",
		               streq_ptr(res, "ignored") ? " (strategy ignore: it is left running)"
		                                         : "") < 0)
			return -ENOMEM;
	}
	return n;
}

int handoff_shutdown_decide(const Policy *p, const Update *u, const char *root,
                            JournalSyncFunc flush, json_object **ret) {
	_cleanup_(json_object_putp) json_object *o = json_object_new_object();
	_cleanup_free_ char *why = NULL;
	json_object *reasons = json_object_new_array();
	ShutdownMode mode = p ? p->shutdown : SHUTDOWN_MODE_ORDERLY;
	int r;

	if (!o || !reasons || json_object_object_add(o, "reasons", reasons) < 0) {
		json_object_put(reasons);
		return -ENOMEM;
	}
	json_object_object_add(o, "requested",
	                       json_object_new_string(shutdown_mode_to_string(mode)));
	if (mode != SHUTDOWN_MODE_FAST)
		r = add_reason(reasons, "[Handoff] Shutdown=%s", shutdown_mode_to_string(mode));
	else {
		r = vms_unprotected(u, reasons);
		if (r == 0 && flush(root, &why) < 0) {
			r = add_reason(reasons, "%s", why ?: "the journal could not be flushed");
			r = r < 0 ? r : 1;
		}
		if (r == 0)
			r = add_reason(reasons, "every VM is saved or shut down, the journal is "
			                        "flushed, the handoff record is on disk");
		else if (r > 0) {
			mode = SHUTDOWN_MODE_ORDERLY;
			r = 0;
		}
	}
	if (r < 0)
		return r;
	json_object_object_add(o, "mode", json_object_new_string(shutdown_mode_to_string(mode)));
	*ret = TAKE_PTR(o);
	return 0;
}

ShutdownMode handoff_shutdown_mode(const Update *u) {
	json_object *m;
	ShutdownMode mode = _SHUTDOWN_MODE_INVALID;

	if (u->shutdown && json_object_object_get_ex(u->shutdown, "mode", &m))
		mode = shutdown_mode_from_string(json_object_get_string(m));
	return mode == SHUTDOWN_MODE_FAST ? SHUTDOWN_MODE_FAST : SHUTDOWN_MODE_ORDERLY;
}

bool handoff_shutdown_is_fast(const Update *u) {
	return handoff_shutdown_mode(u) == SHUTDOWN_MODE_FAST;
}
