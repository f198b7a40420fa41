/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once
/* The integration tests' soft assertion: a failed check is printed with its place, counts in
 * the including file's `failures`, and the run goes on. */

#include <stdio.h>

#define CHECK(cond, ...)                                                                \
	do {                                                                            \
		if (!(cond)) {                                                          \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                   \
			fputc('\n', stderr);                                            \
			failures++;                                                     \
		}                                                                       \
	} while (0)
