/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* True if s contains a byte < 0x20 or 0x7f (tab included: a kernel command
 * line and an identifier have no use for it). */
bool string_has_cc(const char *s);

/* Number of strings in a NULL-terminated array. */
size_t strv_length(char *const *l);

/* Appends a copy of s to *l (allocating it when NULL). */
int strv_extend(char ***l, const char *s);

/* Removes leading and trailing whitespace in place; returns s. */
char *strstrip(char *s);

/* Parses an unsigned decimal with no sign, no spaces and no trailing garbage. */
int safe_atou64(const char *s, unsigned long long *ret);

/* The decimal number s starts with (a digit first: no sign, no space); *ret_end points
 * right behind it, at what follows (a unit, a separator). -EINVAL, -ERANGE. */
int safe_atou64_prefix(const char *s, unsigned long long *ret, const char **ret_end);
