/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * json-c helpers every component shares: the scope-bound cleanup of an object and the
 * one way a JSON document reaches the disk (pretty, atomically: fileio.h).
 */

#include <json-c/json.h>

#include "macros.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(json_object *, json_object_put);
#define _cleanup_json_ _cleanup_(json_object_putp)

/* Creates dir (and its parents) and writes o to path below it, pretty-printed, with
 * write_file_atomic(): temp file, fsync, rename, fsync of the directory. */
int json_write_file_atomic(const char *dir, const char *path, json_object *o);

/* Adds key: v to o; takes v even on failure (a NULL v, an allocation that failed, is -ENOMEM),
 * so calls chain with || and nothing leaks. */
int json_add_take(json_object *o, const char *key, json_object *v);
