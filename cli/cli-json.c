/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "cli-json.h"

json_object *cli_jobj(json_object *o, const char *k) {
	json_object *v = NULL;

	if (!o || !json_object_object_get_ex(o, k, &v))
		return NULL;
	return v;
}

const char *cli_jstr(json_object *o, const char *k) {
	json_object *v = cli_jobj(o, k);

	return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

json_object *cli_jarray(json_object *o, const char *k) {
	json_object *v = cli_jobj(o, k);

	return v && json_object_is_type(v, json_type_array) ? v : NULL;
}

size_t cli_jarray_length(json_object *a) {
	return a ? json_object_array_length(a) : 0;
}
