/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The a{sv} options of Stage() and Commit() (daemon/bus/bus-options.c), on method calls built as
 * a client would send them: what docs/dbus-api.md allows is read, everything else is refused
 * with org.upgraded.Upgrade1.Error.InvalidOption (a dictionary with a bad entry) or sd-bus's
 * error (not a dictionary at all), and the output is not touched on failure.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "bus-options.h"
#include "macros.h"
#include "upgrade-bus.h"

static sd_bus *bus;

static int setup(void **state) {
	int fds[2];

	/* A bus object only to make messages with; nothing answers on the other end. */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds),
	                 0);
	assert_int_equal(sd_bus_new(&bus), 0);
	assert_int_equal(sd_bus_set_fd(bus, fds[0], fds[0]), 0);
	assert_int_equal(sd_bus_start(bus), 0);
	*state = (void *)(intptr_t)fds[1];
	return 0;
}

static int teardown(void **state) {
	close((int)(intptr_t)*state);
	bus = sd_bus_flush_close_unref(bus);
	return 0;
}

/* A sealed method call whose arguments are given by types and the values after them. */
static sd_bus_message *call(const char *types, ...) {
	sd_bus_message *m = NULL;
	va_list ap;
	int r;

	assert_int_equal(sd_bus_message_new_method_call(bus, &m, "org.upgraded.Upgrade1",
	                                                "/org/upgraded/Upgrade1",
	                                                "org.upgraded.Upgrade1.Manager", "Stage"),
	                 0);
	va_start(ap, types);
	r = sd_bus_message_appendv(m, types, ap);
	va_end(ap);
	assert_true(r >= 0);
	assert_int_equal(sd_bus_message_seal(m, 1, 0), 0);
	return m;
}

static void assert_invalid_option(int r, sd_bus_error *e, const char *message) {
	assert_true(r < 0);
	assert_true(sd_bus_error_has_name(e, UPGRADE_ERROR_INVALID_OPTION));
	assert_string_equal(e->message, message);
	sd_bus_error_free(e);
}

static void test_bus_options_stage_reads_reuse_cmdline(void **state) {
	sd_bus_message *m = call("a{sv}", 1, "reuse-cmdline", "b", 1);
	sd_bus_error e = SD_BUS_ERROR_NULL;
	StageOptions o = {};

	assert_int_equal(bus_read_stage_options(m, &o, &e), 0);
	assert_true(o.reuse_cmdline);
	assert_false(sd_bus_error_is_set(&e));
	sd_bus_message_unref(m);

	m = call("a{sv}", 0);
	o.reuse_cmdline = true;
	assert_int_equal(bus_read_stage_options(m, &o, &e), 0);
	assert_false(o.reuse_cmdline);
	sd_bus_message_unref(m);
}

static void test_bus_options_stage_refuses_bad_entries(void **state) {
	sd_bus_error e = SD_BUS_ERROR_NULL;
	StageOptions o = { .reuse_cmdline = true };
	sd_bus_message *m;

	m = call("a{sv}", 1, "reuse-cmdline", "s", "yes");
	assert_invalid_option(bus_read_stage_options(m, &o, &e), &e,
	                      "Option 'reuse-cmdline' must be a boolean.");
	sd_bus_message_unref(m);

	m = call("a{sv}", 2, "reuse-cmdline", "b", 0, "initrd", "s", "/boot/x");
	assert_invalid_option(bus_read_stage_options(m, &o, &e), &e, "Unknown option 'initrd'.");
	sd_bus_message_unref(m);
	assert_true(o.reuse_cmdline); /* untouched on failure */
}

static void test_bus_options_stage_refuses_other_signatures(void **state) {
	sd_bus_message *calls[] = {
		call("a{ss}", 1, "reuse-cmdline", "yes"), call("as", 1, "reuse-cmdline"),
		call("s", "reuse-cmdline"), call(""), /* no options argument at all */
	};
	sd_bus_error e = SD_BUS_ERROR_NULL;

	for (size_t i = 0; i < ELEMENTSOF(calls); i++) {
		assert_true(bus_read_stage_options(calls[i], NULL, &e) < 0);
		assert_false(sd_bus_error_is_set(&e)); /* sd-bus's own -errno: a malformed call */
		sd_bus_message_unref(calls[i]);
	}
}

static void test_bus_options_commit_takes_none(void **state) {
	sd_bus_error e = SD_BUS_ERROR_NULL;
	sd_bus_message *m;

	m = call("a{sv}", 0);
	assert_int_equal(bus_read_commit_options(m, &e), 0);
	sd_bus_message_unref(m);

	m = call("a{sv}", 1, "reuse-cmdline", "b", 1);
	assert_invalid_option(bus_read_commit_options(m, &e), &e,
	                      "Unknown option 'reuse-cmdline'.");
	sd_bus_message_unref(m);

	m = call("s", "x");
	assert_true(bus_read_commit_options(m, &e) < 0);
	assert_false(sd_bus_error_is_set(&e));
	sd_bus_message_unref(m);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
	const struct CMUnitTest tests[] = {
		T(test_bus_options_stage_reads_reuse_cmdline),
		T(test_bus_options_stage_refuses_bad_entries),
		T(test_bus_options_stage_refuses_other_signatures),
		T(test_bus_options_commit_takes_none),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
