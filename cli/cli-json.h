/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Reading the daemon's JSON replies: lookups that give NULL for anything absent or of
 * another type, so that a reply of an unexpected shape prints "n/a" instead of crashing. */

#include <json-c/json.h>

/* o[k] when o is an object that has k, else NULL. */
json_object *cli_jobj(json_object *o, const char *k);
/* o[k] when it is a string, else NULL. */
const char *cli_jstr(json_object *o, const char *k);
/* o[k] when it is an array, else NULL. json-c's array calls assert that they get one: never
 * give them a value of a reply without this check. */
json_object *cli_jarray(json_object *o, const char *k);
/* The length of an array from cli_jarray(); 0 for NULL. */
size_t cli_jarray_length(json_object *a);
