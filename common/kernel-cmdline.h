/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * A kernel command line split into words the way the kernel splits it (lib/cmdline.c
 * next_arg()): blanks separate, double quotes group. Shared by the daemon's checks and the
 * loader, so both see the same words the next kernel will.
 */

#include <stdbool.h>
#include <stddef.h>

/* The word that ends the kernel's parameters (kernel/params.c parse_args()): every word after
 * it goes to init. The loaders append their own parameters after the caller's words, where
 * the kernel would hand them to init: a command line holding it is refused. */
#define KERNEL_CMDLINE_INIT_SEPARATOR "--"

/* The next word at *p: its start and length, *p moved past it. False at the end; a quote
 * never closed sets *unbalanced (the word then runs to the end). */
bool kernel_cmdline_next_word(const char **p, const char **ret_start, size_t *ret_len,
                              bool *unbalanced);

/* Whether s holds "--" as a word of its own, quoted or not (the kernel strips the quotes of
 * `"--"` before it compares). */
bool kernel_cmdline_has_init_separator(const char *s);
