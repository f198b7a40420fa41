/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The loader's tests build images for both architectures, but a build carries only
 * its own architecture's purgatory blob. Linked with -Wl,--wrap=loader_purgatory_blob
 * (loader/meson.build: purgatory_standin_dep), this gives the real blob for the
 * build's architecture and a zeroed stand-in of about the blob's size for the other
 * (the loader fills in the parameters either way; purgatory's own tests run the blob).
 * Include once per test program.
 */

#include <stddef.h>
#include <stdint.h>

#include "loader.h"

#define PURGATORY_STANDIN_SIZE (270 * 1024)

int __real_loader_purgatory_blob(LoaderArch arch, const uint8_t **ret_blob, size_t *ret_size);
int __wrap_loader_purgatory_blob(LoaderArch arch, const uint8_t **ret_blob, size_t *ret_size);

int __wrap_loader_purgatory_blob(LoaderArch arch, const uint8_t **ret_blob, size_t *ret_size) {
	static uint8_t standin[PURGATORY_STANDIN_SIZE];

	if (arch == LOADER_ARCH_NATIVE)
		return __real_loader_purgatory_blob(arch, ret_blob, ret_size);
	*ret_blob = standin;
	*ret_size = sizeof(standin);
	return 0;
}
