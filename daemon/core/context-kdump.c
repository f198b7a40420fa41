/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * kdump's initrd for the staged kernel, built on the old kernel at stage instead of on the new
 * kernel's first boot (docs/loader.md, "kdump's initrd for the staged kernel").
 *
 * kdump-tools (Debian 12) keeps /var/lib/kdump/initrd.img-<kernel>, built by its kernel hook
 * (/etc/kernel/postinst.d/kdump-tools). Its `kdump-config load` deletes and rebuilds that
 * initrd whenever /var/lib/kdump/latest_sysctls-<kernel> differs from /etc/kdump/sysctl.conf,
 * then copies the one onto the other; on every kernel's first boot that file is missing. So
 * kdump-tools.service, ordered before basic.target, builds an initrd on the first boot of each
 * kernel: on the path to the restored VMs (60 to 175 s in the lab).
 *
 * When kdump-tools' image held the crash slot at stage, the daemon has
 * upgraded-kdump-initrd@<kernel>.service do both steps ahead, in kdump's environment (the unit
 * writes /var/lib/kdump and runs mkinitramfs, which our sandbox forbids), from a job with a
 * deadline. The new kernel's `kdump-config load` then finds them current and only loads. The
 * record's kdump_initrd says what happened; a failure costs nothing but the time it saves.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "context-private.h"
#include "fileio.h"
#include "job.h"
#include "log.h"
#include "macros.h"
#include "path-util.h"
#include "process-util.h"
#include "string-util.h"
#include "time-util.h"

#define KDUMP_DIR                 "/var/lib/kdump"
#define KDUMP_SYSCTL_FILE         "/etc/kdump/sysctl.conf"
#define KDUMP_SYSCTL_MAX          (1u << 20)
#define KDUMP_VERSION_MAX         64
/* mkinitramfs: tens of seconds on hardware, minutes under emulation. */
#define KDUMP_INITRD_TIMEOUT_USEC (20ULL * 60 * 1000000)

/* A kernel version as a unit instance and a file name: [A-Za-z0-9._+-], starting with an
 * alphanumeric. Anything else (a version read from a hostile image) is not passed on. */
bool context_kdump_version_valid(const char *v) {
	size_t n;

	if (!v ||
	    !((*v >= '0' && *v <= '9') || (*v >= 'a' && *v <= 'z') || (*v >= 'A' && *v <= 'Z')))
		return false;
	n = strspn(v, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ._+-");
	return n == strlen(v) && n <= KDUMP_VERSION_MAX;
}

static int read_under_root(Context *c, const char *path, char **ret, size_t *ret_size) {
	_cleanup_free_ char *p = NULL;
	int r;

	r = path_prefix_root(c->root, path, &p);
	if (r < 0)
		return r;
	return read_file_full(p, KDUMP_SYSCTL_MAX, ret, ret_size);
}

/* 1: kdump-config would only load for kernel v (its initrd exists and latest_sysctls-<v> is
 * /etc/kdump/sysctl.conf byte for byte); 0: it would build the initrd first; <0: error. */
int context_kdump_initrd_current(Context *c, const char *v) {
	_cleanup_free_ char *initrd = NULL, *latest = NULL, *want = NULL, *have = NULL, *p = NULL;
	size_t nw = 0, nh = 0;
	struct stat st;
	int r;

	if (asprintf(&initrd, KDUMP_DIR "/initrd.img-%s", v) < 0 ||
	    asprintf(&latest, KDUMP_DIR "/latest_sysctls-%s", v) < 0)
		return -ENOMEM;
	r = path_prefix_root(c->root, initrd, &p);
	if (r < 0)
		return r;
	if (stat(p, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISREG(st.st_mode) || st.st_size == 0)
		return 0;
	r = read_under_root(c, KDUMP_SYSCTL_FILE, &want, &nw);
	if (r < 0)
		return r; /* no sysctl.conf: not the kdump-tools this knows */
	r = read_under_root(c, latest, &have, &nh);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	return nw == nh && memcmp(want, have, nw) == 0;
}

static void set_result(Context *c, Update *u, char *msg) {
	if (!msg) {
		log_oom();
		return;
	}
	log_info("Update %s: kdump's initrd for %s: %s.", u->id, u->kernel_version, msg);
	free(u->kdump_initrd);
	u->kdump_initrd = msg;
	(void)context_persist(c, u);
}

/* Runs the unit (lock released around the wait) and says what came of it. */
static char *kdump_initrd_build(Context *c, const char *v, const char *unit) {
	char *argv[] = { (char *)SYSTEMCTL_PATH, (char *)"start", (char *)unit, NULL };
	char *msg = NULL;
	uint64_t t0 = now_monotonic_usec();
	int r, status = 0, cur;

	job_blocking_begin();
	r = spawn_wait(argv, KDUMP_INITRD_TIMEOUT_USEC, &status);
	if (job_blocking_end() < 0)
		return NULL;
	if (r == -ETIMEDOUT)
		r = asprintf(&msg,
		             "'systemctl start %s' did not finish within %llu s: killed; "
		             "kdump-tools builds it on the kernel's first boot",
		             unit, (unsigned long long)(KDUMP_INITRD_TIMEOUT_USEC / 1000000));
	else if (r < 0)
		r = asprintf(&msg, "'systemctl start %s' could not be started: %s", unit,
		             strerror(-r));
	else if (status != 0)
		r = asprintf(&msg,
		             "'systemctl start %s' failed (status %d, its journal says why); "
		             "kdump-tools builds it on the kernel's first boot",
		             unit, status);
	else if ((cur = context_kdump_initrd_current(c, v)) <= 0)
		r = asprintf(&msg,
		             "%s succeeded but kdump-config would still rebuild it (%s); "
		             "kdump-tools builds it on the kernel's first boot",
		             unit,
		             cur < 0 ? strerror(-cur) : "initrd or latest_sysctls not current");
	else
		r = asprintf(&msg, "built ahead by %s in %.1f s", unit,
		             (now_monotonic_usec() - t0) / 1e6);
	return r < 0 ? NULL : msg;
}

typedef struct KdumpJob {
	Context *context;
	char *id;
	char *version;
} KdumpJob;

static void kdump_job_free(KdumpJob *kj) {
	if (!kj)
		return;
	free(kj->id);
	free(kj->version);
	free(kj);
}

static int kdump_job_run(Job *j, void *userdata) {
	KdumpJob *kj = userdata;
	_cleanup_free_ char *unit = NULL;
	char *msg;
	Update *u;

	(void)j;
	if (asprintf(&unit, "upgraded-kdump-initrd@%s.service", kj->version) < 0)
		return -ENOMEM;
	msg = kdump_initrd_build(kj->context, kj->version, unit);
	if (!msg)
		return -ENOMEM; /* or abandoned: the state is not ours any more */
	/* The update may be gone meanwhile (retention): then there is no record to write. */
	u = context_find(kj->context, kj->id);
	if (u)
		set_result(kj->context, u, msg);
	else
		free(msg);
	return 0;
}

static void kdump_job_done(Job *j, int r, void *userdata) {
	KdumpJob *kj = userdata;

	(void)j;
	if (r == -ETIMEDOUT)
		log_warning("Update %s: building kdump's initrd for %s did not finish in time.",
		            kj->id, kj->version);
	kdump_job_free(kj);
}

/* After stage: when kdump-tools held the crash slot, its initrd for the staged kernel is
 * made current now, off the VMs' path. Best effort; never fails the stage. */
void context_prepare_kdump(Context *c, Update *u) {
	const Policy *p = context_policy(c);
	KdumpJob *kj;
	int r;

	if (!streq_ptr(u->crash_image_before, "kdump-tools"))
		return;
	if (p && p->kdump_initrd_at_boot) {
		set_result(c, u,
		           strdup("left to kdump-tools on the kernel's first boot "
		                  "([Handoff] KdumpInitrd=boot)"));
		return;
	}
	if (!context_kdump_version_valid(u->kernel_version)) {
		set_result(c, u,
		           strdup("not built ahead: the staged kernel's version is unknown or "
		                  "not a plain version string"));
		return;
	}
	r = context_kdump_initrd_current(c, u->kernel_version);
	if (r > 0) {
		set_result(c, u, strdup("current already: kdump-config will only load it"));
		return;
	}
	if (r < 0) {
		char *msg = NULL;

		if (asprintf(&msg, "not built ahead: cannot read kdump-tools' files: %s",
		             strerror(-r)) < 0)
			msg = NULL;
		set_result(c, u, msg);
		return;
	}
	if (!c->root && !job_on_loop()) {
		/* Already on a job's worker: build here. */
		_cleanup_free_ char *unit = NULL;
		char *msg;

		if (asprintf(&unit, "upgraded-kdump-initrd@%s.service", u->kernel_version) < 0) {
			log_oom();
			return;
		}
		msg = kdump_initrd_build(c, u->kernel_version, unit);
		if (msg) /* NULL: out of memory, or the job was abandoned: u is not ours now */
			set_result(c, u, msg);
		return;
	}
	if (c->root) {
		/* A test root: nothing is run; the record says what would have been. */
		char *msg = NULL;

		if (asprintf(&msg,
		             "would run 'systemctl start upgraded-kdump-initrd@%s.service' "
		             "(test root, nothing run)",
		             u->kernel_version) < 0)
			msg = NULL;
		set_result(c, u, msg);
		return;
	}
	kj = calloc(1, sizeof(*kj));
	if (!kj || !(kj->id = strdup(u->id)) || !(kj->version = strdup(u->kernel_version))) {
		kdump_job_free(kj);
		log_oom();
		return;
	}
	kj->context = c;
	r = job_start("kdump-initrd", KDUMP_INITRD_TIMEOUT_USEC + 5ULL * 1000000, kdump_job_run,
	              kdump_job_done, kj, NULL);
	if (r < 0) {
		log_warning_errno(r, "Cannot build kdump's initrd for %s ahead: %m",
		                  u->kernel_version);
		kdump_job_free(kj);
	}
}
