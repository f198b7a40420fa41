/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <systemd/sd-journal.h>

#include "architecture.h"
#include "config.h"
#include "log.h"
#include "macros.h"
#include "report-schema.h"
#include "report.h"
#include "string-util.h"

int (*report_journal_sender)(const struct iovec *iov, int n) = sd_journal_sendv;

static void add_str(json_object *o, const char *k, const char *v) {
	json_object_object_add(o, k, v ? json_object_new_string(v) : NULL);
}

/* A copy of a section the update keeps (the report is mapped onto schema 2 in place,
 * report_finish(): the update's own records must not change); NULL stays NULL. */
static json_object *copy_of(json_object *o) {
	json_object *c = NULL;

	if (o && json_object_deep_copy(o, &c, NULL) < 0)
		return NULL;
	return c;
}

static const char *boot_of(const Update *u, const char *name) {
	const UpdateStamp *s = update_find_stamp(u, name);
	return s && s->boot_id[0] ? s->boot_id : NULL;
}

/* The policy's reasons, one per line joined with ';' (context.c reasons_to_text())
 * -> ["a","b","c"]; blanks around each are dropped. */
static json_object *reasons_array(const char *text) {
	json_object *a = json_object_new_array();
	const char *p = text;

	while (a && p && *p) {
		const char *e = strchr(p, ';');
		size_t n;

		p += strspn(p, " ");
		n = e ? (size_t)(e - p) : strlen(p);
		while (n > 0 && p[n - 1] == ' ')
			n--;
		if (n > 0)
			json_object_array_add(a, json_object_new_string_len(p, (int)n));
		p = e ? e + 1 : NULL;
	}
	return a;
}

static json_object *stamp_time(const Update *u, const char *name) {
	const UpdateStamp *s = update_find_stamp(u, name);

	return s ? json_object_new_uint64(s->realtime_usec) : NULL;
}

/* The panic path (docs/report.md): null when the old kernel did not crash
 * during the update. Times are CLOCK_REALTIME of the boot that took them. */
static json_object *panic_path(const Update *u) {
	const char *old_boot = boot_of(u, "commit-requested");
	const UpdateStamp *last = NULL;
	json_object *p, *l;

	if (!u->panic_boot_id)
		return NULL;
	p = json_object_new_object();
	if (!p)
		return NULL;
	add_str(p, "crash_kernel_boot_id", u->panic_boot_id);
	add_str(p, "crashed_in_phase", u->panic_from_phase);
	/* The old kernel's last word: the crash came after it, at an unknown moment. */
	for (size_t i = 0; old_boot && i < u->n_stamps; i++)
		if (streq(u->stamps[i].boot_id, old_boot))
			last = &u->stamps[i];
	if (last) {
		json_object_object_add(p, "old_kernel_last_stamp", l = json_object_new_object());
		add_str(l, "name", last->name);
		json_object_object_add(l, "realtime_usec",
		                       json_object_new_uint64(last->realtime_usec));
	} else
		json_object_object_add(p, "old_kernel_last_stamp", NULL);
	json_object_object_add(p, "recovery_realtime_usec", stamp_time(u, "panic-recovery"));
	json_object_object_add(p, "handoff_realtime_usec", stamp_time(u, "panic-handoff"));
	add_str(p, "handoff_mode", handoff_mode_to_string(HANDOFF_MODE_VERIFIED));
	json_object_object_add(p, "boot_cpu_parked",
	                       u->panic_parked_cpu ? json_object_new_uint64(u->panic_parked_apicid)
	                                           : NULL);
	return p;
}

/* The report's host, backend and handoff sections. */
static void add_host_backend_handoff(json_object *o, const Update *u, bool backend_test_only) {
	char host[256] = "";
	json_object *h;

	(void)gethostname(host, sizeof(host) - 1);
	json_object_object_add(o, "host", h = json_object_new_object());
	add_str(h, "hostname", host[0] ? host : NULL);
	add_str(h, "architecture", UPGRADED_ARCHITECTURE);
	/* What the firmware and the old kernel allowed at stage (loader/platform.h). */
	json_object_object_add(h, "platform", copy_of(u->platform));
	/* On the panic path the handoff record is the crash kernel's. */
	add_str(h, "old_boot_id", u->panic_boot_id ? boot_of(u, "commit-requested")
	                                           : u->handoff_boot_id ?: boot_of(u, "commit-requested"));
	add_str(h, "new_boot_id", boot_of(u, "booted"));

	json_object_object_add(o, "backend", h = json_object_new_object());
	add_str(h, "name", u->backend);
	json_object_object_add(h, "test_only", json_object_new_boolean(backend_test_only));
	add_str(h, "reason", u->backend_reason);

	json_object_object_add(o, "handoff", h = json_object_new_object());
	add_str(h, "mode", handoff_mode_to_string(u->handoff));
	add_str(h, "reason", u->handoff_reason);
	json_object_object_add(h, "reasons", reasons_array(u->handoff_reason));
	/* The old kernel's way down (handoff-shutdown.h); null when the update never got
	 * that far, or was handed off before the decision existed. */
	json_object_object_add(h, "shutdown", copy_of(u->shutdown));
}

/* The old and the new kernel, and the initrd (null without one). */
static void add_kernels(json_object *o, const Update *u) {
	json_object *k;

	json_object_object_add(o, "old_kernel", k = json_object_new_object());
	add_str(k, "version", u->old_kernel);

	json_object_object_add(o, "new_kernel", k = json_object_new_object());
	add_str(k, "version", u->kernel_version);
	add_str(k, "version_source", u->kernel_version_source);
	add_str(k, "path", u->kernel.path);
	add_str(k, "sha256", u->kernel.sha256);
	json_object_object_add(k, "size", json_object_new_uint64(u->kernel.size));

	if (u->initrd.path) {
		json_object_object_add(o, "initrd", k = json_object_new_object());
		add_str(k, "path", u->initrd.path);
		add_str(k, "sha256", u->initrd.sha256);
		json_object_object_add(k, "size", json_object_new_uint64(u->initrd.size));
	} else
		json_object_object_add(o, "initrd", NULL);
}

/* The daemon's own timestamps. */
static void add_stamps(json_object *o, const Update *u) {
	json_object *a;

	/* The daemon's own timestamps, per boot: monotonic and TSC values compare only
	 * within one boot_id. The cross-kexec axis is "phases" (on "timebase"). */
	json_object_object_add(o, "stamps", a = json_object_new_array());
	for (size_t i = 0; i < u->n_stamps; i++) {
		json_object *s = json_object_new_object();

		add_str(s, "name", u->stamps[i].name);
		json_object_object_add(s, "realtime_usec",
		                       json_object_new_uint64(u->stamps[i].realtime_usec));
		json_object_object_add(s, "monotonic_usec",
		                       json_object_new_uint64(u->stamps[i].monotonic_usec));
		if (u->stamps[i].tsc)
			json_object_object_add(s, "tsc", json_object_new_uint64(u->stamps[i].tsc));
		add_str(s, "boot_id", u->stamps[i].boot_id);
		json_object_array_add(a, s);
	}
}

/* The measured sections as the daemon leaves them without its measurement: "missing",
 * purgatory's figures estimated. */
static void add_unmeasured(json_object *o, const Update *u) {
	json_object *h;

	/* Measured sections: "missing" until the measurement fills them in. */
	add_str(o, "phase_axis", "none");
	json_object_object_add(o, "timebase", NULL);
	json_object_object_add(o, "phases", json_object_new_array());
	json_object_object_add(o, "probe", h = json_object_new_object());
	json_object_object_add(h, "old", NULL);
	json_object_object_add(h, "new", NULL);
	json_object_object_add(o, "boot", NULL);
	json_object_object_add(o, "critical_path", h = json_object_new_object());
	json_object_object_add(h, "new_kernel", NULL);
	json_object_object_add(h, "old_kernel", NULL);

	json_object_object_add(o, "purgatory", h = json_object_new_object());
	add_str(h, "mode", handoff_mode_to_string(u->handoff));
	add_str(h, "impl", streq_ptr(u->backend, "kexec_file") ? "kernel" : NULL);
	/* What purgatory checks: the staged images (plus a few KiB of boot parameters);
	 * nothing in fast mode. */
	json_object_object_add(h, "bytes",
	                       json_object_new_uint64(u->handoff == HANDOFF_MODE_FAST
	                                                      ? 0
	                                                      : u->kernel.size + u->initrd.size));
	json_object_object_add(h, "bytes_estimated", json_object_new_boolean(true));
	json_object_object_add(h, "verify_ns", NULL);
	json_object_object_add(h, "verify_estimated", json_object_new_boolean(true));
	add_str(h, "reason", "not measured");
}

/* The VM downtimes and the totals, none measured yet, and what is missing. */
static void add_unmeasured_totals(json_object *o) {
	json_object *h, *a, *m;

	json_object_object_add(o, "vm_downtime", json_object_new_array());
	json_object_object_add(o, "totals", h = json_object_new_object());
	json_object_object_add(h, "host_blackout_ns", NULL);
	json_object_object_add(h, "max_vm_downtime_ns", NULL);
	json_object_object_add(h, "median_vm_downtime_ns", NULL);
	json_object_object_add(h, "uncertainty_ns", NULL);
	json_object_object_add(h, "timebase", NULL);
	json_object_object_add(h, "estimated", json_object_new_boolean(true));

	json_object_object_add(o, "missing", a = json_object_new_array());
	json_object_array_add(a, m = json_object_new_object());
	add_str(m, "figure", "measurement");
	add_str(m, "reason", "the daemon ran without its measurement");
}

int report_build(const Update *u, bool backend_test_only, json_object **ret) {
	json_object *o, *a;
	const char *result;

	switch (u->state) {
	case UPDATE_DONE:
		result = "success";
		break;
	case UPDATE_FAILED:
		result = "failed";
		break;
	default:
		return -EINVAL;
	}

	o = json_object_new_object();
	if (!o)
		return -ENOMEM;
	json_object_object_add(o, "schema", json_object_new_int(REPORT_SCHEMA_ASSEMBLED));
	add_str(o, "id", u->id);
	add_str(o, "result", result);
	add_str(o, "reason", u->error);
	json_object_object_add(o, "errors", a = json_object_new_array());
	if (u->error)
		json_object_array_add(a, json_object_new_string(u->error));

	add_host_backend_handoff(o, u, backend_test_only);

	add_kernels(o, u);
	add_str(o, "cmdline", u->cmdline);
	add_str(o, "booted_kernel", u->booted_kernel);
	json_object_object_add(o, "panic_path", panic_path(u));

	add_stamps(o, u);

	add_unmeasured(o, u);

	/* ---- VMs and the policy's decisions (daemon/vm/vm-steps*.c) ---- */
	json_object_object_add(o, "vms", u->vms ? copy_of(u->vms) : json_object_new_array());
	json_object_object_add(o, "decisions", copy_of(u->decisions));
	/* ---- end of VMs ---- */
	/* The units held back until the restore ([Restore] DeferUntilRestored=): only on a
	 * boot that held some back. */
	if (u->deferred)
		json_object_object_add(o, "deferred_units", copy_of(u->deferred));
	add_unmeasured_totals(o);

	*ret = o;
	return 0;
}

int report_finish(json_object *report, const char *root) {
	_cleanup_free_ char *machine_id = NULL;
	struct timespec now;
	int r;

	r = report_read_machine_id(root, &machine_id);
	if (r < 0)
		log_debug_errno(r, "Cannot read /etc/machine-id, the report says null: %m");
	clock_gettime(CLOCK_REALTIME, &now);
	return report_upgrade(report, &(ReportIdentity){
	                                      .machine_id = machine_id,
	                                      .version = PACKAGE_VERSION,
	                                      .written_usec = (uint64_t)now.tv_sec * 1000000 +
	                                                      (uint64_t)now.tv_nsec / 1000,
	                              });
}

static json_object *get(json_object *o, const char *a, const char *b) {
	json_object *v = NULL;

	if (!o || !json_object_object_get_ex(o, a, &v))
		return NULL;
	if (b && (!v || !json_object_object_get_ex(v, b, &v)))
		return NULL;
	return v;
}

static int add_field(char ***l, const char *key, const char *value) {
	char *s;

	if (!value)
		return 0;
	if (asprintf(&s, "%s=%s", key, value) < 0)
		return -ENOMEM;
	if (strv_extend(l, s) < 0) {
		free(s);
		return -ENOMEM;
	}
	free(s);
	return 0;
}

/* ns figure -> usec text, or NULL when the figure is null (not measured). */
static const char *usec_text(json_object *v, char buf[static 32]) {
	if (!v || !json_object_is_type(v, json_type_int))
		return NULL;
	snprintf(buf, 32, "%" PRId64, json_object_get_int64(v) / 1000);
	return buf;
}

/* ns figure -> "1.234 s" (or "12.3 ms" below a second) for people; "n/a" when null. */
static const char *seconds_text(json_object *v, char buf[static 32]) {
	int64_t ns;

	if (!v || !json_object_is_type(v, json_type_int))
		return "n/a";
	ns = json_object_get_int64(v);
	if (ns >= 1000000000 || ns <= -1000000000)
		snprintf(buf, 32, "%.3f s", (double)ns / 1e9);
	else
		snprintf(buf, 32, "%.1f ms", (double)ns / 1e6);
	return buf;
}

int report_journal_fields(json_object *report, const char *path, char ***ret_fields) {
	char **l = NULL, b1[32], b2[32], b3[32], b4[32], s1[32], s2[32], s3[32];
	_cleanup_free_ char *msg = NULL;
	const char *id = json_object_get_string(get(report, "id", NULL));
	const char *result = json_object_get_string(get(report, "result", NULL));
	const char *blackout = usec_text(get(report, "totals", "host_blackout_ns"), b1);
	const char *unc = usec_text(get(report, "totals", "uncertainty_ns"), b2);
	const char *maxd = usec_text(get(report, "totals", "max_vm_downtime_ns"), b3);
	const char *medd = usec_text(get(report, "totals", "median_vm_downtime_ns"), b4);
	int r = 0;

	if (!id || !result)
		return -EINVAL;
	if (asprintf(&msg, "Update %s %s: host blackout %s%s%s, max VM downtime %s (estimated).",
	             id, streq(result, "success") ? "completed" : "failed",
	             seconds_text(get(report, "totals", "host_blackout_ns"), s1), unc ? " +- " : "",
	             unc ? seconds_text(get(report, "totals", "uncertainty_ns"), s2) : "",
	             seconds_text(get(report, "totals", "max_vm_downtime_ns"), s3)) < 0)
		return -ENOMEM;
	r |= add_field(&l, "MESSAGE_ID", REPORT_MESSAGE_ID);
	r |= add_field(&l, "MESSAGE", msg);
	r |= add_field(&l, "PRIORITY", streq(result, "success") ? "6" : "3");
	r |= add_field(&l, "UPGRADED_ID", id);
	r |= add_field(&l, "UPGRADED_RESULT", result);
	r |= add_field(&l, "UPGRADED_REPORT", path);
	r |= add_field(&l, "UPGRADED_OLD_KERNEL",
	               json_object_get_string(get(report, "old_kernel", "version")));
	r |= add_field(&l, "UPGRADED_NEW_KERNEL",
	               json_object_get_string(get(report, "new_kernel", "version")));
	r |= add_field(&l, "UPGRADED_MODE", json_object_get_string(get(report, "handoff", "mode")));
	r |= add_field(&l, "UPGRADED_TIMEBASE",
	               json_object_get_string(get(report, "totals", "timebase")));
	r |= add_field(&l, "UPGRADED_UNCERTAINTY_USEC", unc);
	r |= add_field(&l, "UPGRADED_BLACKOUT_USEC", blackout);
	r |= add_field(&l, "UPGRADED_MAX_VM_DOWNTIME_USEC", maxd);
	r |= add_field(&l, "UPGRADED_MEDIAN_VM_DOWNTIME_USEC", medd);
	if (r != 0) {
		strv_free(l);
		return -ENOMEM;
	}
	*ret_fields = l;
	return 0;
}

int report_journal(json_object *report, const char *path) {
	char **l = NULL;
	struct iovec *iov;
	size_t n;
	int r;

	r = report_journal_fields(report, path, &l);
	if (r < 0)
		return r;
	n = strv_length(l);
	iov = calloc(n, sizeof(*iov));
	if (!iov) {
		strv_free(l);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		iov[i] = (struct iovec){ .iov_base = l[i], .iov_len = strlen(l[i]) };
	r = report_journal_sender(iov, (int)n);
	if (r < 0)
		log_debug_errno(r, "Cannot write the report's journal entry, ignoring: %m");
	free(iov);
	strv_free(l);
	return r;
}
