/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <string.h>

#include "fileio.h"
#include "json-util.h"

int json_write_file_atomic(const char *dir, const char *path, json_object *o) {
	const char *s;
	int r;

	r = mkdir_p(dir, 0755);
	if (r < 0)
		return r;
	s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
	                                              JSON_C_TO_STRING_NOSLASHESCAPE);
	if (!s)
		return -ENOMEM;
	return write_file_atomic(path, s, strlen(s), 0644);
}

int json_add_take(json_object *o, const char *key, json_object *v) {
	if (!v)
		return -ENOMEM;
	if (json_object_object_add(o, key, v) < 0) {
		json_object_put(v);
		return -ENOMEM;
	}
	return 0;
}
