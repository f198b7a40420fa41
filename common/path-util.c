/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "macros.h"
#include "path-util.h"

bool path_is_absolute(const char *p) {
	return p && p[0] == '/';
}

bool path_is_normalized(const char *p) {
	if (!path_is_absolute(p))
		return false;
	if (streq(p, "/"))
		return true;

	/* Walk components: each must be non-empty and neither "." nor "..". */
	for (const char *c = p + 1;;) {
		size_t n = strcspn(c, "/");

		if (n == 0)
			return false; /* "//" or trailing "/" */
		if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (c[n] == '\0')
			return true;
		c += n + 1;
	}
}

const char *path_startswith(const char *path, const char *prefix) {
	size_t n;

	if (!path_is_absolute(path) || !path_is_absolute(prefix))
		return NULL;

	/* Compare component-wise so that "/bootx" is not below "/boot". */
	while (prefix[0] == '/' && prefix[1] == '/')
		prefix++;
	n = strlen(prefix);
	while (n > 1 && prefix[n - 1] == '/')
		n--;
	if (n == 1) { /* prefix is "/" */
		while (*path == '/')
			path++;
		return path;
	}
	if (strncmp(path, prefix, n) != 0)
		return NULL;
	path += n;
	if (*path != '\0' && *path != '/')
		return NULL;
	while (*path == '/')
		path++;
	return path;
}

int path_join(const char *a, const char *b, char **ret) {
	size_t la, lb;
	char *p;

	if (!a || !b || !ret)
		return -EINVAL;

	la = strlen(a);
	while (la > 0 && a[la - 1] == '/')
		la--;
	while (*b == '/')
		b++;
	lb = strlen(b);

	p = malloc(la + 1 + lb + 1);
	if (!p)
		return -ENOMEM;
	memcpy(p, a, la);
	p[la] = '/';
	memcpy(p + la + 1, b, lb + 1);
	if (lb == 0 && la > 0)
		p[la] = '\0'; /* "a/" + "" -> "a" */
	*ret = p;
	return 0;
}

int path_prefix_root(const char *root, const char *path, char **ret) {
	char *p;

	if (!path_is_absolute(path) || !ret)
		return -EINVAL;
	if (!root || root[0] == '\0' || streq(root, "/")) {
		p = strdup(path);
		if (!p)
			return -ENOMEM;
		*ret = p;
		return 0;
	}
	return path_join(root, path, ret);
}

bool path_is_real_root(const char *root) {
	struct stat a, b;

	if (!root || !*root)
		return true;
	if (stat(root, &a) < 0 || stat("/", &b) < 0)
		return false;
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

bool path_is_below_any(const char *path, char *const *roots) {
	if (!path_is_normalized(path))
		return false;
	for (char *const *r = roots; r && *r; r++)
		if (path_startswith(path, *r))
			return true;
	return false;
}

const char *path_basename(const char *p) {
	const char *s;

	if (!p)
		return NULL;
	s = strrchr(p, '/');
	s = s ? s + 1 : p;
	return *s ? s : NULL;
}
