/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The a{sv} options of Manager.Stage() and Manager.Commit() (docs/dbus-api.md), read from a
 * method call whose read position is at the dictionary. Unknown keys and values of the wrong
 * type get org.upgraded.Upgrade1.Error.InvalidOption; a malformed message (not a{sv}) gets
 * sd-bus's own -errno. Bus-free otherwise, so that tests and the fuzz target
 * (tests/fuzz/fuzz-bus-options.c) can feed them any message.
 */

#include <stdbool.h>
#include <systemd/sd-bus.h>

typedef struct StageOptions {
	bool reuse_cmdline; /* "reuse-cmdline" (b) */
} StageOptions;

/* Stage: reads the dictionary; *ret is only written on success. */
int bus_read_stage_options(sd_bus_message *m, StageOptions *ret, sd_bus_error *error);
/* Commit: no options yet (the policy decides); any key is refused so that callers notice. */
int bus_read_commit_options(sd_bus_message *m, sd_bus_error *error);
