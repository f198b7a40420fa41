/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The "kexec_load" backend's extras: how the daemon picks its backend, and the
 * test seam that replaces the kexec_load system call.
 */

#include "kexec-backend.h"
#include "loader.h"

/*
 * The default backend: upgraded's own loader (kexec_load) when
 * loader_check_usable() and the kernel allow it, otherwise kexec_file_load.
 * *ret_backend is the one to use; *ret_status is its probe result (< 0: not even
 * the fallback works here); *ret_reason says why (NULL when the first choice
 * works); *ret_fallback is true when kexec_file was chosen because kexec_load
 * cannot be used. ret_reason is newly allocated.
 */
int kexec_backend_select(const char *root, const KexecBackend **ret_backend, int *ret_status,
                         char **ret_reason, bool *ret_fallback);

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
