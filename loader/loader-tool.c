/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * loader-tool: drives the loader library by hand, without the daemon, for the
 * lab and for debugging (not installed). See --help.
 */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/reboot.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/reboot.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "loader.h"
#include "macros.h"
#include "sha256.h"
#include "string-util.h"

static const char *arg_root = NULL;
static const char *arg_initrd = NULL;
static const char *arg_cmdline = NULL;
static bool arg_reuse_cmdline = false;
static HandoffMode arg_mode = HANDOFF_MODE_VERIFIED;
static bool arg_panic = false;
static bool arg_dry_run = false;
static bool arg_corrupt = false;
static unsigned arg_console_port = PURGATORY_CONSOLE_COM1;
static const char *arg_dump = NULL;
static LoaderArch arg_arch = LOADER_ARCH_DEFAULT;

static void help(void) {
	printf("loader-tool COMMAND [OPTIONS]\n\n"
	       "Stages x86_64 and arm64 kernels with upgraded's own kexec loader (kexec_load +\n"
	       "our purgatory), without the daemon.\n\n"
	       "Commands:\n"
	       "  check              Say whether kexec_load can be used here; exit 0 if usable,\n"
	       "                     2 if not (the reason is printed)\n"
	       "  release KERNEL     Print the kernel release a bzImage or arm64 Image carries\n"
	       "  load KERNEL        Build the segments and load them with kexec_load\n"
	       "  unload             Unload the staged (or with --panic, the crash) image\n"
	       "  status             Print whether a normal and a crash image are loaded\n"
	       "  exec               Boot the loaded image now, as kexec -e does (syncs first;\n"
	       "                     for test guests without kexec-tools)\n\n"
	       "Options:\n"
	       "  --root DIR             Read /sys and /proc below DIR\n"
	       "  --arch x86_64|arm64    The kernel's architecture (default: this build's, %s);\n"
	       "                         arm64 takes its console and reset from the device tree\n"
	       "  --initrd FILE          Initrd for load\n"
	       "  --cmdline STRING       Command line of the new kernel\n"
	       "  --reuse-cmdline        Use /proc/cmdline minus upgraded.stamps=...\n"
	       "  --mode verified|fast   Purgatory checks every segment's SHA-256 (default), or "
	       "not\n"
	       "  --panic                Load as the crash image (always verified)\n"
	       "  --console-port N       Serial port for purgatory's mismatch line (0: none,\n"
	       "                         default 0x3f8)\n"
	       "  --dry-run              Build and print the segments, do not load\n"
	       "  --dump-segments DIR    Also write each segment to DIR/<name>.bin and their\n"
	       "                         addresses and the entry to DIR/segments (for emulators)\n"
	       "  --test-corrupt-digest  Tests only: record a wrong kernel digest, so a verified\n"
	       "                         handoff must refuse and reset\n"
	       "  -h --help              Show this help\n",
	       loader_arch_to_string(LOADER_ARCH_NATIVE));
}

static int parse_argv(int argc, char **argv) {
	enum {
		ARG_ROOT = 0x100,
		ARG_INITRD,
		ARG_CMDLINE,
		ARG_REUSE_CMDLINE,
		ARG_MODE,
		ARG_PANIC,
		ARG_CONSOLE_PORT,
		ARG_DRY_RUN,
		ARG_CORRUPT,
		ARG_DUMP,
		ARG_ARCH,
	};
	static const struct option options[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "root", required_argument, NULL, ARG_ROOT },
		{ "initrd", required_argument, NULL, ARG_INITRD },
		{ "cmdline", required_argument, NULL, ARG_CMDLINE },
		{ "reuse-cmdline", no_argument, NULL, ARG_REUSE_CMDLINE },
		{ "mode", required_argument, NULL, ARG_MODE },
		{ "panic", no_argument, NULL, ARG_PANIC },
		{ "console-port", required_argument, NULL, ARG_CONSOLE_PORT },
		{ "dry-run", no_argument, NULL, ARG_DRY_RUN },
		{ "test-corrupt-digest", no_argument, NULL, ARG_CORRUPT },
		{ "dump-segments", required_argument, NULL, ARG_DUMP },
		{ "arch", required_argument, NULL, ARG_ARCH },
		{},
	};
	int c;

	while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
		switch (c) {
		case 'h':
			help();
			return 0;
		case ARG_ROOT:
			arg_root = optarg;
			break;
		case ARG_INITRD:
			arg_initrd = optarg;
			break;
		case ARG_CMDLINE:
			arg_cmdline = optarg;
			break;
		case ARG_REUSE_CMDLINE:
			arg_reuse_cmdline = true;
			break;
		case ARG_MODE:
			arg_mode = handoff_mode_from_string(optarg);
			if (arg_mode < 0) {
				fprintf(stderr, "Unknown mode '%s': use verified or fast.\n",
				        optarg);
				return -EINVAL;
			}
			break;
		case ARG_PANIC:
			arg_panic = true;
			break;
		case ARG_CONSOLE_PORT: {
			char *end;
			unsigned long v = strtoul(optarg, &end, 0);
			if (*end || v > 0xffff) {
				fprintf(stderr, "Invalid console port '%s'.\n", optarg);
				return -EINVAL;
			}
			arg_console_port = v;
			break;
		}
		case ARG_DRY_RUN:
			arg_dry_run = true;
			break;
		case ARG_CORRUPT:
			arg_corrupt = true;
			break;
		case ARG_DUMP:
			arg_dump = optarg;
			break;
		case ARG_ARCH:
			arg_arch = loader_arch_from_string(optarg);
			if (arg_arch < 0) {
				fprintf(stderr, "Unknown architecture '%s': use x86_64 or arm64.\n",
				        optarg);
				return -EINVAL;
			}
			break;
		default:
			return -EINVAL;
		}
	return 1;
}

/* /proc/cmdline without a previous handoff's stamps. */
static int reuse_cmdline(char **ret) {
	_cleanup_free_ char *data = NULL;
	_cleanup_free_ char *out = NULL;
	size_t size, o = 0;
	char *w, *save = NULL;

	if (read_file_full("/proc/cmdline", 65536, &data, &size) < 0)
		return -errno;
	out = calloc(1, size + 1);
	if (!out)
		return -ENOMEM;
	for (w = strtok_r(strstrip(data), " ", &save); w; w = strtok_r(NULL, " ", &save)) {
		if (strncmp(w, PURGATORY_STAMPS_KEY, strlen(PURGATORY_STAMPS_KEY)) == 0 ||
		    streq(w, "reset_devices") || strncmp(w, "upgraded.panic=", 15) == 0)
			continue;
		o += sprintf(out + o, "%s%s", o ? " " : "", w);
	}
	*ret = TAKE_PTR(out);
	return 0;
}

/* DIR/<name>.bin per segment (buffer only: the rest of memsz is zero) and
 * DIR/segments with "name address file" lines and "entry address". */
static int dump_segments(const struct loader_image *img, const char *const names[]) {
	_cleanup_free_ char *index = NULL;
	_cleanup_fclose_ FILE *f = NULL;
	const struct loader_segment *s;
	size_t n = loader_image_segments(img, &s);
	int r;

	r = mkdir_p(arg_dump, 0755);
	if (r < 0)
		return r;
	if (asprintf(&index, "%s/segments", arg_dump) < 0)
		return -ENOMEM;
	f = fopen(index, "we");
	if (!f)
		return -errno;
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *p = NULL;

		if (!s[i].memsz)
			continue;
		if (asprintf(&p, "%s/%s.bin", arg_dump, names[i]) < 0)
			return -ENOMEM;
		r = write_file_atomic(p, s[i].buf, s[i].bufsz, 0644);
		if (r < 0)
			return r;
		fprintf(f, "%s 0x%" PRIx64 " %s\n", names[i], s[i].mem, p);
	}
	fprintf(f, "entry 0x%" PRIx64 "\n", loader_image_entry(img));
	return fflush(f) == 0 ? 0 : -errno;
}

static int verb_load(const char *kernel) {
	_cleanup_close_ int kfd = -EBADF, ifd = -EBADF;
	_cleanup_free_ char *cmdline = NULL;
	struct loader_image *img = NULL;
	const struct loader_segment *s;
	static const char *const names_x86[_LOADER_SEG_MAX] = { "kernel", "initrd", "params",
		                                                "purgatory", "elfcorehdr" };
	static const char *const names_arm64[_LOADER_SEG_MAX] = { "kernel", "initrd", "dtb",
		                                                  "purgatory", "elfcorehdr" };
	const char *const *names;
	LoaderError le = LOADER_OK;
	BzImageError be = BZIMAGE_OK;
	Arm64ImageError ae = ARM64_IMAGE_OK;
	struct timespec t0, t1;
	size_t n;
	int r;

	kfd = open(kernel, O_RDONLY | O_CLOEXEC);
	if (kfd < 0)
		return fprintf(stderr, "Failed to open '%s': %m\n", kernel), -errno;
	if (arg_initrd) {
		ifd = open(arg_initrd, O_RDONLY | O_CLOEXEC);
		if (ifd < 0)
			return fprintf(stderr, "Failed to open '%s': %m\n", arg_initrd), -errno;
	}
	if (arg_reuse_cmdline) {
		r = reuse_cmdline(&cmdline);
		if (r < 0)
			return fprintf(stderr, "Failed to read /proc/cmdline: %s\n", strerror(-r)),
			       r;
	}

	struct loader_options o = {
		.arch = arg_arch,
		.root = arg_root,
		.kernel_fd = kfd,
		.initrd_fd = ifd,
		.cmdline = cmdline ?: arg_cmdline,
		.mode = arg_mode,
		.panic = arg_panic,
		.console_port = arg_console_port,
		.ret_arm64_image_error = &ae,
	};
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = loader_image_build(&o, &img, &le, &be);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (r < 0) {
		fprintf(stderr, "Failed to stage '%s': %s", kernel, loader_error_to_string(le));
		if (le == LOADER_ERR_BZIMAGE)
			fprintf(stderr, ": %s", bzimage_error_to_string(be));
		if (le == LOADER_ERR_ARM64_IMAGE)
			fprintf(stderr, ": %s", arm64_image_error_to_string(ae));
		fprintf(stderr, " (%s)\n", strerror(-r));
		return r;
	}
	if (arg_corrupt)
		loader_image_corrupt_digest_for_test(img);

	names = loader_image_arch(img) == LOADER_ARCH_ARM64 ? names_arm64 : names_x86;
	printf("kernel %s (%s), staged in %.1f ms (sha256 %s)\n", loader_image_release(img),
	       loader_arch_to_string(loader_image_arch(img)),
	       (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6,
	       sha256_impl_to_string((Sha256Impl)loader_image_params(img)->sha256_impl_request -
	                             1));
	n = loader_image_segments(img, &s);
	for (size_t i = 0; i < n; i++)
		if (s[i].memsz)
			printf("  %-9s 0x%012" PRIx64 "-0x%012" PRIx64 " (%zu bytes)\n", names[i],
			       s[i].mem, s[i].mem + s[i].memsz - 1, s[i].bufsz);
	printf("  entry     0x%" PRIx64 ", mode %s%s%s\n", loader_image_entry(img),
	       handoff_mode_to_string(arg_mode), arg_panic ? ", panic" : "",
	       arg_corrupt ? ", CORRUPTED DIGEST (test)" : "");
	printf("  cmdline   %s\n", loader_image_cmdline(img));
	if (arg_dump) {
		r = dump_segments(img, names);
		if (r < 0) {
			fprintf(stderr, "Failed to dump segments to '%s': %s\n", arg_dump,
			        strerror(-r));
			loader_image_free(img);
			return r;
		}
	}

	if (!arg_dry_run) {
		r = loader_image_load(img);
		if (r < 0)
			fprintf(stderr, "kexec_load failed: %s\n", strerror(-r));
		else
			printf("loaded\n");
	}
	loader_image_free(img);
	return r < 0 ? r : 0;
}

/* The release of a bzImage or (with --arch arm64, or when the build is arm64's) an
 * arm64 Image. */
static int verb_release(const char *kernel) {
	_cleanup_free_ char *rel = NULL;
	LoaderArch arch = arg_arch == LOADER_ARCH_DEFAULT ? LOADER_ARCH_NATIVE : arg_arch;
	const char *why = NULL;
	int r;

	if (arch == LOADER_ARCH_ARM64) {
		Arm64ImageError e = ARM64_IMAGE_OK;

		r = arm64_image_kernel_release(kernel, &rel, &e);
		if (r < 0)
			why = e != ARM64_IMAGE_OK ? arm64_image_error_to_string(e)
			      : r == -ENODATA     ? "the Image carries no \"Linux version\" banner"
			                          : strerror(-r);
	} else {
		BzImageError e = BZIMAGE_OK;

		r = bzimage_kernel_release(kernel, &rel, &e);
		if (r < 0)
			why = e != BZIMAGE_OK ? bzimage_error_to_string(e) : strerror(-r);
	}
	if (r < 0)
		return fprintf(stderr, "'%s': %s\n", kernel, why), r;
	printf("%s\n", rel);
	return 0;
}

int main(int argc, char **argv) {
	const char *verb;
	int r;

	r = parse_argv(argc, argv);
	if (r <= 0)
		return r < 0 ? 1 : 0;
	if (optind >= argc) {
		help();
		return 1;
	}
	verb = argv[optind];

	if (streq(verb, "check")) {
		LoaderUnusable u;

		r = loader_check_usable(arg_root, &u);
		if (r < 0)
			return fprintf(stderr, "Failed to check: %s\n", strerror(-r)), 1;
		printf("%s\n", loader_unusable_to_string(u));
		return u == LOADER_USABLE ? 0 : 2;
	}
	if (streq(verb, "release") && optind + 1 < argc)
		return verb_release(argv[optind + 1]) < 0 ? 1 : 0;
	if (streq(verb, "load") && optind + 1 < argc)
		return verb_load(argv[optind + 1]) < 0 ? 1 : 0;
	if (streq(verb, "exec")) {
		if (loader_is_loaded(arg_root, false) != 1)
			return fprintf(stderr, "No image is loaded: run load first.\n"), 1;
		sync();
		if (reboot(LINUX_REBOOT_CMD_KEXEC) < 0)
			return fprintf(stderr, "Failed to kexec: %m\n"), 1;
		return 0;
	}
	if (streq(verb, "unload")) {
		r = loader_unload(arg_panic);
		if (r < 0)
			return fprintf(stderr, "Failed to unload: %s\n", strerror(-r)), 1;
		return 0;
	}
	if (streq(verb, "status")) {
		int a = loader_is_loaded(arg_root, false), b = loader_is_loaded(arg_root, true);

		printf("kexec image: %s\ncrash image: %s\n",
		       a < 0 ? "unknown (no kexec)"
		       : a   ? "loaded"
		             : "none",
		       b < 0 ? "unknown (no kexec)"
		       : b   ? "loaded"
		             : "none");
		return 0;
	}
	fprintf(stderr, "Unknown command or missing argument: '%s'. See --help.\n", verb);
	return 1;
}
