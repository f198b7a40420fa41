/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The few macros every module uses: scope-bound cleanup, ownership transfer,
 * array sizes. Destructors used with _cleanup_ must accept NULL (or -1 for fds).
 */

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _cleanup_(f)   __attribute__((cleanup(f)))
#define _unused_       __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _noreturn_     __attribute__((noreturn))
#define _pure_         __attribute__((pure))
#define _likely_(x)    __builtin_expect(!!(x), 1)
#define _unlikely_(x)  __builtin_expect(!!(x), 0)

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

/* Hands ownership of a pointer/fd out of a cleanup-guarded variable. */
#define TAKE_PTR(p)                      \
	({                               \
		__typeof__(p) _p_ = (p); \
		(p) = NULL;              \
		_p_;                     \
	})
#define TAKE_FD(fd)              \
	({                       \
		int _fd_ = (fd); \
		(fd) = -EBADF;   \
		_fd_;            \
	})

#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func) \
	static inline void func##p(type *p) {   \
		if (*p)                         \
			func(*p);               \
	}

static inline void freep(void *p) {
	free(*(void **)p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline void closep(int *fd) {
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}
#define _cleanup_close_ _cleanup_(closep)

static inline void fclosep(FILE **f) {
	if (*f)
		fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

/* strv: NULL-terminated arrays of strings. */
static inline void strv_free(char **l) {
	if (!l)
		return;
	for (char **i = l; *i; i++)
		free(*i);
	free(l);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(char **, strv_free);
#define _cleanup_strv_free_ _cleanup_(strv_freep)

#define STRV_FOREACH(s, l) for (char **s = (l); s && *s; s++)

static inline bool streq(const char *a, const char *b) {
	return strcmp(a, b) == 0;
}

static inline bool streq_ptr(const char *a, const char *b) {
	if (!a || !b)
		return a == b;
	return streq(a, b);
}

static inline const char *strempty(const char *s) {
	return s ?: "";
}

static inline const char *strna(const char *s) {
	return s ?: "n/a";
}

/* errno is positive; negative values from our API map back with this. */
#define ERRNO_VALUE(e) ((e) < 0 ? -(e) : (e))

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
