/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The bus upgradectl talks to: this host's system bus, or, like `systemctl -H`, the system bus
 * of another host over SSH (sd_bus_open_system_remote(): `ssh -xT [-p PORT] [USER@]HOST
 * systemd-stdio-bridge`, with the invoking user's SSH configuration and keys).
 */

#include <stdbool.h>
#include <systemd/sd-bus.h>

/* True for "[USER@]HOST[:PORT]" as -H accepts it: not empty, no option-like leading '-',
 * no whitespace or control characters, no '/' (sd-bus would read it as a container name). */
bool cli_host_is_valid(const char *host);

/* Opens the system bus (host NULL) or host's over SSH, and completes the handshake, so that a
 * host that cannot be reached fails here with one message. On failure prints why to stderr and
 * returns < 0. */
int cli_bus_open(const char *host, sd_bus **ret);
