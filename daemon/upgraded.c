/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * upgraded: the live kernel update service. Parses the command line, recovers
 * what a previous run or the previous kernel left, then serves
 * org.upgraded.Upgrade1 on the system bus.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "bus.h"
#include "cmdline.h"
#include "config.h"
#include "context.h"
#include "fileio.h"
#include "measure.h"
#include "log.h"
#include "macros.h"
#include "path-util.h"
#include "policy.h"
#include "string-util.h"
#include "vm-steps.h"
#ifdef UPGRADED_TEST_CORRUPT_DIGEST
#include "kexec-loader.h"

/* The lab's corruption test (meson -Dtest-corrupt-digest=true builds this into
 * upgraded-test-corrupt-digest only): every normal image gets one wrong bit in
 * its recorded kernel digest before it reaches the kernel, so purgatory must
 * refuse it in verified mode. The crash image is left intact. */
static int corrupt_then_load(const struct loader_image *img, void *userdata) {
	static const struct loader_image *corrupted;

	if (!loader_image_is_panic(img) && img != corrupted) {
		loader_image_corrupt_digest_for_test((struct loader_image *)img);
		corrupted = img; /* a mode switch loads it again: flip only once */
	}
	return loader_image_load(img);
}
#endif
#ifdef UPGRADED_TEST_PANIC_HOLD
#include <unistd.h>

#define PANIC_HOLD_READY   "/run/upgraded/test-panic-hold.ready"
#define PANIC_HOLD_RELEASE "/run/upgraded/test-panic-hold.release"

/* The lab's panic scenario (meson -Dtest-panic-hold=true builds this into
 * upgraded-test-panic-hold only): once the pre-handoff steps are done (VMs
 * checkpointed), write the update id to PANIC_HOLD_READY and wait, blocking
 * everything, until PANIC_HOLD_RELEASE exists (at most 10 minutes). The lab
 * crashes the kernel meanwhile: the record is in phase pre-handoff with every
 * step done, and no handoff record was written. */
static void hold_before_handoff(Context *c, Update *u, void *userdata) {
	_cleanup_free_ char *ready = NULL, *release = NULL;

	if (path_prefix_root(context_root(c), PANIC_HOLD_READY, &ready) < 0 ||
	    path_prefix_root(context_root(c), PANIC_HOLD_RELEASE, &release) < 0 ||
	    write_file_atomic(ready, u->id, strlen(u->id), 0644) < 0)
		return;
	log_warning("TEST BUILD: update %s holds before its handoff record until '%s' "
	            "exists.",
	            u->id, release);
	for (unsigned i = 0; i < 6000 && access(release, F_OK) < 0; i++)
		usleep(100 * 1000);
}
#endif

#ifdef UPGRADED_TEST_CRASH_POINTS
/* The kill test (built into upgraded-test-crash-points only, never installed):
 * every persisted step of the state machine is logged with its running number,
 * and with UPGRADED_TEST_CRASH_AT=N the daemon kills itself with SIGKILL right
 * after step N reached the disk, the way a power cut or the OOM killer would
 * stop it. tests/integration/test-daemon-kill.sh enumerates the steps with it. */
static unsigned crash_at;

static int crash_point(Context *c, Update *u, unsigned step, void *userdata) {
	log_info("Crash point %u: update %s %s/%s.", step, u->id, update_state_to_string(u->state),
	         u->phase);
	if (step == crash_at) {
		log_info("Crash point %u: killing myself.", step);
		raise(SIGKILL);
	}
	return 0;
}

static int crash_points_setup(Context *c) {
	const char *e = getenv("UPGRADED_TEST_CRASH_AT");
	unsigned long long v = 0;

	if (e && (safe_atou64(e, &v) < 0 || v > UINT_MAX))
		return log_error_errno(-EINVAL, "Invalid UPGRADED_TEST_CRASH_AT='%s'.", e);
	crash_at = (unsigned)v;
	context_set_persist_hook(c, crash_point, NULL);
	log_warning("TEST BUILD: persisted steps are numbered%s.",
	            crash_at > 0 ? "; SIGKILL after the one named by UPGRADED_TEST_CRASH_AT" : "");
	return 0;
}
#endif

typedef struct Args {
	const char *root;
	const char *bus_address;
	const char *backend;
	const char *trigger;
	const char *running_kernel;
	const char *boot_id;
	const char *libvirt_uri;
	bool check_config;
} Args;

static void help(void) {
	printf("upgraded [OPTIONS...]\n\n"
	       "Live kernel update service: serves org.upgraded.Upgrade1 on the system bus.\n\n"
	       "  -h --help                 Show this help\n"
	       "     --version              Show the version\n"
	       "     --root=DIR             Prefix every path (state, images, /proc/cmdline)\n"
	       "                            with DIR\n"
	       "     --bus-address=ADDRESS  Connect to this bus instead of the system bus\n"
	       "                            (default: $DBUS_SYSTEM_BUS_ADDRESS or the system bus)\n"
	       "     --check-config         Validate the configuration and exit\n"
	       "     --libvirt-uri=URI      Manage the VMs of this libvirt connection\n"
	       "                            (default: qemu:///system)\n"
	       "     --log-level=LEVEL      err, warning, info (default) or debug\n\n"
	       "Test-only options, accepted together with --root only:\n"
	       "     --backend=NAME         kexec backend: kexec_load (upgraded's own loader),\n"
	       "                            kexec_file, or record (tests); default: kexec_load,\n"
	       "                            falling back to kexec_file where it cannot be used\n"
	       "     --kexec-trigger=NAME   systemd (default) or record\n"
	       "     --running-kernel=VER   Pretend `uname -r` is VER\n"
	       "     --boot-id=ID           Pretend the boot id is ID (32 hex digits)\n\n"
	       "See docs/dbus-api.md and docs/state-machine.md.\n");
}

static int parse_argv(int argc, char *argv[], Args *a) {
	enum {
		ARG_VERSION = 0x100,
		ARG_ROOT,
		ARG_BUS_ADDRESS,
		ARG_CHECK_CONFIG,
		ARG_LOG_LEVEL,
		ARG_BACKEND,
		ARG_TRIGGER,
		ARG_RUNNING_KERNEL,
		ARG_BOOT_ID,
		ARG_LIBVIRT_URI,
	};
	static const struct option options[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, ARG_VERSION },
		{ "root", required_argument, NULL, ARG_ROOT },
		{ "bus-address", required_argument, NULL, ARG_BUS_ADDRESS },
		{ "check-config", no_argument, NULL, ARG_CHECK_CONFIG },
		{ "log-level", required_argument, NULL, ARG_LOG_LEVEL },
		{ "backend", required_argument, NULL, ARG_BACKEND },
		{ "kexec-trigger", required_argument, NULL, ARG_TRIGGER },
		{ "running-kernel", required_argument, NULL, ARG_RUNNING_KERNEL },
		{ "boot-id", required_argument, NULL, ARG_BOOT_ID },
		{ "libvirt-uri", required_argument, NULL, ARG_LIBVIRT_URI },
		{},
	};
	int c, l;

	while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
		switch (c) {
		case 'h':
			help();
			return 0;
		case ARG_VERSION:
			printf("upgraded %s\n", PACKAGE_VERSION);
			return 0;
		case ARG_ROOT:
			if (!path_is_absolute(optarg))
				return log_error_errno(-EINVAL, "--root= needs an absolute path.");
			a->root = optarg;
			break;
		case ARG_BUS_ADDRESS:
			a->bus_address = optarg;
			break;
		case ARG_CHECK_CONFIG:
			a->check_config = true;
			break;
		case ARG_LOG_LEVEL:
			l = log_level_from_string(optarg);
			if (l < 0)
				return log_error_errno(-EINVAL, "Unknown log level '%s'.", optarg);
			log_set_max_level(l);
			break;
		case ARG_BACKEND:
			a->backend = optarg;
			break;
		case ARG_TRIGGER:
			a->trigger = optarg;
			break;
		case ARG_RUNNING_KERNEL:
			a->running_kernel = optarg;
			break;
		case ARG_BOOT_ID:
			a->boot_id = optarg;
			break;
		case ARG_LIBVIRT_URI:
			if (!*optarg || string_has_cc(optarg))
				return log_error_errno(-EINVAL, "Invalid --libvirt-uri '%s'.",
				                       optarg);
			a->libvirt_uri = optarg;
			break;
		case '?':
			return -EINVAL;
		default:
			return -EINVAL;
		}
	if (optind < argc)
		return log_error_errno(-EINVAL, "upgraded takes no arguments.");

	/* Test seams never reach a production system: they need a test root. */
	if ((a->backend || a->trigger || a->running_kernel || a->boot_id) &&
	    (!a->root || streq(a->root, "/")))
		return log_error_errno(-EINVAL,
		                       "--backend=, --kexec-trigger=, --running-kernel= "
		                       "and --boot-id= are test options and need --root=.");
	if (a->trigger && !streq(a->trigger, "systemd") && !streq(a->trigger, "record"))
		return log_error_errno(-EINVAL, "Unknown --kexec-trigger '%s'.", a->trigger);
	if (a->boot_id &&
	    (strlen(a->boot_id) != 32 || strspn(a->boot_id, "0123456789abcdef") != 32))
		return log_error_errno(-EINVAL, "--boot-id= needs 32 lowercase hex digits.");
	return 1;
}

/* Connects and completes the handshake (authentication, Hello) before returning: recovery runs
 * before the event loop does and may block for as long as restoring the VMs takes, and
 * dbus-daemon drops a connection that has not said Hello within its auth_timeout (30 s on the
 * system bus). Asking the bus for its id waits for the Hello's reply. */
static int open_bus(const char *address, sd_bus **ret) {
	_cleanup_(sd_bus_unrefp) sd_bus *bus = NULL;
	sd_id128_t id;
	int r;

	if (!address)
		r = sd_bus_open_system(&bus);
	else {
		r = sd_bus_new(&bus);
		if (r < 0)
			return r;
		r = sd_bus_set_address(bus, address);
		if (r < 0)
			return r;
		r = sd_bus_set_bus_client(bus, true);
		if (r < 0)
			return r;
		r = sd_bus_start(bus);
	}
	if (r < 0)
		return r;
	r = sd_bus_get_bus_id(bus, &id);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(bus);
	return 0;
}

/* Says which kexec backend the daemon uses and, when it is not the first choice or not
 * usable at all, why. */
static void log_backend(const Context *c) {
	const KexecBackend *b = context_backend(c);
	const char *why;
	bool fallback;

	if (b->test_only)
		log_warning("Using the TEST-ONLY kexec backend '%s': nothing is really loaded.",
		            b->name);
	if (context_backend_status(c, &why, &fallback) < 0)
		log_warning("kexec backend %s is not usable: %s", b->name, strna(why));
	else if (fallback)
		log_info("kexec backend %s: %s", b->name, strna(why));
}

static int make_dirs(Context *c) {
	static const char *const dirs[] = { "/var/lib/upgraded/updates",
		                            "/var/lib/upgraded/reports", "/run/upgraded" };

	for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
		_cleanup_free_ char *p = NULL;
		int r = path_prefix_root(context_root(c), dirs[i], &p);

		if (r < 0)
			return r;
		r = mkdir_p(p, 0755);
		if (r < 0)
			return log_error_errno(r, "Failed to create '%s': %m", p);
	}
	return 0;
}

static int run(int argc, char *argv[]) {
	_cleanup_(context_freep) Context *c = NULL;
	_cleanup_(vms_freep) VmWiring *vms = NULL;
	_cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
	_cleanup_(sd_event_unrefp) sd_event *event = NULL;
	_cleanup_(measure_freep) Measure *measure = NULL;
	const KexecBackend *backend = NULL;
	Manager mgr = {};
	const char *unique;
	Args a = {};
	sigset_t ss;
	int r;

	log_set_prefix("upgraded");
	r = parse_argv(argc, argv, &a);
	if (r <= 0)
		return r;

	if (a.check_config)
		/* Prints "FILE:LINE: message" per error and a summary. */
		return policy_check_config(a.root, stdout) < 0 ? -EBADMSG : 0;

	if (a.backend) {
		backend = kexec_backend_find(a.backend);
		if (!backend)
			return log_error_errno(-EINVAL, "Unknown backend '%s'.", a.backend);
	}
#ifdef UPGRADED_TEST_CORRUPT_DIGEST
	kexec_loader_set_load_func_for_test(corrupt_then_load, NULL);
	log_warning("TEST BUILD: staged kernels get a WRONG digest; a verified handoff must "
	            "refuse and reset.");
#endif
	r = context_new(a.root, backend, &c);
	if (r < 0)
		return log_error_errno(r, "Failed to set up: %m");
#ifdef UPGRADED_TEST_CRASH_POINTS
	if (!a.root || streq(a.root, "/"))
		return log_error_errno(-EINVAL, "This test build needs --root=.");
	r = crash_points_setup(c);
	if (r < 0)
		return r;
#endif
#ifdef UPGRADED_TEST_PANIC_HOLD
	context_set_handoff_hold(c, hold_before_handoff, NULL);
	log_warning("TEST BUILD: a commit holds before its handoff record until '%s' exists.",
	            PANIC_HOLD_RELEASE);
#endif
	if (context_on_panic_kernel(c))
		log_notice("Started on a crash kernel (%s): an interrupted update is taken over, "
		           "no VM is restored here.",
		           CMDLINE_PANIC_MARK);
	{
		PolicyErrors errs = {};
		Policy *p = NULL;

		/* A broken configuration must not be half-applied: refuse to start. */
		r = policy_load(a.root, &p, &errs);
		if (r < 0) {
			policy_errors_print(&errs, stderr);
			policy_errors_done(&errs);
			return log_error_errno(r, "Failed to load the configuration: %m");
		}
		policy_errors_done(&errs);
		r = context_set_policy(c, p);
		if (r < 0) {
			policy_free(p);
			return log_oom();
		}
	}
	if (context_set_host(c, a.running_kernel, a.boot_id) < 0)
		return log_oom();
	log_backend(c);
	r = make_dirs(c);
	if (r < 0)
		return r;

	r = sd_event_default(&event);
	if (r < 0)
		return log_error_errno(r, "Failed to allocate the event loop: %m");
	/* Before any VM step registers: the probe must run before the first pause. */
	r = measure_new(&(MeasureOptions){ .root = a.root, .event = event }, &measure);
	if (r < 0)
		return log_oom();
	r = measure_attach(measure, c);
	if (r < 0)
		return log_oom();
	/* libvirt's client writes to its socket without MSG_NOSIGNAL: a libvirtd that went away
	 * (killed, restarted) must fail that call with EPIPE, not kill the daemon. */
	(void)signal(SIGPIPE, SIG_IGN);
	/* The VM steps: commit check, checkpoint, rollback, restore. */
	r = vms_attach(c, a.libvirt_uri, &vms);
	if (r < 0)
		return log_error_errno(r, "Failed to set up the VM steps: %m");
	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	(void)sd_event_add_signal(event, NULL, SIGTERM, NULL, NULL);
	(void)sd_event_add_signal(event, NULL, SIGINT, NULL, NULL);

	r = open_bus(a.bus_address, &bus);
	if (r < 0)
		return log_error_errno(r, "Failed to connect to the bus: %m");
	/* Finish the handshake now: recovery below may take longer (VM restores on the
	 * new kernel) than the bus lets a connection stay unauthenticated. */
	r = sd_bus_get_unique_name(bus, &unique);
	if (r < 0)
		return log_error_errno(r, "Failed to connect to the bus: %m");

	mgr = (Manager){ .context = c,
		         .bus = bus,
		         .event = event,
		         .trigger = a.trigger && streq(a.trigger, "record") ? KEXEC_TRIGGER_RECORD
		                                                            : KEXEC_TRIGGER_SYSTEMD,
		         .vms = vms };
	r = manager_bus_attach(&mgr);
	if (r < 0)
		return r;

	/* Recover before taking the name: callers only ever see a resolved state. */
	r = context_load(c);
	if (r < 0)
		return log_error_errno(r, "Failed to read the update records: %m");
	(void)measure_daemon_start(measure, c);
	r = context_recover(c);
	if (r < 0)
		log_error_errno(r, "Recovery incomplete, continuing: %m");

	r = sd_bus_attach_event(bus, event, SD_EVENT_PRIORITY_NORMAL);
	if (r < 0)
		return log_error_errno(r, "Failed to attach the bus: %m");
	r = sd_bus_request_name(bus, UPGRADE_BUS_NAME, 0);
	if (r < 0)
		return log_error_errno(r, "Failed to acquire the name %s: %m", UPGRADE_BUS_NAME);

	(void)sd_notify(false, "READY=1\nSTATUS=Serving " UPGRADE_BUS_NAME);
	log_info("Serving %s (state %s, backend %s).", UPGRADE_BUS_NAME, context_state(c),
	         context_backend(c)->name);
	r = sd_event_loop(event);
	if (r < 0)
		return log_error_errno(r, "Event loop failed: %m");
	return 0;
}

int main(int argc, char *argv[]) {
	return run(argc, argv) < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
