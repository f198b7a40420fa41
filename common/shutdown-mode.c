/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "macros.h"
#include "shutdown-mode.h"

static const char *const shutdown_mode_table[_SHUTDOWN_MODE_MAX] = {
	[SHUTDOWN_MODE_ORDERLY] = "orderly",
	[SHUTDOWN_MODE_FAST] = "fast",
};

const char *shutdown_mode_to_string(ShutdownMode m) {
	return m >= 0 && m < _SHUTDOWN_MODE_MAX ? shutdown_mode_table[m] : NULL;
}

ShutdownMode shutdown_mode_from_string(const char *s) {
	for (int i = 0; s && i < _SHUTDOWN_MODE_MAX; i++)
		if (streq(shutdown_mode_table[i], s))
			return (ShutdownMode)i;
	return _SHUTDOWN_MODE_INVALID;
}
