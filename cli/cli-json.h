/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Reading the daemon's JSON replies: lookups that give NULL for anything absent or of
 * another type, so that a reply of an unexpected shape prints "n/a" instead of crashing. */

#include <stdio.h>
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

/* How upgradectl prints JSON (--json=MODE). */
typedef enum CliJsonFormat {
	CLI_JSON_OFF,    /* human output */
	CLI_JSON_SHORT,  /* --json=short, and --json: one line */
	CLI_JSON_PRETTY, /* --json=pretty: indented */
} CliJsonFormat;

/* "short" or "pretty" (NULL: short); -EINVAL for anything else. */
int cli_json_format_from_string(const char *s);
/* key in snake_case: "RunningKernel" -> "running_kernel", "CrashKernelReserved" ->
 * "crash_kernel_reserved", "VMs" -> "vms"; keys already in snake_case are unchanged. The
 * result is written to out (at least 2 * strlen(key) + 1 bytes). */
void cli_json_snake_key(const char *key, char *out);
/* A copy of o (a new reference) whose object keys, at every depth, are in snake_case: the one
 * key convention of the JSON upgradectl prints. NULL for NULL or out of memory. */
json_object *cli_json_snake_keys(json_object *o);
/* Prints o on f in format (short when CLI_JSON_OFF), with a newline. */
void cli_json_print(json_object *o, CliJsonFormat format, FILE *f);
