/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * upgraded-defer-generator's decision and output, apart from its main() so that unit
 * tests run it against a temporary root and output directory (common/defer-units.h
 * has the contract with the daemon).
 */

#include <stdbool.h>

/* Whether a kernel command line marks the boot after an update's handoff: it holds
 * LOADER_HANDOFF_CMDLINE_MARK as a word. */
bool defer_generator_armed(const char *cmdline);

/* The unit names patterns stand for, sorted and without duplicates: a plain name as
 * it is, a glob expanded against the unit files under root's unit directories (none
 * found: nothing). A pattern policy_unit_pattern_valid() refuses is skipped with a
 * warning. *ret may be NULL (no unit). */
int defer_generator_expand(const char *root, char *const *patterns, char ***ret);

/* Writes, under outdir (systemd's normal generator directory), DEFER_WAIT_UNIT and for
 * every unit in units UNIT.d/DEFER_DROPIN_NAME; nothing when units is empty. */
int defer_generator_write(const char *outdir, char *const *units);

/* The whole generator: root's /proc/cmdline (or cmdline_path) armed, the release file
 * not there yet (a daemon-reload after the restore), [Restore] DeferUntilRestored= from
 * root's configuration (a broken configuration defers nothing), then the output.
 * Returns the number of units held back, or a negative errno. */
int defer_generator_run(const char *root, const char *cmdline_path, const char *outdir);
