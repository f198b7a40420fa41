/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * upgraded: the live kernel update service. Parses the command line, recovers
 * what a previous run or the previous kernel left, then serves
 * org.upgraded.Upgrade1 on the system bus.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>
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
#include "metrics.h"
#include "path-util.h"
#include "policy.h"
#include "string-util.h"
#include "job.h"
#include "vm.h"
#include "time-util.h"
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

/* The node_exporter textfile (daemon/metrics/), from Describe() and the last report:
 * at start and whenever the state settled. Best effort: an update never waits for its
 * metrics, and a host without node_exporter (no directory) gets none. */
static void write_metrics(Context *c, void *userdata) {
	_cleanup_free_ char *dir = NULL, *describe = NULL, *report = NULL;
	const Policy *p = context_policy(c);
	int r;

	if (path_prefix_root(context_root(c), p ? p->metrics_dir : METRICS_DEFAULT_DIR, &dir) < 0 ||
	    context_describe(c, &describe) < 0)
		return;
	if (context_last_report(c))
		(void)context_get_report(c, context_last_report(c), &report, NULL);
	r = metrics_refresh(dir, describe, report, PACKAGE_VERSION);
	if (r == -ENOENT)
		log_debug("No directory '%s' (node_exporter not installed): no metrics written.",
		          dir);
	else if (r < 0)
		log_warning_errno(r, "Failed to write the metrics to '%s', ignoring: %m", dir);
}

typedef struct Args {
	const char *root;
	const char *bus_address;
	const char *backend;
	const char *trigger;
	const char *running_kernel;
	const char *boot_id;
	const char *libvirt_uri;
	uint64_t libvirt_timeout_usec;
	uint64_t libvirt_wait_usec;
	bool check_config;
	bool show;
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
	       "     --show                 With --check-config: print the settings in effect\n"
	       "                            and where each came from\n"
	       "     --libvirt-uri=URI      Manage the VMs of this libvirt connection\n"
	       "                            (default: qemu:///system)\n"
	       "     --libvirt-timeout=SEC  Deadline of every libvirt call: opening a connection,\n"
	       "                            and libvirtd's silence before the keepalive closes it\n"
	       "                            (default: 15)\n"
	       "     --libvirt-wait=SEC     How long the VM restore (and a rollback) waits for\n"
	       "                            libvirt to answer at all (default: 300)\n"
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

static int parse_libvirt_seconds(const char *option, const char *value, uint64_t *ret_usec) {
	unsigned long long sec;

	if (safe_atou64(value, &sec) < 0 || sec < 1 || sec > 3600)
		return log_error_errno(-EINVAL, "--%s= takes 1..3600 seconds, not '%s'.", option,
		                       value);
	*ret_usec = sec * 1000000ULL;
	return 0;
}

/* What the options say together; 1 to go on. */
static int check_args(const Args *a) {
	struct stat st;

	/* A root that is not there would pass --check-config with nothing checked. */
	if (a->root && (stat(a->root, &st) < 0 || !S_ISDIR(st.st_mode)))
		return log_error_errno(-EINVAL, "--root=%s is not a directory.", a->root);
	/* Test seams never reach a production system: they need a test root. */
	if ((a->backend || a->trigger || a->running_kernel || a->boot_id) &&
	    path_is_real_root(a->root))
		return log_error_errno(-EINVAL,
		                       "--backend=, --kexec-trigger=, --running-kernel= "
		                       "and --boot-id= are test options and need --root=.");
	if (a->show && !a->check_config)
		return log_error_errno(-EINVAL, "--show goes with --check-config.");
	if (a->trigger && !streq(a->trigger, "systemd") && !streq(a->trigger, "record"))
		return log_error_errno(-EINVAL, "Unknown --kexec-trigger '%s'.", a->trigger);
	if (a->boot_id &&
	    (strlen(a->boot_id) != 32 || strspn(a->boot_id, "0123456789abcdef") != 32))
		return log_error_errno(-EINVAL, "--boot-id= needs 32 lowercase hex digits.");
	return 1;
}

static int parse_argv(int argc, char *argv[], Args *a) {
	enum {
		ARG_VERSION = 0x100,
		ARG_ROOT,
		ARG_BUS_ADDRESS,
		ARG_CHECK_CONFIG,
		ARG_SHOW,
		ARG_LOG_LEVEL,
		ARG_BACKEND,
		ARG_TRIGGER,
		ARG_RUNNING_KERNEL,
		ARG_BOOT_ID,
		ARG_LIBVIRT_URI,
		ARG_LIBVIRT_TIMEOUT,
		ARG_LIBVIRT_WAIT,
	};
	static const struct option options[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, ARG_VERSION },
		{ "root", required_argument, NULL, ARG_ROOT },
		{ "bus-address", required_argument, NULL, ARG_BUS_ADDRESS },
		{ "check-config", no_argument, NULL, ARG_CHECK_CONFIG },
		{ "show", no_argument, NULL, ARG_SHOW },
		{ "log-level", required_argument, NULL, ARG_LOG_LEVEL },
		{ "backend", required_argument, NULL, ARG_BACKEND },
		{ "kexec-trigger", required_argument, NULL, ARG_TRIGGER },
		{ "running-kernel", required_argument, NULL, ARG_RUNNING_KERNEL },
		{ "boot-id", required_argument, NULL, ARG_BOOT_ID },
		{ "libvirt-uri", required_argument, NULL, ARG_LIBVIRT_URI },
		{ "libvirt-timeout", required_argument, NULL, ARG_LIBVIRT_TIMEOUT },
		{ "libvirt-wait", required_argument, NULL, ARG_LIBVIRT_WAIT },
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
		case ARG_SHOW:
			a->show = true;
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
		case ARG_LIBVIRT_TIMEOUT:
			l = parse_libvirt_seconds("libvirt-timeout", optarg,
			                          &a->libvirt_timeout_usec);
			if (l < 0)
				return l;
			break;
		case ARG_LIBVIRT_WAIT:
			l = parse_libvirt_seconds("libvirt-wait", optarg, &a->libvirt_wait_usec);
			if (l < 0)
				return l;
			break;
		default:
			return -EINVAL;
		}
	if (optind < argc)
		return log_error_errno(-EINVAL, "upgraded takes no arguments.");
	return check_args(a);
}

/* With --show: the settings the command line makes, and where each came from. */
static void show_options(const Args *a) {
	char timeout[32];

	snprintf(timeout, sizeof(timeout), "%llu",
	         (unsigned long long)((a->libvirt_timeout_usec ?: VM_CALL_TIMEOUT_DEFAULT) /
	                              1000000ULL));
	printf("\n# The command line's settings (options, not configuration files):\n");
	printf("# --root=%-31s # %s\n", a->root ?: "/", a->root ? "--root" : "default");
	printf("# --libvirt-uri=%-24s # %s\n", a->libvirt_uri ?: VMS_LIBVIRT_URI_DEFAULT,
	       a->libvirt_uri ? "--libvirt-uri" : "default");
	printf("# --libvirt-timeout=%-20s # %s\n", timeout,
	       a->libvirt_timeout_usec ? "--libvirt-timeout" : "default");
	printf("# --bus-address=%-24s # %s\n", a->bus_address ?: "(the system bus)",
	       a->bus_address ? "--bus-address" : "default");
}

/* --check-config: "FILE:LINE: message" per error and a summary on stdout, warnings on
 * stderr; with --show the settings in effect. 0 when the configuration loads. */
static int check_config(const Args *a) {
	int r = policy_check_config(a->root, a->show, stdout, stderr);

	if (r >= 0 && a->show)
		show_options(a);
	return r < 0 ? -EBADMSG : 0;
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

/* How long systemd waits after a stop request (or a start) for each extension. */
#define EXTEND_TIMEOUT_USEC (30ULL * 1000000ULL)
#define EXTEND_EVERY_USEC   (10ULL * 1000000ULL)
/* SIGTERM: what a job still running gets to give back (cancel, rollback) before we go. */
#define STOP_GRACE_USEC     (3ULL * 1000000ULL)
#define STOP_POLL_USEC      (100ULL * 1000ULL)
/* The polls' accuracy: sd-event's default (250 ms) would let each poll fire that much late. */
#define STOP_POLL_ACCURACY  (1000ULL)
/* The most the exit waits for the libvirt connection's close (never past the stop's deadline):
 * a mute libvirtd answers it only when the keepalive gives up. Nothing depends on it. */
#define STOP_CLOSE_USEC     (500ULL * 1000ULL)

/* The recovery of whatever the last run or the last kernel left (on the new kernel: the VM
 * restores), off the loop: the bus name is taken before it starts. */
static int recover_job_run(Job *j, void *userdata) {
	Manager *mgr = userdata;
	int r;

	r = context_recover(mgr->context);
	if (r < 0)
		log_error_errno(r, "Recovery incomplete, continuing: %m");
	return 0;
}

static void recover_job_done(Job *j, int r, void *userdata) {
	Manager *mgr = userdata;

	log_info("Recovery done (state %s).", context_state(mgr->context));
	manager_notify_status(mgr);
	write_metrics(mgr->context, NULL); /* at start, once the state is resolved */
}

/* While jobs run (restores on the new kernel, a commit's saves), systemd's start or stop
 * timeout is extended: large VMs take longer than the default 90 s. */
static int on_extend_timer(sd_event_source *s, uint64_t usec, void *userdata) {
	if (job_count() > 0)
		(void)sd_notifyf(false, "EXTEND_TIMEOUT_USEC=%llu",
		                 (unsigned long long)EXTEND_TIMEOUT_USEC);
	(void)sd_event_source_set_time_relative(s, EXTEND_EVERY_USEC);
	(void)sd_event_source_set_enabled(s, SD_EVENT_ON);
	return 0;
}

/* The moment the stop announced (CLOCK_MONOTONIC): the grace is measured against the clock,
 * not counted in polls, which the loop may run late. */
static uint64_t stop_deadline;

static int on_stop_poll(sd_event_source *s, uint64_t usec, void *userdata) {
	if (job_count() == 0 || usec >= stop_deadline)
		return sd_event_exit(sd_event_source_get_event(s), 0);
	(void)sd_event_source_set_time(s, MIN(usec + STOP_POLL_USEC, stop_deadline));
	return sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
}

/* What is left of the stop's budget for the libvirt connection's close, at most
 * STOP_CLOSE_USEC. */
static uint64_t stop_close_budget(void) {
	uint64_t now = now_monotonic_usec();

	if (stop_deadline == 0)
		return STOP_CLOSE_USEC;
	return now >= stop_deadline ? 0 : MIN(stop_deadline - now, STOP_CLOSE_USEC);
}

/* SIGTERM/SIGINT: a commit before the point of no return is cancelled (its VMs given back),
 * then the daemon leaves once no job runs, or after STOP_GRACE_USEC whatever runs. */
static int on_stop_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
	Manager *mgr = userdata;
	sd_event *e = sd_event_source_get_event(s);
	static bool stopping;
	uint64_t now = 0;

	if (stopping)
		return 0;
	stopping = true;
	(void)sd_notify(false, "STOPPING=1");
	(void)sd_event_now(e, CLOCK_MONOTONIC, &now);
	stop_deadline = now + STOP_GRACE_USEC;
	if (job_count() == 0)
		return sd_event_exit(e, 0);
	log_info("Stopping: %u job(s) running, waiting at most %.0f s for them.", job_count(),
	         (double)STOP_GRACE_USEC / 1e6);
	if (mgr->commit_job && context_active(mgr->context) &&
	    streq(context_active(mgr->context)->phase, PHASE_PRE_HANDOFF))
		job_cancel(mgr->commit_job);
	/* A Stage only reads files: it stops at once, leaving nothing. */
	job_cancel(mgr->stage_job);
	return sd_event_add_time(e, NULL, CLOCK_MONOTONIC, now + STOP_POLL_USEC, STOP_POLL_ACCURACY,
	                         on_stop_poll, mgr);
}

/* The state machine for a: the backend, the test builds' seams, the configuration (refused
 * whole when broken), the host's facts and the state directories. */
static int setup_context(const Args *a, Context **ret) {
	_cleanup_(context_freep) Context *c = NULL;
	const KexecBackend *backend = NULL;
	int r;

	if (a->backend) {
		backend = kexec_backend_find(a->backend);
		if (!backend)
			return log_error_errno(-EINVAL, "Unknown backend '%s'.", a->backend);
	}
#ifdef UPGRADED_TEST_CORRUPT_DIGEST
	kexec_loader_set_load_func_for_test(corrupt_then_load, NULL);
	log_warning("TEST BUILD: staged kernels get a WRONG digest; a verified handoff must "
	            "refuse and reset.");
#endif
	r = context_new(a->root, backend, &c);
	if (r < 0)
		return log_error_errno(r, "Failed to set up: %m");
#ifdef UPGRADED_TEST_CRASH_POINTS
	if (path_is_real_root(a->root))
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
		r = policy_load(a->root, &p, &errs);
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
	if (context_set_host(c, a->running_kernel, a->boot_id) < 0)
		return log_oom();
	log_backend(c);
	r = make_dirs(c);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(c);
	return 0;
}

/* The VM side: libvirt's calls with deadlines and its event loop, and the VM steps
 * registered on c. */
static int setup_vms(const Args *a, Context *c, VmWiring **ret) {
	int r;

	/* libvirt's client writes to its socket without MSG_NOSIGNAL: a libvirtd that went away
	 * (killed, restarted) must fail that call with EPIPE, not kill the daemon. */
	(void)signal(SIGPIPE, SIG_IGN);
	/* Every libvirt call with a deadline: bounded opens, keepalive on libvirt's own event
	 * loop (a thread of its own). */
	vm_set_call_timeout(a->libvirt_timeout_usec);
	vm_set_libvirt_wait(a->libvirt_wait_usec);
	r = vm_event_loop_start();
	if (r < 0)
		log_warning_errno(r, "Cannot start libvirt's event loop, no keepalive: %m");
	/* The VMs' step: commit check, checkpoint, rollback, restore. */
	r = vms_attach(c, a->libvirt_uri, ret);
	if (r < 0)
		return log_error_errno(r, "Failed to set up the VM steps: %m");
	return 0;
}

/* Takes the bus name (before the recovery runs, so that it can be watched) and tells systemd
 * the daemon is ready. */
static int serve_bus(Manager *mgr) {
	sd_bus *bus = mgr->bus;
	Context *c = mgr->context;
	int r;

	r = sd_bus_attach_event(bus, mgr->event, SD_EVENT_PRIORITY_NORMAL);
	if (r < 0)
		return log_error_errno(r, "Failed to attach the bus: %m");
	r = sd_bus_request_name(bus, UPGRADE_BUS_NAME, 0);
	if (r < 0)
		return log_error_errno(r, "Failed to acquire the name %s: %m", UPGRADE_BUS_NAME);
	(void)sd_notify(false, "READY=1");
	manager_notify_status(mgr);
	log_info("Serving %s (state %s, backend %s).", UPGRADE_BUS_NAME, context_state(c),
	         context_backend(c)->name);
	return 0;
}

/* The event loop, with SIGTERM and SIGINT blocked for its signalfd, and the measurement on
 * it, attached to c. */
static int setup_loop(const Args *a, Context *c, sd_event **ret_event, Measure **ret_measure) {
	_cleanup_(sd_event_unrefp) sd_event *event = NULL;
	_cleanup_(measure_freep) Measure *measure = NULL;
	sigset_t ss;
	int r;

	/* Blocked before any thread starts (libvirt's event loop, jobs, the VM workers): the loop
	 * takes them through a signalfd; a thread with them unblocked would die of them. */
	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	r = sd_event_default(&event);
	if (r < 0)
		return log_error_errno(r, "Failed to allocate the event loop: %m");
	/* Its step runs where ContextStepId puts it: before the VMs' first pause. */
	r = measure_new(
	        &(MeasureOptions){ .root = a->root, .bus_address = a->bus_address, .event = event },
	        &measure);
	if (r < 0)
		return log_oom();
	r = measure_attach(measure, c);
	if (r < 0)
		return log_oom();
	*ret_event = TAKE_PTR(event);
	*ret_measure = TAKE_PTR(measure);
	return 0;
}

static int run(int argc, char *argv[]) {
	_cleanup_(context_freep) Context *c = NULL;
	_cleanup_(vms_freep) VmWiring *vms = NULL;
	_cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
	_cleanup_(sd_event_unrefp) sd_event *event = NULL;
	_cleanup_(measure_freep) Measure *measure = NULL;
	Manager mgr = {};
	sd_event_source *extend = NULL;
	const char *unique;
	Args a = {};
	int r;

	log_set_prefix("upgraded");
	r = parse_argv(argc, argv, &a);
	if (r <= 0)
		return r;

	if (a.check_config)
		return check_config(&a);

	r = setup_context(&a, &c);
	if (r < 0)
		return r;

	r = setup_loop(&a, c, &event, &measure);
	if (r < 0)
		return r;
	r = setup_vms(&a, c, &vms);
	if (r < 0)
		return r;
	vms_set_measure(vms, measure);
	r = job_attach_event(event);
	if (r < 0)
		return log_error_errno(r, "Failed to set up the job queue: %m");
	r = open_bus(a.bus_address, &bus);
	if (r < 0)
		return log_error_errno(r, "Failed to connect to the bus: %m");
	r = sd_bus_get_unique_name(bus, &unique);
	if (r < 0)
		return log_error_errno(r, "Failed to connect to the bus: %m");

	mgr = (Manager){ .context = c,
		         .bus = bus,
		         .event = event,
		         .trigger = a.trigger && streq(a.trigger, "record") ? KEXEC_TRIGGER_RECORD
		                                                            : KEXEC_TRIGGER_SYSTEMD,
		         .vms = vms };
	(void)sd_event_add_signal(event, NULL, SIGTERM, on_stop_signal, &mgr);
	(void)sd_event_add_signal(event, NULL, SIGINT, on_stop_signal, &mgr);
	r = manager_bus_attach(&mgr);
	if (r < 0)
		return r;
	r = context_load(c);
	if (r < 0)
		return log_error_errno(r, "Failed to read the update records: %m");
	context_set_settled(c, write_metrics, NULL);
	(void)measure_daemon_start(measure, c);

	/* The bus name first: the recovery (on the new kernel: the VM restores) runs as a job
	 * that `upgradectl watch` follows. */
	r = serve_bus(&mgr);
	if (r < 0)
		return r;

	r = job_start("recover", 0, recover_job_run, recover_job_done, &mgr, NULL);
	if (r < 0)
		return log_error_errno(r, "Failed to start the recovery: %m");
	r = sd_event_add_time_relative(event, &extend, CLOCK_MONOTONIC, 0, 0, on_extend_timer,
	                               &mgr);
	if (r < 0)
		log_warning_errno(r, "Cannot keep extending systemd's timeout, ignoring: %m");
	r = job_loop_run(event);
	if (job_count() > 0) {
		/* A worker still waits on libvirt: its state is on disk, the next start resolves
		 * it. Freeing what it uses under it would crash: leave without. */
		log_warning("Stopping with %u job(s) still running; the next start resolves them.",
		            job_count());
		(void)sd_bus_flush(bus);
		_exit(EXIT_FAILURE);
	}
	if (vms_close(vms, stop_close_budget()) == -ETIMEDOUT) {
		/* Its thread still waits on libvirtd: tearing libvirt down under it would crash. */
		log_warning("libvirt did not answer the close of its connection; leaving without.");
		(void)sd_bus_flush(bus);
		_exit(r < 0 ? EXIT_FAILURE : EXIT_SUCCESS);
	}
	sd_event_source_disable_unref(extend);
	free(mgr.commit_id); /* the last commit's id, kept for BadState messages */
	free(mgr.abort_id);
	free(mgr.stage_id);
	if (r < 0)
		return log_error_errno(r, "Event loop failed: %m");
	return 0;
}

int main(int argc, char *argv[]) {
	/* One malloc arena for every thread. Each update runs short-lived worker threads (jobs,
	 * a pause and a save per VM, the libvirt connection); with glibc's default of an arena
	 * per concurrent thread, the memory they free stays spread over up to 8 arenas per core
	 * and the daemon's RSS crept about 20 KiB an update with no leak behind it (the soak,
	 * docs/reliability.md). Its threads mostly wait on libvirt: one arena costs nothing. */
	(void)mallopt(M_ARENA_MAX, 1);
	/* Fixed thresholds, not glibc's sliding ones. By default the first free of a block
	 * mmap()ed for being large (>= 128 KiB: a read buffer, a JSON document) raises the mmap
	 * threshold to that size and the trim threshold to twice it, for good: from then on such
	 * blocks come from the heap and up to 2 x their size stays free in it, never returned.
	 * 1,000 Stage/Cancel cycles showed exactly that: the heap in use flat, the free part
	 * stepping up by 1.2 MiB once, and VmRSS with it (docs/reliability.md, "Soak"). */
	(void)mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	(void)mallopt(M_TRIM_THRESHOLD, 128 * 1024);
	return run(argc, argv) < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
