/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * upgradectl on a terminal, with systemd's conventions: a pager for long output and colour
 * for outcomes. Neither happens when the output is not a terminal (a pipe, a file), so
 * scripts read the same text everywhere.
 *
 * Colour: on when the stream is a tty, $NO_COLOR is unset and $TERM is not "dumb";
 * $SYSTEMD_COLORS forces it (1/yes/true/on/16/256/24bit on, 0/no/false/off off). Decided
 * once by terminal_init(), before the pager takes stdout.
 *
 * Pager: $SYSTEMD_PAGER, else $PAGER, else less (then more), run by /bin/sh with
 * LESS=$SYSTEMD_LESS or FRSXMK; an empty value or "cat" means none. Only when stdout is a tty.
 */

#include <stdbool.h>
#include <stdio.h>

typedef enum TermColor {
	TERM_COLOR_NONE,
	TERM_COLOR_RED,    /* failed, refused, rolled back; error lines */
	TERM_COLOR_YELLOW, /* warnings: cancelled, an unusable backend */
	TERM_COLOR_GREEN,  /* done, success, resumed, preconditions met */
} TermColor;

/* Decides colour for stdout and stderr from the environment and the streams. */
void terminal_init(void);
/* The escape sequence that starts color on f; "" when f gets no colour. */
const char *term_color(FILE *f, TermColor color);
/* The sequence that ends it; "" when f gets no colour. */
const char *term_normal(FILE *f);
/* The colour an outcome word is shown in (failed, refused, rollback, cancelled, done, ...). */
TermColor term_color_of_state(const char *state);

/* Runs the pager on stdout when enabled and stdout is a tty: 1 when it runs, 0 when not,
 * < 0 on failure (the output then goes to the terminal). */
int pager_open(bool enabled);
/* Flushes stdout, ends the pager's input and waits for it. No-op without a pager. */
void pager_close(void);
