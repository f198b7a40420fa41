/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "cli-bus.h"
#include "macros.h"
#include "string-util.h"

bool cli_host_is_valid(const char *host) {
	return host && *host && host[0] != '-' && !string_has_cc(host) && !strpbrk(host, " /");
}

int cli_bus_open(const char *host, sd_bus **ret) {
	_cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
	sd_id128_t id;
	int r;

	if (host && !cli_host_is_valid(host)) {
		fprintf(stderr, "Invalid host '%s': expected [USER@]HOST[:PORT].\n", strna(host));
		return -EINVAL;
	}
	r = host ? sd_bus_open_system_remote(&bus, host) : sd_bus_open_system(&bus);
	/* The bus id comes with the reply to Hello: over SSH, the remote bridge answered. */
	if (r >= 0)
		r = sd_bus_get_bus_id(bus, &id);
	if (r < 0) {
		if (host)
			fprintf(stderr,
			        "Cannot reach the system bus of '%s' over SSH (ssh, then "
			        "systemd-stdio-bridge there): %s\n",
			        host, strerror(-r));
		else
			fprintf(stderr, "Cannot connect to the system bus: %s\n", strerror(-r));
		return r;
	}
	*ret = TAKE_PTR(bus);
	return 0;
}
