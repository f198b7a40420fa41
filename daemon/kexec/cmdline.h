/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Kernel command lines handed to the next kernel. Parameters named "upgraded.*"
 * are reserved: the daemon and purgatory add them (e.g. upgraded.stamps=), so a
 * caller may not pass them and --reuse-cmdline drops them.
 */

#include <stdbool.h>
#include <systemd/sd-bus.h>

#include "loader.h"

/* x86 COMMAND_LINE_SIZE is 2048 including the terminating NUL, and the loader
 * appends up to LOADER_CMDLINE_APPENDED_MAX bytes (the crash image's mark, the
 * stamps field) to what the caller gave. */
#define CMDLINE_MAX ((int)(2047 - LOADER_CMDLINE_APPENDED_MAX))

#define CMDLINE_RESERVED_PREFIX "upgraded."

/* Checks s: printable, not longer than CMDLINE_MAX, balanced quotes, no reserved
 * parameter, and none of the parameters the loader adds anywhere in it, not even
 * inside a quoted value (the readers on the next kernel look for them as words).
 * Sets a named InvalidCmdline error. */
int cmdline_validate(const char *s, sd_bus_error *error);

/* Copy of s (e.g. /proc/cmdline) without reserved parameters, BOOT_IMAGE= (it
 * names the old image) and surrounding whitespace. */
int cmdline_strip_for_reuse(const char *s, char **ret);

/* The mark the panic image puts on the crash kernel's command line
 * (loader/loader.c PANIC_CMDLINE_MARK): upgraded started there takes the
 * update over (docs/state-machine.md, "The panic path"). */
#define CMDLINE_PANIC_MARK "upgraded.panic=1"

/* Whether s holds word exactly as one parameter (a quoted word does not count). */
bool cmdline_has_word(const char *s, const char *word);
