/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* Room string_escape_cut() needs for an output of at most max bytes: the "..." of a cut and
 * the NUL. */
#define ESCAPE_CUT_SIZE(max) ((max) + 4)

/* Copies the first len bytes of s (or up to its NUL, whichever comes first; s may be NULL)
 * into buf as text that is safe to quote in a message or a D-Bus reply: whole UTF-8
 * characters only, a control character or a byte that is not part of valid UTF-8 written
 * as \xNN, at most max bytes of it, and "..." when something was left out. A reply built
 * from it is always valid UTF-8, however the caller's input was cut. buf holds
 * ESCAPE_CUT_SIZE(max) bytes. Returns buf. */
char *string_escape_cut(const char *s, size_t len, size_t max, char *buf);

/* string_escape_cut() of a whole string into a buffer that lives until the end of the
 * enclosing statement's block: for a "'%s'" argument. */
#define QUOTE_CUT(s, max) string_escape_cut((s), SIZE_MAX, (max), (char[ESCAPE_CUT_SIZE(max)]){ 0 })

/* string_escape_cut() of the whole of s into a new string (never cut): NULL on ENOMEM. */
char *string_escape(const char *s);

/* Length of the valid UTF-8 character at the start of the n bytes at s (1-4), 0 when they
 * do not start with one (an overlong form, a surrogate, beyond U+10FFFF, cut short). */
size_t utf8_char_len(const char *s, size_t n);
