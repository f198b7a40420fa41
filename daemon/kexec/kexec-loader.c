/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The "kexec_load" backend: upgraded's own loader (loader/) builds the segments
 * at stage time (parse, place, hash) and hands them to kexec_load(2) with our
 * purgatory, which verifies every segment's SHA-256 or not, as the policy chose
 * at commit. The built images stay in memory until unloaded, so a change of
 * handoff mode at commit rewrites one word and loads again: no file I/O, no
 * hashing on the commit path. The crash image is always verified.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kexec-loader.h"
#include "log.h"
#include "macros.h"
#include "string-util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(struct loader_image *, loader_image_free);

static struct loader_image *images[2]; /* [0] normal, [1] crash */
static KexecLoaderLoadFunc load_func;
static void *load_func_userdata;

void kexec_loader_set_load_func_for_test(KexecLoaderLoadFunc f, void *userdata) {
	load_func = f;
	load_func_userdata = userdata;
}

const struct loader_image *kexec_loader_image(bool panic) {
	return images[panic];
}

int kexec_loader_memory_map_unchanged(const char *root) {
	uint8_t now[SHA256_DIGEST_SIZE];
	int r;

	if (!images[0])
		return -ESTALE;
	r = loader_memory_map_digest(root, now);
	if (r < 0)
		return r;
	return memcmp(now, loader_image_memory_map_digest(images[0]), sizeof(now)) == 0;
}

uint64_t kexec_loader_verified_bytes(void) {
	return images[0] ? loader_params_verified_bytes(loader_image_params(images[0])) : 0;
}

static int submit(const struct loader_image *img) {
	return load_func ? load_func(img, load_func_userdata) : loader_image_load(img);
}

static void forget(bool panic) {
	images[panic] = loader_image_free(images[panic]);
}

static int loader_probe(const char *root, char **ret_reason) {
	LoaderUnusable why = LOADER_USABLE;
	char *s = NULL;
	int r;

	r = loader_check_usable(root, &why);
	if (r < 0) {
		if (ret_reason && asprintf(&s, "cannot tell whether kexec_load is allowed: %s",
		                           strerror(-r)) >= 0)
			*ret_reason = s;
		return r;
	}
	if (why != LOADER_USABLE) {
		if (ret_reason)
			*ret_reason = strdup(loader_unusable_to_string(why));
		return -EOPNOTSUPP;
	}
	/* Allowed, but does the kernel have kexec at all? */
	r = loader_is_loaded(root, false);
	if (r < 0) {
		if (ret_reason)
			*ret_reason = strdup("the running kernel has no kexec support (no "
			                     "/sys/kernel/kexec_loaded)");
		return -ENOSYS;
	}
	return 0;
}

/* "console=ttyS0[,...]" on the new kernel's command line: purgatory writes its
 * mismatch line to COM1 too. Other ports are not guessed. */
static uint16_t console_port(const char *cmdline) {
	for (const char *p = cmdline; p && (p = strstr(p, "console=ttyS0")); p++)
		if (p == cmdline || p[-1] == ' ')
			if (p[13] == '\0' || p[13] == ',' || p[13] == ' ')
				return PURGATORY_CONSOLE_COM1;
	return 0;
}

static int loader_load(const char *root, const KexecImage *image) {
	_cleanup_(loader_image_freep) struct loader_image *img = NULL;
	bool panic = image->flags & KEXEC_IMAGE_PANIC;
	LoaderError e = LOADER_OK;
	BzImageError be = BZIMAGE_OK;
	struct loader_options o;
	int r;

	if (image->kernel_fd < 0)
		return -EBADF;
	/* Never a fast crash image, whoever asks. */
	if (panic && image->mode != HANDOFF_MODE_VERIFIED)
		return -EINVAL;

	o = (struct loader_options){
		.root = root,
		.kernel_fd = image->kernel_fd,
		.initrd_fd = image->initrd_fd >= 0 ? image->initrd_fd : -1,
		.cmdline = image->cmdline ?: "",
		.mode = panic ? HANDOFF_MODE_VERIFIED : image->mode,
		.panic = panic,
		.console_port = console_port(image->cmdline),
		.memmap_dir = image->memmap_dir,
	};
	r = loader_image_build(&o, &img, &e, &be);
	if (r < 0)
		return log_debug_errno(r, "Building the %s image of '%s' failed: %s%s%s",
		                       panic ? "crash" : "kexec", image->kernel_path,
		                       strna(loader_error_to_string(e)),
		                       e == LOADER_ERR_BZIMAGE ? ": " : "",
		                       e == LOADER_ERR_BZIMAGE ? bzimage_error_to_string(be) : "");
	r = submit(img);
	if (r < 0)
		return log_debug_errno(r, "kexec_load('%s') failed: %m", image->kernel_path);
	forget(panic);
	images[panic] = TAKE_PTR(img);
	return 0;
}

/* Only the normal image: the crash image keeps the mode it was built with, verified. */
static int loader_set_mode(const char *root, HandoffMode mode) {
	struct loader_image *img = images[0];
	int r;

	if (mode != HANDOFF_MODE_VERIFIED && mode != HANDOFF_MODE_FAST)
		return -EINVAL;
	if (!img)
		return -ESTALE;
	if (loader_image_params(img)->mode == handoff_mode_to_purgatory(mode))
		return 0;
	r = loader_image_set_mode(img, mode);
	if (r < 0)
		return r;
	r = submit(img);
	if (r < 0) {
		/* The kernel keeps what it had: put our copy back in line with it. */
		(void)loader_image_set_mode(img, mode == HANDOFF_MODE_FAST ? HANDOFF_MODE_VERIFIED
		                                                           : HANDOFF_MODE_FAST);
		return r;
	}
	return 0;
}

static int loader_unload_op(const char *root, unsigned flags) {
	bool panic = flags & KEXEC_IMAGE_PANIC;
	int r;

	r = load_func ? 0 : loader_unload(panic);
	if (r < 0)
		return r;
	forget(panic);
	return 0;
}

static int loader_is_loaded_op(const char *root, unsigned flags) {
	int r = loader_is_loaded(root, flags & KEXEC_IMAGE_PANIC);

	return r == -ENOENT ? -ENOSYS : r;
}

static bool loader_holds_staged_bytes(void) {
	return kexec_loader_image(false) != NULL;
}

const KexecBackend kexec_backend_loader = {
	.name = "kexec_load",
	.probe = loader_probe,
	.load = loader_load,
	.unload = loader_unload_op,
	.is_loaded = loader_is_loaded_op,
	.set_mode = loader_set_mode,
	.verified_bytes = kexec_loader_verified_bytes,
	.holds_staged_bytes = loader_holds_staged_bytes,
	.memory_map_unchanged = kexec_loader_memory_map_unchanged,
	.supported_modes =
	        HANDOFF_MODE_BIT(HANDOFF_MODE_VERIFIED) | HANDOFF_MODE_BIT(HANDOFF_MODE_FAST),
	.test_only = false,
};
