/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "handoff-shutdown.h"
#include "json-util.h"
#include "macros.h"
#include "policy.h"

/* ---- the decision ---- */

static int flush_calls;
static int flush_result;

static int flush_seam(const char *root, char **ret_why) {
	flush_calls++;
	if (flush_result < 0)
		*ret_why = strdup("the journal could not be flushed (test): Connection refused");
	return flush_result;
}

static Policy *policy_with(bool fast) {
	Policy *p = NULL;
	const char *conf = fast ? "[Handoff]\nShutdown=fast\n" : "[Handoff]\nShutdown=orderly\n";

	assert_int_equal(policy_new_default(&p), 0);
	assert_int_equal(policy_parse_buffer(p, "test.conf", conf, strlen(conf), NULL), 0);
	assert_int_equal(policy_finish(p, NULL), 0);
	assert_true(p->shutdown == (fast ? SHUTDOWN_MODE_FAST : SHUTDOWN_MODE_ORDERLY));
	return p;
}

/* An update whose VM steps left these results ("name:result" ...). */
static Update *update_with_vms(const char *const *vms) {
	Update *u = update_new("0123456789abcdef");

	assert_non_null(u);
	u->vms = json_object_new_array();
	for (; vms && *vms; vms++) {
		json_object *v = json_object_new_object();
		const char *colon = strchr(*vms, ':');
		char name[64];

		snprintf(name, sizeof(name), "%.*s", (int)(colon - *vms), *vms);
		json_object_object_add(v, "name", json_object_new_string(name));
		json_object_object_add(v, "result", json_object_new_string(colon + 1));
		json_object_array_add(u->vms, v);
	}
	return u;
}

static const char *mode_of(json_object *d) {
	return json_object_get_string(json_object_object_get(d, "mode"));
}

static const char *first_reason(json_object *d) {
	return json_object_get_string(
	        json_object_array_get_idx(json_object_object_get(d, "reasons"), 0));
}

static json_object *decide(const Policy *p, const char *const *vms, int flush) {
	Update *u = update_with_vms(vms);
	json_object *d = NULL;

	flush_calls = 0;
	flush_result = flush;
	assert_int_equal(handoff_shutdown_decide(p, u, NULL, flush_seam, &d), 0);
	u->shutdown = json_object_get(d);
	assert_true(handoff_shutdown_is_fast(u) == streq(mode_of(d), "fast"));
	update_free(u);
	return d;
}

static void test_orderly_by_default(void **state) {
	_cleanup_(json_object_putp) json_object *a = NULL, *b = NULL;
	Policy *p = policy_with(false);
	(void)state;

	a = decide(NULL, NULL, 0);
	assert_string_equal(mode_of(a), "orderly");
	assert_string_equal(json_object_get_string(json_object_object_get(a, "requested")),
	                    "orderly");
	b = decide(p, (const char *const[]){ "a:saved", NULL }, 0);
	assert_string_equal(mode_of(b), "orderly");
	assert_string_equal(first_reason(b), "[Handoff] Shutdown=orderly");
	assert_int_equal(flush_calls, 0); /* nothing asked of journald */
	policy_free(p);
}

static void test_fast_when_all_saved(void **state) {
	_cleanup_(json_object_putp) json_object *a = NULL, *b = NULL;
	Policy *p = policy_with(true);
	(void)state;

	a = decide(p, (const char *const[]){ "a:saved", "b:shut-down", NULL }, 0);
	assert_string_equal(mode_of(a), "fast");
	assert_int_equal(flush_calls, 1);
	assert_non_null(strstr(first_reason(a), "the journal is flushed"));
	/* No VM at all: nothing to protect either. */
	b = decide(p, NULL, 0);
	assert_string_equal(mode_of(b), "fast");
	policy_free(p);
}

static void test_fast_refused(void **state) {
	_cleanup_(json_object_putp) json_object *a = NULL, *b = NULL, *c = NULL;
	Policy *p = policy_with(true);
	json_object *reasons;
	(void)state;

	/* A VM left running (strategy ignore) and one that failed: both named, orderly, and
	 * the journal is not even asked. */
	a = decide(p, (const char *const[]){ "a:saved", "web:ignored", "db:failed", NULL }, 0);
	assert_string_equal(mode_of(a), "orderly");
	assert_string_equal(json_object_get_string(json_object_object_get(a, "requested")), "fast");
	reasons = json_object_object_get(a, "reasons");
	assert_int_equal(json_object_array_length(reasons), 2);
	assert_non_null(strstr(first_reason(a), "VM web is ignored"));
	assert_non_null(strstr(first_reason(a), "left running"));
	assert_non_null(strstr(json_object_get_string(json_object_array_get_idx(reasons, 1)),
	                       "VM db is failed"));
	assert_int_equal(flush_calls, 0);

	/* A VM still paused (its save did not finish) is not protected either. */
	b = decide(p, (const char *const[]){ "a:paused", NULL }, 0);
	assert_string_equal(mode_of(b), "orderly");

	/* The journal cannot be flushed: orderly, saying why. */
	c = decide(p, (const char *const[]){ "a:saved", NULL }, -ECONNREFUSED);
	assert_string_equal(mode_of(c), "orderly");
	assert_int_equal(flush_calls, 1);
	assert_non_null(strstr(first_reason(c), "could not be flushed"));
	policy_free(p);
}

/* ---- journal_sync() against a varlink endpoint at <root>/run/systemd/journal ---- */

typedef struct Server {
	int fd;
	const char *reply; /* NULL: close without answering */
	char request[256];
} Server;

static void *serve_one(void *userdata) {
	Server *s = userdata;
	int c = accept(s->fd, NULL, NULL);
	size_t got = 0;

	if (c < 0)
		return NULL;
	while (got < sizeof(s->request) - 1) {
		ssize_t k = read(c, s->request + got, sizeof(s->request) - 1 - got);

		if (k <= 0)
			break;
		got += (size_t)k;
		if (memchr(s->request, 0, got))
			break;
	}
	if (s->reply)
		(void)!write(c, s->reply, strlen(s->reply) + 1);
	close(c);
	return NULL;
}

static int start_server(const char *root, Server *s) {
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char dir[64];

	assert_true(strlen(root) + strlen("/run/systemd/journal") < sizeof(dir));
	strcpy(dir, root);
	strcat(dir, "/run/systemd/journal");
	for (char *q = dir + strlen(root) + 1; (q = strchr(q, '/')); q++) {
		*q = 0;
		(void)mkdir(dir, 0755);
		*q = '/';
	}
	(void)mkdir(dir, 0755);
	assert_true(strlen(dir) + strlen("/io.systemd.journal") < sizeof(sa.sun_path));
	strcpy(sa.sun_path, dir);
	strcat(sa.sun_path, "/io.systemd.journal");
	unlink(sa.sun_path);
	s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(s->fd >= 0);
	assert_int_equal(bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(s->fd, 1), 0);
	return 0;
}

static void sync_with(const char *root, const char *reply, int want, const char *why_has) {
	Server s = { .reply = reply };
	_cleanup_free_ char *why = NULL;
	pthread_t t;

	start_server(root, &s);
	assert_int_equal(pthread_create(&t, NULL, serve_one, &s), 0);
	assert_int_equal(journal_sync(root, &why), want);
	pthread_join(t, NULL);
	close(s.fd);
	assert_string_equal(s.request, "{\"method\":\"io.systemd.Journal.Synchronize\"}");
	if (why_has) {
		assert_non_null(why);
		assert_non_null(strstr(why, why_has));
	} else
		assert_null(why);
}

static void test_journal_sync(void **state) {
	char root[] = "/tmp/test-handoff-shutdown.XXXXXX";
	_cleanup_free_ char *why = NULL;
	(void)state;

	assert_non_null(mkdtemp(root));
	sync_with(root, "{\"parameters\":{}}", 0, NULL);
	sync_with(root, "{\"error\":\"io.systemd.Journal.NotSupported\",\"parameters\":{}}",
	          -EPROTO, "io.systemd.Journal.NotSupported");
	sync_with(root, NULL, -ECONNRESET, "could not be flushed");

	/* No journald at all: a named error at once, nothing waits. */
	{
		char path[300];

		snprintf(path, sizeof(path), "%s/run/systemd/journal/io.systemd.journal", root);
		unlink(path);
	}
	assert_int_equal(journal_sync(root, &why), -ENOENT);
	assert_non_null(strstr(why, "/run/systemd/journal/io.systemd.journal"));
	{
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
		assert_int_equal(system(cmd), 0);
	}
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_orderly_by_default),
		cmocka_unit_test(test_fast_when_all_saved),
		cmocka_unit_test(test_fast_refused),
		cmocka_unit_test(test_journal_sync),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
