/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>

#include "bus-options.h"
#include "macros.h"
#include "string-util.h"
#include "upgrade-bus.h"

int bus_read_stage_options(sd_bus_message *m, StageOptions *ret, sd_bus_error *error) {
	StageOptions o = {};
	const char *key;
	int r;

	r = sd_bus_message_enter_container(m, 'a', "{sv}");
	if (r < 0)
		return r;
	while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
		r = sd_bus_message_read(m, "s", &key);
		if (r < 0)
			return r;
		if (streq(key, "reuse-cmdline")) {
			int b;

			r = sd_bus_message_read(m, "v", "b", &b);
			if (r < 0)
				return sd_bus_error_setf(
				        error, UPGRADE_ERROR_INVALID_OPTION,
				        "Option 'reuse-cmdline' must be a boolean.");
			o.reuse_cmdline = b;
		} else
			return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_OPTION,
			                         "Unknown option '%s'.", QUOTE_CUT(key, 64));
		r = sd_bus_message_exit_container(m);
		if (r < 0)
			return r;
	}
	if (r < 0)
		return r;
	r = sd_bus_message_exit_container(m);
	if (r < 0)
		return r;
	if (ret)
		*ret = o;
	return 0;
}

int bus_read_commit_options(sd_bus_message *m, sd_bus_error *error) {
	const char *key;
	int r;

	r = sd_bus_message_enter_container(m, 'a', "{sv}");
	if (r < 0)
		return r;
	r = sd_bus_message_enter_container(m, 'e', "sv");
	if (r < 0)
		return r;
	if (r > 0) {
		r = sd_bus_message_read(m, "s", &key);
		if (r < 0)
			return r;
		return sd_bus_error_setf(error, UPGRADE_ERROR_INVALID_OPTION,
		                         "Unknown option '%s'.", QUOTE_CUT(key, 64));
	}
	r = sd_bus_message_exit_container(m);
	return r < 0 ? r : 0;
}
