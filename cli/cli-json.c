/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

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

int cli_json_format_from_string(const char *s) {
	if (!s || strcmp(s, "short") == 0)
		return CLI_JSON_SHORT;
	if (strcmp(s, "pretty") == 0)
		return CLI_JSON_PRETTY;
	return -EINVAL;
}

/* An upper-case letter starts a word after a lower-case letter or a digit ("RunningKernel"),
 * and inside a run of capitals before a lower-case letter ("VMName"), but not before the
 * plural s that ends an acronym ("VMs"). */
void cli_json_snake_key(const char *key, char *out) {
	size_t o = 0;

	for (size_t i = 0; key[i]; i++) {
		unsigned char c = (unsigned char)key[i],
		              prev = i > 0 ? (unsigned char)key[i - 1] : 0;
		unsigned char next = (unsigned char)key[i + 1];
		bool plural =
		        next == 's' && (key[i + 2] == '\0' || isupper((unsigned char)key[i + 2]));

		if (isupper(c) && i > 0 &&
		    (islower(prev) || isdigit(prev) ||
		     (isupper(prev) && islower(next) && !plural)) &&
		    out[o - 1] != '_')
			out[o++] = '_';
		out[o++] = (char)tolower(c);
	}
	out[o] = '\0';
}

json_object *cli_json_snake_keys(json_object *o) {
	json_object *copy;

	switch (json_object_get_type(o)) {
	case json_type_object:
		copy = json_object_new_object();
		if (!copy)
			return NULL;
		json_object_object_foreach(o, key, value) {
			char *k = malloc(2 * strlen(key) + 1);
			json_object *v = value ? cli_json_snake_keys(value) : NULL;

			if (k)
				cli_json_snake_key(key, k);
			if (!k || (value && !v) || json_object_object_add(copy, k, v) < 0) {
				free(k);
				json_object_put(v);
				json_object_put(copy);
				return NULL;
			}
			free(k);
		}
		return copy;
	case json_type_array:
		copy = json_object_new_array();
		if (!copy)
			return NULL;
		for (size_t i = 0; i < json_object_array_length(o); i++) {
			json_object *e = json_object_array_get_idx(o, i);
			json_object *v = e ? cli_json_snake_keys(e) : NULL;

			if ((e && !v) || json_object_array_add(copy, v) < 0) {
				json_object_put(v);
				json_object_put(copy);
				return NULL;
			}
		}
		return copy;
	default:
		return json_object_get(o);
	}
}

void cli_json_print(json_object *o, CliJsonFormat format, FILE *f) {
	int flags = JSON_C_TO_STRING_NOSLASHESCAPE |
	            (format == CLI_JSON_PRETTY ? JSON_C_TO_STRING_PRETTY : JSON_C_TO_STRING_PLAIN);

	fprintf(f, "%s\n", json_object_to_json_string_ext(o, flags));
}
