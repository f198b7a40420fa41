/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The backend table (kexec-backend.h) and what is true of every backend: finding one by
 * name, choosing the default, whether a crash kernel reservation exists.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "fileio.h"
#include "kexec-backend.h"
#include "kexec-loader.h"
#include "macros.h"
#include "path-util.h"
#include "string-util.h"

const KexecBackend *kexec_backend_find(const char *name) {
	static const KexecBackend *const all[] = { &kexec_backend_loader, &kexec_backend_file,
		                                   &kexec_backend_record };

	for (size_t i = 0; i < ELEMENTSOF(all); i++)
		if (name && streq(all[i]->name, name))
			return all[i];
	return NULL;
}

bool kexec_crash_reserved(const char *root) {
	_cleanup_free_ char *path = NULL;
	unsigned long long v;

	return path_prefix_root(root, "/sys/kernel/kexec_crash_size", &path) >= 0 &&
	       read_u64_file(path, &v) >= 0 && v > 0;
}

int kexec_backend_select(const char *root, const KexecBackend **ret_backend, int *ret_status,
                         char **ret_reason, bool *ret_fallback) {
	_cleanup_free_ char *why_load = NULL, *why_file = NULL;
	char *s = NULL;
	int r, k;

	r = kexec_backend_loader.probe(root, &why_load);
	if (r >= 0) {
		*ret_backend = &kexec_backend_loader;
		*ret_status = 0;
		*ret_reason = NULL;
		*ret_fallback = false;
		return 0;
	}
	r = kexec_backend_file.probe(root, &why_file);
	if (r >= 0)
		k = asprintf(&s, "kexec_load cannot be used (%s): using kexec_file_load instead",
		             strna(why_load));
	else
		k = asprintf(&s, "kexec_load: %s; kexec_file_load: %s", strna(why_load),
		             strna(why_file));
	if (k < 0)
		return -ENOMEM;
	*ret_backend = &kexec_backend_file;
	*ret_status = r < 0 ? r : 0;
	*ret_reason = s;
	*ret_fallback = true;
	return 0;
}
