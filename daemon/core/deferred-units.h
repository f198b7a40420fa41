/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The daemon's side of [Restore] DeferUntilRestored= (common/defer-units.h): which units
 * upgraded-defer-generator held back on this boot, and their release once the VMs are
 * restored.
 */

#include <json-c/json.h>

/* The units holding a drop-in of the generator under root's DEFER_GENERATOR_DIR, sorted;
 * *ret is an empty array on a boot that held none back. */
int deferred_units_list(const char *root, json_object **ret);

/* Creates root's DEFER_RELEASE_FILE: the held-back units start now. 1 when it was
 * created, 0 when it existed already. */
int deferred_units_release(const char *root);
