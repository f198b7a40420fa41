/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes the a{sv} options of Stage() and Commit() (daemon/bus/bus-options.c). The input is a
 * small program that builds a method call the way a client could: the options argument of
 * some type (mostly a{sv}, sometimes another signature, missing, or followed by more
 * arguments) with keys and values of every kind, nested dictionaries and variants. The
 * message is sealed like one received from the bus, then read by both parsers, which must
 * accept exactly what docs/dbus-api.md allows (Stage: "reuse-cmdline" as a boolean; Commit:
 * nothing), return the values given, and refuse everything else with an error.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bus-options.h"
#include "macros.h"
#include "upgrade-bus.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ENTRIES 32
#define MAX_DEPTH   4

typedef struct Input {
	const uint8_t *p;
	size_t n;
} Input;

typedef struct Expect {
	size_t n_entries;
	bool stage_ok; /* every key is reuse-cmdline with a boolean */
	bool reuse;    /* the last one's value */
} Expect;

static uint8_t take(Input *in) {
	uint8_t b;

	if (in->n == 0)
		return 0;
	b = *in->p;
	in->p++;
	in->n--;
	return b;
}

/* A string from the input: a length byte, then the bytes (a NUL ends it early). */
static const char *take_str(Input *in, char buf[static 256]) {
	size_t len = take(in);

	len = MIN(len, in->n);
	memcpy(buf, in->p, len);
	buf[len] = '\0';
	in->p += len;
	in->n -= len;
	return buf;
}

static int append_value(sd_bus_message *m, Input *in, unsigned kind, unsigned depth, int *ret_b);

/* A dictionary a{sv} of entries from the input. */
static int append_dict(sd_bus_message *m, Input *in, unsigned depth, Expect *e) {
	int r;

	r = sd_bus_message_open_container(m, 'a', "{sv}");
	if (r < 0)
		return r;
	while (in->n > 0 && e->n_entries < MAX_ENTRIES) {
		uint8_t op = take(in);
		char key[256];
		int b = -1;

		if (op == 0xff) /* end of this dictionary */
			break;
		take_str(in, key);
		r = sd_bus_message_open_container(m, 'e', "sv");
		if (r < 0)
			return r;
		r = sd_bus_message_append_basic(m, 's', key);
		if (r < 0)
			return r;
		r = append_value(m, in, op % 10, depth, &b);
		if (r < 0)
			return r;
		r = sd_bus_message_close_container(m);
		if (r < 0)
			return r;
		if (depth == 0) {
			e->n_entries++;
			if (!streq(key, "reuse-cmdline") || b < 0)
				e->stage_ok = false;
			else
				e->reuse = b;
		}
	}
	return sd_bus_message_close_container(m);
}

/* A variant holding a value of the given kind; *ret_b is the boolean when it is one. */
static int append_value(sd_bus_message *m, Input *in, unsigned kind, unsigned depth, int *ret_b) {
	char s[256];
	int r;

	switch (kind) {
	case 0:
		*ret_b = take(in) & 1;
		return sd_bus_message_append(m, "v", "b", *ret_b);
	case 1:
		return sd_bus_message_append(m, "v", "s", take_str(in, s));
	case 2:
		return sd_bus_message_append(m, "v", "i", (int32_t)(int8_t)take(in));
	case 3:
		return sd_bus_message_append(m, "v", "u", (uint32_t)take(in));
	case 4:
		return sd_bus_message_append(m, "v", "x", (int64_t)take(in) << 40);
	case 5:
		return sd_bus_message_append(m, "v", "d", (double)take(in) / 3.0);
	case 6:
		return sd_bus_message_append(m, "v", "as", 2, take_str(in, s), "x");
	case 7: {
		Expect ignored = {};

		if (depth >= MAX_DEPTH)
			return sd_bus_message_append(m, "v", "y", take(in));
		r = sd_bus_message_open_container(m, 'v', "a{sv}");
		if (r < 0)
			return r;
		r = append_dict(m, in, depth + 1, &ignored);
		if (r < 0)
			return r;
		return sd_bus_message_close_container(m);
	}
	case 8: /* a boolean in a variant in the variant */
		return sd_bus_message_append(m, "v", "v", "b", take(in) & 1);
	default:
		return sd_bus_message_append(m, "v", "o", "/org/upgraded/Upgrade1");
	}
}

/* A bus object only to make messages with: never connected to anything that answers. */
static sd_bus *message_bus(void) {
	static sd_bus *bus;
	int fds[2];

	if (bus)
		return bus;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) < 0 ||
	    sd_bus_new(&bus) < 0 || sd_bus_set_fd(bus, fds[0], fds[0]) < 0 || sd_bus_start(bus) < 0)
		abort();
	return bus;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	sd_bus_message *m = NULL;
	sd_bus_error error = SD_BUS_ERROR_NULL;
	Input in = { data, size };
	Expect e = { .stage_ok = true };
	StageOptions opts = { .reuse_cmdline = true };
	uint8_t layout;
	bool dict;
	int r;

	if (size > 4096)
		return 0;
	if (sd_bus_message_new_method_call(message_bus(), &m, "org.upgraded.Upgrade1",
	                                   "/org/upgraded/Upgrade1",
	                                   "org.upgraded.Upgrade1.Manager", "Stage") < 0)
		abort();
	layout = take(&in) % 6;
	dict = layout == 0 || layout == 5;
	switch (layout) {
	case 0:
	case 5:
		r = append_dict(m, &in, 0, &e);
		if (r >= 0 && layout == 5)
			r = sd_bus_message_append(m, "s", "trailing");
		break;
	case 1:
		r = sd_bus_message_append(m, "a{ss}", 1, "reuse-cmdline", "yes");
		break;
	case 2:
		r = sd_bus_message_append(m, "as", 1, "reuse-cmdline");
		break;
	case 3:
		r = sd_bus_message_append(m, "s", "reuse-cmdline");
		break;
	default:
		r = 0; /* no options argument at all */
	}
	/* Some inputs cannot be sent (e.g. a key that is not UTF-8): sd-bus refuses them. */
	if (r < 0 || sd_bus_message_seal(m, 1, 0) < 0) {
		sd_bus_message_unref(m);
		return 0;
	}

	r = bus_read_stage_options(m, &opts, &error);
	if ((r >= 0) != (dict && e.stage_ok))
		abort();
	if (r >= 0 && (opts.reuse_cmdline != e.reuse || sd_bus_error_is_set(&error)))
		abort();
	if (r < 0 && dict && !sd_bus_error_has_name(&error, UPGRADE_ERROR_INVALID_OPTION))
		abort(); /* a well-formed dictionary is refused by name */
	sd_bus_error_free(&error);

	if (sd_bus_message_rewind(m, true) < 0)
		abort();
	r = bus_read_commit_options(m, &error);
	if ((r >= 0) != (dict && e.n_entries == 0))
		abort();
	if (r < 0 && dict && !sd_bus_error_has_name(&error, UPGRADE_ERROR_INVALID_OPTION))
		abort();
	sd_bus_error_free(&error);
	sd_bus_message_unref(m);
	return 0;
}
