/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * VM state preservation against a real libvirtd and two real QEMU (TCG) guests, run inside
 * private-libvirtd (which sets LIBVIRT_TEST_URI and LIBVIRT_TEST_WORKDIR).
 *
 *   1. checkpoint both VMs (pause all, managed save in parallel), restore and resume them:
 *      each guest's tick counter after the restore equals its value at the pause, then
 *      advances: the VM continued, it did not boot again.
 *   2. the managed save directory (a tmpfs) is shrunk so that the second save fails for lack
 *      of space: the rollback restores the VM already saved, resumes the other, removes every
 *      image; both counters continue from their paused values.
 *   3. a restore fails (the VM's disk is missing): the VM is reported failed, its managed save
 *      image is kept; once the disk is back, vm_restore_one() restores it, counter continued.
 *
 * Usage: test-vm-integration BOOT_SECTOR
 */

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/libvirt-qemu.h>
#include <libvirt/virterror.h>

#include "vm-harness.h"
#include "vm.h"

#define N_VMS     2
/* Ticks (18.2 Hz) a guest runs before it is paused: a guest booted again would need over 2 s
 * after its resume to count that far, we read it well within that. */
#define MIN_TICKS 40

static const char *const names[N_VMS] = { "upgraded-it-a", "upgraded-it-b" };
static virConnectPtr conn;
static int failures;

/* The counter each VM showed while paused, read from the progress callback, and when the VM
 * library says it resumed it (CLOCK_REALTIME usec; 0: not yet). */
static int64_t paused_counter[N_VMS] = { -1, -1 };
static usec_t resumed_at[N_VMS];

static int vm_index(const char *name) {
	for (int i = 0; i < N_VMS; i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return -1;
}

static int64_t counter(const char *name) {
	return harness_read_word(conn, name, COUNTER_ADDR);
}

static size_t save_dir_entries(void) {
	DIR *d = opendir(VM_SAVE_DIR_DEFAULT);
	struct dirent *de;
	size_t n = 0;

	if (!d)
		return (size_t)-1;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static void on_progress(const VmResult *r, void *userdata) {
	int i = vm_index(r->name);
	double t0 = *(double *)userdata;

	printf("  %6.2f s  %-14s %s%s%s\n", harness_now() - t0, r->name,
	       vm_outcome_to_string(r->outcome), r->error ? ": " : "", r->error ?: "");
	/* Called on our thread after every pause and before any save starts: the VM is paused,
	 * its monitor still answers. */
	if (i >= 0 && r->outcome == VM_OUTCOME_PAUSED) {
		paused_counter[i] = counter(r->name);
		resumed_at[i] = 0;
	}
	if (i >= 0 && r->resumed_at &&
	    (r->outcome == VM_OUTCOME_RESUMED || r->outcome == VM_OUTCOME_ROLLED_BACK))
		resumed_at[i] = r->resumed_at;
}

/* How far a guest's counter may have run since it was resumed: its ticks (18.2 Hz) over the
 * time since then, doubled for a slow TCG timer, plus 20 for the reads themselves. Without a
 * resume time, 40 (about 2 s). */
static int64_t ticks_since_resume(int i) {
	struct timespec ts;
	double since;

	if (!resumed_at[i])
		return 40;
	clock_gettime(CLOCK_REALTIME, &ts);
	since = (double)ts.tv_sec + ts.tv_nsec / 1e9 - (double)resumed_at[i] / 1e6;
	return (int64_t)(since > 0 ? since * 18.2 * 2 : 0) + 20;
}

/* Waits until the guest's counter reaches at least min (it is running and ticking). */
static int64_t wait_counter(const char *name, int64_t min, double timeout) {
	double end = harness_now() + timeout;
	int64_t c;

	do {
		c = counter(name);
		if (c >= min)
			return c;
		usleep(100000);
	} while (harness_now() < end);
	return c;
}

/* After a restore or rollback: the counter resumed from the paused value (a fresh boot would
 * start from 0 and be far below it), then keeps ticking. */
static void check_continued(int i, const char *phase) {
	int64_t after = counter(names[i]), slack = ticks_since_resume(i), later;

	CHECK(paused_counter[i] > 0, "%s %s: counter at pause %" PRId64, phase, names[i],
	      paused_counter[i]);
	/* Not from 0 (a fresh boot), and no further than the time since its resume allows (a VM
	 * that never stopped would be far ahead). */
	CHECK(after >= paused_counter[i] && after < paused_counter[i] + slack,
	      "%s %s: counter %" PRId64 " right after resume, %" PRId64
	      " at pause (at most +%" PRId64 ")",
	      phase, names[i], after, paused_counter[i], slack);
	CHECK(harness_read_word(conn, names[i], MAGIC_ADDR) == 0x55504721,
	      "%s %s: guest magic lost", phase, names[i]);
	later = wait_counter(names[i], after + 5, 10);
	CHECK(later >= after + 5, "%s %s: counter stuck at %" PRId64, phase, names[i], later);
	printf("  %s: counter %" PRId64 " at pause, %" PRId64 " after resume, %" PRId64
	       " a moment later\n",
	       names[i], paused_counter[i], after, later);
}

/* Lets both guests run MIN_TICKS more ticks, so that a paused value is far above zero. */
static void wait_ticking(void) {
	for (int i = 0; i < N_VMS; i++) {
		int64_t c = counter(names[i]);
		CHECK(wait_counter(names[i], c + MIN_TICKS, 30) >= c + MIN_TICKS, "%s not ticking",
		      names[i]);
	}
}

static void print_results(const VmResults *r) {
	struct json_object *j = vm_results_to_json(r);

	printf("  report: %s\n", json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
	json_object_put(j);
}

/* Returns the size of the larger managed save image. */
static int64_t phase_checkpoint_restore(void) {
	const VmPlanEntry e[N_VMS] = { { names[0], VM_STRATEGY_CHECKPOINT },
		                       { names[1], VM_STRATEGY_CHECKPOINT } };
	VmPlan plan = { .entries = e, .n_entries = N_VMS, .parallel = 2 };
	VmResults *r = NULL;
	double t0 = harness_now(), t1, t2;
	int64_t image_bytes = 0;
	int k;

	printf("checkpoint both VMs, then restore them\n");
	k = vm_checkpoint_all(conn, &plan, on_progress, &t0, &r);
	t1 = harness_now();
	CHECK(k == 0, "vm_checkpoint_all: %s", strerror(-k));
	for (int i = 0; i < N_VMS && r; i++) {
		const VmResult *v = vm_results_find(r, names[i]);

		CHECK(v->outcome == VM_OUTCOME_SAVED, "%s: %s", names[i], v->error ?: "not saved");
		CHECK(v->saved_bytes > 0, "%s: saved_bytes %" PRId64, names[i], v->saved_bytes);
		CHECK(harness_state(conn, names[i]) == VIR_DOMAIN_SHUTOFF, "%s not shut off",
		      names[i]);
		CHECK(harness_has_image(conn, names[i]) == 1, "%s has no managed save image",
		      names[i]);
		image_bytes = v->saved_bytes > image_bytes ? v->saved_bytes : image_bytes;
		printf("  %s: saved %" PRId64 " bytes in %.2f s\n", names[i], v->saved_bytes,
		       (double)v->save_time / 1e6);
	}
	CHECK(save_dir_entries() == N_VMS, "expected %d images", N_VMS);

	k = vm_restore_all(conn, &plan, r, on_progress, &t0);
	t2 = harness_now();
	CHECK(k == 0, "vm_restore_all: %s", strerror(-k));
	for (int i = 0; i < N_VMS && r; i++) {
		const VmResult *v = vm_results_find(r, names[i]);

		CHECK(v->outcome == VM_OUTCOME_RESUMED, "%s: %s", names[i], v->error ?: "?");
		CHECK(harness_state(conn, names[i]) == VIR_DOMAIN_RUNNING, "%s not running",
		      names[i]);
		CHECK(harness_has_image(conn, names[i]) == 0, "%s: image left after restore",
		      names[i]);
		CHECK(vm_result_downtime(v) > 0, "%s: no downtime recorded", names[i]);
		printf("  %s: restore %.2f s, downtime %.2f s\n", names[i],
		       (double)v->restore_time / 1e6, (double)vm_result_downtime(v) / 1e6);
		check_continued(i, "restore");
	}
	printf("  checkpoint %.2f s, restore %.2f s (both VMs)\n", t1 - t0, t2 - t1);
	if (r)
		print_results(r);
	vm_results_free(r);
	return image_bytes;
}

static void phase_disk_full_rollback(int64_t image_bytes) {
	const VmPlanEntry e[N_VMS] = { { names[0], VM_STRATEGY_CHECKPOINT },
		                       { names[1], VM_STRATEGY_CHECKPOINT } };
	/* One save at a time: the first fits, the second finds the disk full. */
	VmPlan plan = { .entries = e, .n_entries = N_VMS, .parallel = 1 };
	VmResults *r = NULL;
	char opts[64];
	double t0 = harness_now();
	int k, n_saved_then_rolled = 0;

	printf("save target full: rollback\n");
	wait_ticking();
	snprintf(opts, sizeof(opts), "size=%" PRId64 "k", (image_bytes * 3 / 2) / 1024);
	CHECK(save_dir_entries() == 0, "save directory not empty");
	if (mount(NULL, VM_SAVE_DIR_DEFAULT, NULL, MS_REMOUNT, opts) < 0) {
		CHECK(false, "cannot shrink the save directory: %m");
		return;
	}
	paused_counter[0] = paused_counter[1] = -1;
	k = vm_checkpoint_all(conn, &plan, on_progress, &t0, &r);
	CHECK(k < 0, "vm_checkpoint_all succeeded on a full disk");
	for (int i = 0; i < N_VMS && r; i++) {
		const VmResult *v = vm_results_find(r, names[i]);

		CHECK(v->outcome == VM_OUTCOME_ROLLED_BACK, "%s: %s, %s", names[i],
		      vm_outcome_to_string(v->outcome), v->error ?: "");
		CHECK(v->error != NULL, "%s: no reason recorded", names[i]);
		CHECK(harness_state(conn, names[i]) == VIR_DOMAIN_RUNNING, "%s not running",
		      names[i]);
		CHECK(harness_has_image(conn, names[i]) == 0, "%s: image left after rollback",
		      names[i]);
		if (v->save_finished_at && v->error && strstr(v->error, "rolled back: "))
			n_saved_then_rolled++;
		CHECK(vm_result_downtime(v) > 0, "%s: no downtime recorded", names[i]);
		printf("  %s: rolled back, downtime %.2f s\n", names[i],
		       (double)vm_result_downtime(v) / 1e6);
		check_continued(i, "rollback");
	}
	CHECK(save_dir_entries() == 0, "images left in the save directory");
	CHECK(n_saved_then_rolled == 1, "expected one VM saved, then restored by the rollback");
	if (r) {
		const VmResult *b = vm_results_find(r, names[1]);

		CHECK(b->error && strstr(b->error, "managed save failed"), "%s: %s", names[1],
		      b->error ?: "no error");
		print_results(r);
	}
	vm_results_free(r);
	(void)mount(NULL, VM_SAVE_DIR_DEFAULT, NULL, MS_REMOUNT, "size=64m");
}

/* On the new kernel a restore fails (here: the VM's disk went missing): the VM is reported with
 * the reason, its managed save image stays on disk, and the manual retry restores it. */
static void phase_restore_fails_keeps_image(const char *workdir) {
	const VmPlanEntry e[N_VMS] = { { names[0], VM_STRATEGY_CHECKPOINT },
		                       { names[1], VM_STRATEGY_CHECKPOINT } };
	VmPlan plan = { .entries = e, .n_entries = N_VMS, .parallel = 2 };
	VmResults *r = NULL;
	VmResult *a;
	char img[512], moved[520], path[256];
	double t0 = harness_now();
	int k;

	printf("restore fails: image kept, manual retry\n");
	wait_ticking();
	paused_counter[0] = paused_counter[1] = -1;
	k = vm_checkpoint_all(conn, &plan, on_progress, &t0, &r);
	CHECK(k == 0, "vm_checkpoint_all: %s", strerror(-k));
	if (k < 0) {
		vm_results_free(r);
		return;
	}
	snprintf(img, sizeof(img), "%s/%s.img", workdir, names[0]);
	snprintf(moved, sizeof(moved), "%s.away", img);
	CHECK(rename(img, moved) == 0, "rename: %m");

	k = vm_restore_all(conn, &plan, r, on_progress, &t0);
	CHECK(k < 0, "vm_restore_all succeeded without the disk");
	a = (VmResult *)vm_results_find(r, names[0]);
	CHECK(a->outcome == VM_OUTCOME_FAILED, "%s: %s", names[0],
	      vm_outcome_to_string(a->outcome));
	CHECK(a->error && strstr(a->error, "image is kept"), "%s: %s", names[0],
	      a->error ?: "no error");
	CHECK(harness_state(conn, names[0]) == VIR_DOMAIN_SHUTOFF, "%s not shut off", names[0]);
	CHECK(harness_has_image(conn, names[0]) == 1, "%s: managed save image gone", names[0]);
	snprintf(path, sizeof(path), "%s/%s.save", VM_SAVE_DIR_DEFAULT, names[0]);
	CHECK(access(path, F_OK) == 0, "%s missing", path);
	CHECK(vm_results_find(r, names[1])->outcome == VM_OUTCOME_RESUMED, "%s not resumed",
	      names[1]);
	check_continued(1, "restore (other VM)");

	/* The operator fixes the cause and retries: upgradectl restore-vm NAME. */
	CHECK(rename(moved, img) == 0, "rename back: %m");
	k = vm_restore_one(conn, names[0], a);
	CHECK(k == 0, "vm_restore_one: %s (%s)", strerror(-k), a->error ?: "");
	CHECK(a->outcome == VM_OUTCOME_RESUMED && !a->error, "%s: %s", names[0],
	      a->error ?: "not resumed");
	CHECK(harness_has_image(conn, names[0]) == 0, "%s: image left after restore", names[0]);
	check_continued(0, "manual retry");
	printf("  %s: restored by the manual retry, downtime %.2f s\n", names[0],
	       (double)vm_result_downtime(a) / 1e6);
	vm_results_free(r);
}

static void cleanup_domains(void) {
	for (int i = 0; i < N_VMS; i++) {
		virDomainPtr d = virDomainLookupByName(conn, names[i]);

		if (!d)
			continue;
		(void)virDomainDestroy(d);
		(void)virDomainUndefineFlags(d, VIR_DOMAIN_UNDEFINE_MANAGED_SAVE);
		virDomainFree(d);
	}
}

int main(int argc, char **argv) {
	const char *uri = getenv("LIBVIRT_TEST_URI"), *workdir = getenv("LIBVIRT_TEST_WORKDIR");
	int64_t image_bytes = 0;
	double t0 = harness_now();

	if (argc != 2 || !uri || !workdir) {
		fprintf(stderr, "usage: private-libvirtd %s BOOT_SECTOR\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	conn = virConnectOpen(uri);
	if (!conn) {
		fprintf(stderr, "cannot connect to %s\n", uri);
		return 1;
	}

	for (int i = 0; i < N_VMS; i++)
		if (harness_define_and_start(conn, argv[1], names[i], 16, false) < 0) {
			fprintf(stderr, "cannot start %s: %s\n", names[i],
			        virGetLastErrorMessage());
			failures++;
			goto out;
		}
	for (int i = 0; i < N_VMS; i++) {
		int64_t c = wait_counter(names[i], MIN_TICKS, 30);
		CHECK(c >= MIN_TICKS, "%s: counter %" PRId64 ", guest not ticking", names[i], c);
	}
	printf("both guests ticking after %.2f s\n", harness_now() - t0);
	if (failures)
		goto out;

	image_bytes = phase_checkpoint_restore();
	if (failures)
		goto out;
	printf("one image takes %" PRId64 " bytes\n", image_bytes);
	phase_disk_full_rollback(image_bytes);
	if (failures)
		goto out;
	phase_restore_fails_keeps_image(workdir);

out:
	cleanup_domains();
	virConnectClose(conn);
	printf("%s after %.1f s\n", failures ? "FAILED" : "ok", harness_now() - t0);
	return failures ? 1 : 0;
}
