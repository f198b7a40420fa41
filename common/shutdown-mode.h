/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * How the old kernel stops before the handoff ([Handoff] Shutdown=, the update record's
 * handoff.shutdown): the policy asks for one, the state machine decides which it gets.
 */

typedef enum ShutdownMode {
	SHUTDOWN_MODE_ORDERLY, /* systemd stops every unit before kexec */
	SHUTDOWN_MODE_FAST,    /* no orderly stop once nothing is left to protect */
	_SHUTDOWN_MODE_MAX,
	_SHUTDOWN_MODE_INVALID = -22, /* -EINVAL */
} ShutdownMode;

/* "orderly", "fast"; NULL for anything else. */
const char *shutdown_mode_to_string(ShutdownMode m);
/* _SHUTDOWN_MODE_INVALID for anything else (also NULL). */
ShutdownMode shutdown_mode_from_string(const char *s);
