/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The "kexec_load" backend's extras: what it holds, and the test seam that
 * replaces the kexec_load system call.
 */

#include "kexec-backend.h"
#include "loader.h"

/* Tests: replaces loader_image_load() (NULL restores it). The function sees
 * the built image exactly as the kernel would get it. */
typedef int (*KexecLoaderLoadFunc)(const struct loader_image *img, void *userdata);
void kexec_loader_set_load_func_for_test(KexecLoaderLoadFunc f, void *userdata);

/* The image the backend holds for the kernel (normal or crash), or NULL. */
const struct loader_image *kexec_loader_image(bool panic);

/* 1 when the held normal image was built from the memory map the host has
 * now (its placement still holds), 0 when the map changed, -ESTALE without a
 * held image, other -errno when the map cannot be read. */
int kexec_loader_memory_map_unchanged(const char *root);

/* Bytes purgatory hashes in verified mode for the held normal image (every
 * listed segment, zero padding included); 0 when none is held. */
uint64_t kexec_loader_verified_bytes(void);
