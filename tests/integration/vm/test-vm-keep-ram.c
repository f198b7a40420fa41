/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * keep-ram against a real libvirtd and a real QEMU (TCG), run inside private-libvirtd with
 * UPGRADED_TEST_KEEP_RAM=1: libvirt's memory_backing_dir is a tmpfs (standing in for DAX: it
 * does not write a shared file back either) and upgraded-libvirt-hook is installed.
 *
 * The guest is the counter boot sector with KR_MIB of file-backed shared RAM; the test writes
 * KR_FILL_MIB of pseudo-random bytes into its RAM (the shared file, i.e. guest-physical memory
 * at KR_FILL_OFF) and reads the guest's memory back through the restored QEMU (pmemsave).
 *
 *   1. keep-ram save + restore: device state only on disk, the counter continues, the memory
 *      is intact, the kept link and the manifest entry are gone afterwards.
 *   2. the guard: a wrong generation mark -> not resumed, nothing deleted; the file missing ->
 *      the daemon refuses, and libvirt's own start (virsh start) is refused by the hook; with
 *      the file back, restore-vm resumes it intact.
 *   3. rollback before the point of no return: running again on its kept RAM.
 *   4. a VM without shared file RAM: refused without fallback, checkpointed with it.
 *   5. keep-ram vs checkpoint of the same guest, interleaved A B A B: save/restore times,
 *      downtime and bytes written, medians printed (docs/vms.md quotes them).
 *   6. with MEMGUEST (tests/vm-guest): a memguest of KR_MIB fills its RAM itself, goes through
 *      keep-ram, and verifies every filled page itself after the restore.
 *
 * Usage: test-vm-keep-ram BOOT_SECTOR [MEMGUEST]
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <libvirt/libvirt-qemu.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "keep-ram-entry.h"
#include "keep-ram-fs.h"
#include "keep-ram.h"
#include "macros.h"
#include "keep-ram-fs.h"
#include "vm-harness.h"
#include "vm.h"

#define KR_NAME     "upgraded-kr"
#define PLAIN_NAME  "upgraded-kr-plain"
#define KR_MIB      640
#define KR_FILL_OFF (16ULL << 20)
#define KR_FILL_MIB 512ULL
#define MIN_TICKS   40
#define MAX_ROUNDS  9
#define MG_NAME     "upgraded-kr-mg"

static virConnectPtr conn;
static const char *backing, *root;
static int failures;
static int64_t paused_counter = -1;

static int64_t counter(const char *name) {
	return harness_read_word(conn, name, COUNTER_ADDR);
}

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

static void on_progress(const VmResult *r, void *userdata) {
	if (r->outcome == VM_OUTCOME_PAUSED && strcmp(r->name, KR_NAME) == 0)
		paused_counter = counter(r->name);
}

/* The counter resumed from its paused value and keeps ticking: the VM continued. */
static void check_continued(const char *phase) {
	int64_t after = counter(KR_NAME), later;

	CHECK(paused_counter > 0 && after >= paused_counter && after < paused_counter + 60,
	      "%s: counter %" PRId64 " after resume, %" PRId64 " at pause", phase, after,
	      paused_counter);
	later = wait_counter(KR_NAME, after + 5, 20);
	CHECK(later >= after + 5, "%s: counter stuck at %" PRId64, phase, later);
	printf("  %s: counter %" PRId64 " at pause, %" PRId64 " after resume\n", phase,
	       paused_counter, after);
}

/* The fill: a xorshift64 stream, regenerated to check. */
static void pattern(uint64_t *state, uint64_t *buf, size_t n) {
	for (size_t i = 0; i < n; i++) {
		uint64_t x = *state;
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		*state = x;
		buf[i] = x;
	}
}

static char *ram_file(void) {
	virDomainPtr d = virDomainLookupByName(conn, KR_NAME);
	char *path = NULL, *why = NULL;

	if (d && keep_ram_ram_file(d, backing, &path, &why) < 0) {
		fprintf(stderr, "no RAM file: %s\n", why ? why : "?");
		free(why);
	}
	if (d)
		virDomainFree(d);
	return path;
}

/* Writes the pattern into the running guest's RAM: its shared file. */
static int fill_guest(void) {
	char *path = ram_file();
	uint64_t st = 0x9e3779b97f4a7c15ULL, buf[1 << 17];
	int fd = path ? open(path, O_WRONLY | O_CLOEXEC) : -1, r = 0;

	free(path);
	if (fd < 0)
		return -1;
	for (uint64_t off = 0; off < (KR_FILL_MIB << 20) && r == 0; off += sizeof(buf)) {
		pattern(&st, buf, sizeof(buf) / 8);
		if (pwrite(fd, buf, sizeof(buf), (off_t)(KR_FILL_OFF + off)) != sizeof(buf))
			r = -1;
	}
	close(fd);
	return r;
}

/* Reads the guest's memory through its QEMU (pmemsave) and compares it with the fill. */
static bool guest_memory_intact(const char *phase) {
	virDomainPtr d = virDomainLookupByName(conn, KR_NAME);
	char dump[512], cmd[1024], *out = NULL;
	uint64_t st = 0x9e3779b97f4a7c15ULL, want[1 << 17], got[1 << 17];
	double t0 = harness_now();
	bool ok = d != NULL;
	int fd = -1;

	snprintf(dump, sizeof(dump), "%s/dump-%d", backing, (int)getpid());
	snprintf(cmd, sizeof(cmd),
	         "{\"execute\":\"pmemsave\",\"arguments\":{\"val\":%llu,\"size\":%llu,"
	         "\"filename\":\"%s\"}}",
	         KR_FILL_OFF, KR_FILL_MIB << 20, dump);
	ok = ok && virDomainQemuMonitorCommand(d, cmd, &out, 0) == 0 && out &&
	     strstr(out, "\"return\"");
	fd = ok ? open(dump, O_RDONLY | O_CLOEXEC) : -1;
	for (uint64_t off = 0; fd >= 0 && ok && off < (KR_FILL_MIB << 20); off += sizeof(got)) {
		pattern(&st, want, sizeof(want) / 8);
		ok = read(fd, got, sizeof(got)) == sizeof(got) &&
		     memcmp(got, want, sizeof(got)) == 0;
		if (!ok)
			fprintf(stderr, "%s: guest memory differs within MiB %llu..%llu\n", phase,
			        (unsigned long long)((KR_FILL_OFF + off) >> 20),
			        (unsigned long long)((KR_FILL_OFF + off + sizeof(got)) >> 20));
	}
	if (fd >= 0)
		close(fd);
	unlink(dump);
	free(out);
	if (d)
		virDomainFree(d);
	printf("  %s: %llu MiB of guest memory %s (%.1f s)\n", phase, KR_FILL_MIB,
	       ok ? "intact" : "DIFFERENT", harness_now() - t0);
	return ok;
}

static const KeepRamConfig *config(KeepRamDigestMode digest, bool fallback) {
	static KeepRamConfig c;

	c = (KeepRamConfig){ .root = root,
		             .backing_dir = backing,
		             .update_id = "it",
		             .digest = digest,
		             .fallback_checkpoint = fallback };
	return &c;
}

typedef struct Cycle {
	double save, restore, downtime, digest, verify;
	int64_t bytes;
	unsigned attempts;
} Cycle;

/* Pause + save with strategy s, then restore + resume; the figures in *ret. */
static int cycle(VmStrategy s, KeepRamDigestMode digest, Cycle *ret, VmResults **ret_results) {
	const VmPlanEntry e[] = { { KR_NAME, s } };
	VmPlan plan = { .entries = e, .n_entries = 1, .keep_ram = config(digest, false) };
	VmResults *r = NULL;
	const VmResult *v;
	int k;

	CHECK(wait_counter(KR_NAME, counter(KR_NAME) + MIN_TICKS / 2, 30) > 0, "not ticking");
	k = vm_checkpoint_all(conn, &plan, on_progress, NULL, &r);
	v = r ? &r->items[0] : NULL;
	CHECK(k == 0 && v && v->outcome == VM_OUTCOME_SAVED, "%s save: %s",
	      vm_strategy_to_string(s), v && v->error ? v->error : strerror(-k));
	if (k < 0) {
		vm_results_free(r);
		return k;
	}
	if (ret_results) {
		*ret_results = r;
		return 0;
	}
	k = vm_restore_all(conn, &plan, r, NULL, NULL);
	CHECK(k == 0 && v->outcome == VM_OUTCOME_RESUMED, "%s restore: %s",
	      vm_strategy_to_string(s), v->error ? v->error : strerror(-k));
	*ret = (Cycle){ .save = (double)v->save_time / 1e6,
		        .restore = (double)v->restore_time / 1e6,
		        .downtime = (double)vm_result_downtime(v) / 1e6,
		        .bytes = v->saved_bytes };
	if (v->kept_ram) {
		ret->digest = (double)v->kept_ram->digest_usec / 1e6;
		ret->verify = (double)v->kept_ram->verify_usec / 1e6;
		ret->attempts = v->kept_ram->start_attempts;
	}
	vm_results_free(r);
	return k;
}

static void phase_keep_ram(void) {
	Cycle c = {};
	char *ram = NULL;
	struct stat st;

	printf("keep-ram: save the device state, restore on the kept RAM\n");
	if (cycle(VM_STRATEGY_KEEP_RAM, KEEP_RAM_DIGEST_FULL, &c, NULL) < 0)
		return;
	printf("  save %.2f s (%" PRId64 " bytes written), digest %.2f s, guard %.2f s, restore "
	       "%.2f s (%u attempt(s)), downtime %.2f s\n",
	       c.save, c.bytes, c.digest, c.verify, c.restore, c.attempts, c.downtime);
	CHECK(c.bytes > 0 && c.bytes < (8LL << 20), "keep-ram wrote %" PRId64 " bytes", c.bytes);
	check_continued("keep-ram");
	CHECK(guest_memory_intact("keep-ram"), "memory lost");
	/* Running again: the link and the entry are gone, the RAM is QEMU's own file again. */
	ram = ram_file();
	CHECK(ram && stat(ram, &st) == 0 && st.st_nlink == 1, "RAM file still linked");
	free(ram);
}

/* Saves with keep-ram and returns the results, the VM shut off with its image. */
static VmResults *saved_keep_ram(void) {
	VmResults *r = NULL;

	(void)cycle(VM_STRATEGY_KEEP_RAM, KEEP_RAM_DIGEST_MARK, NULL, &r);
	CHECK(harness_state(conn, KR_NAME) == VIR_DOMAIN_SHUTOFF &&
	              harness_has_image(conn, KR_NAME) == 1,
	      "not saved");
	return r;
}

/* The kept file after the save: root's alone, the mark in the trusted namespace, immutable,
 * and nobody else can open it for writing (an unprivileged child tries). */
static void check_sealed(const KeptRam *k) {
	_cleanup_close_ int fd = open(k->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	char mark[300];
	struct stat st;
	ssize_t n;
	pid_t pid;
	int status = -1;

	CHECK(fd >= 0 && fstat(fd, &st) == 0, "kept file: %s", strerror(errno));
	if (fd < 0)
		return;
	CHECK(st.st_uid == 0 && st.st_gid == 0 && (st.st_mode & 07777) == 0400,
	      "kept file is %u:%u %04o, not root's alone", (unsigned)st.st_uid, (unsigned)st.st_gid,
	      (unsigned)(st.st_mode & 07777));
	n = fgetxattr(fd, KEEP_RAM_XATTR, mark, sizeof(mark) - 1);
	CHECK(n > 0 && (mark[n] = 0, strcmp(mark, k->generation) == 0), "no trusted mark");
	CHECK(keep_ram_set_immutable(fd, true) == 0, "immutable flag");
	pid = fork();
	if (pid == 0) {
		if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
			_exit(2);
		_exit(open(k->path, O_RDWR) >= 0 ? 1 : 0);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	              WEXITSTATUS(status) == 0,
	      "another user opened the kept file for writing");
	printf("  sealed: root's alone, trusted mark, immutable, no other writer\n");
}

/* The kept file's immutable flag, by path (the test's own tampering). */
static int set_immutable(const char *path, bool on) {
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	return fd < 0 ? -errno : keep_ram_set_immutable(fd, on);
}

static void phase_guard(void) {
	const VmPlanEntry e[] = { { KR_NAME, VM_STRATEGY_KEEP_RAM } };
	VmPlan plan = { .entries = e, .n_entries = 1 };
	VmResults *r = saved_keep_ram();
	VmResult *v = r ? &r->items[0] : NULL;
	char moved[1100];
	virDomainPtr d;
	int k;

	printf("the guard: wrong mark, missing file, then restore-vm\n");
	if (!v || !v->kept_ram)
		return;
	/* The kept file is sealed (root's, immutable): what follows is root tampering with it on
	 * purpose, the flag cleared first. */
	CHECK(v->kept_ram->seal == KEPT_RAM_SEAL_IMMUTABLE, "kept file not sealed immutable (%s)",
	      kept_ram_seal_to_string(v->kept_ram->seal));
	check_sealed(v->kept_ram);
	CHECK(set_immutable(v->kept_ram->path, false) == 0, "clear the immutable flag");
	/* 1. a wrong generation mark: not resumed, nothing deleted */
	CHECK(setxattr(v->kept_ram->path, KEEP_RAM_XATTR, "x", 1, 0) == 0, "setxattr");
	k = vm_restore_all(conn, &plan, r, NULL, NULL);
	CHECK(k < 0 && v->outcome == VM_OUTCOME_FAILED && v->error &&
	              strstr(v->error, "cannot be trusted"),
	      "wrong mark: %s", v->error ? v->error : "restored");
	printf("  wrong mark: %s\n", v->error ? v->error : "?");
	CHECK(harness_state(conn, KR_NAME) == VIR_DOMAIN_SHUTOFF &&
	              harness_has_image(conn, KR_NAME) == 1 && access(v->kept_ram->path, F_OK) == 0,
	      "state deleted after a refused restore");
	CHECK(setxattr(v->kept_ram->path, KEEP_RAM_XATTR, v->kept_ram->generation,
	               strlen(v->kept_ram->generation), 0) == 0,
	      "setxattr");

	/* 2. the file missing: the daemon refuses, and so does the hook for a plain start */
	snprintf(moved, sizeof(moved), "%s.away", v->kept_ram->path);
	CHECK(rename(v->kept_ram->path, moved) == 0, "rename");
	k = vm_restore_one(conn, KR_NAME, v); /* what restore-vm does after the first refusal */
	CHECK(k < 0 && v->error && strstr(v->error, "missing"), "missing file: %s",
	      v->error ? v->error : "restored");
	d = virDomainLookupByName(conn, KR_NAME);
	k = d ? virDomainCreate(d) : -1;
	CHECK(k < 0 && strstr(virGetLastErrorMessage(), "refusing"),
	      "libvirt started it on missing RAM: %s", virGetLastErrorMessage());
	printf("  missing file, libvirt's own start: %s\n", virGetLastErrorMessage());
	if (d)
		virDomainFree(d);
	CHECK(harness_state(conn, KR_NAME) == VIR_DOMAIN_SHUTOFF &&
	              harness_has_image(conn, KR_NAME) == 1,
	      "image lost after a refused start");

	/* 3. the file back: restore-vm resumes it on its RAM */
	CHECK(rename(moved, v->kept_ram->path) == 0, "rename back");
	CHECK(set_immutable(v->kept_ram->path, true) == 0, "set the immutable flag again");
	k = vm_restore_one(conn, KR_NAME, v);
	CHECK(k == 0 && v->outcome == VM_OUTCOME_RESUMED, "restore-vm: %s",
	      v->error ? v->error : strerror(-k));
	check_continued("restore-vm");
	CHECK(guest_memory_intact("restore-vm"), "memory lost");
	vm_results_free(r);
}

static void phase_rollback(void) {
	VmResults *r = saved_keep_ram();
	VmResult *v = r ? &r->items[0] : NULL;
	int k;

	printf("rollback before the point of no return\n");
	if (!v || !v->kept_ram)
		return;
	k = vm_rollback(conn, r, "a later step failed", NULL, NULL);
	CHECK(k == 0 && v->outcome == VM_OUTCOME_ROLLED_BACK, "rollback: %s",
	      v->error ? v->error : strerror(-k));
	CHECK(harness_state(conn, KR_NAME) == VIR_DOMAIN_RUNNING &&
	              harness_has_image(conn, KR_NAME) == 0,
	      "not running without image after the rollback");
	CHECK(access(v->kept_ram->path, F_OK) < 0, "kept link left after the rollback");
	check_continued("rollback");
	CHECK(guest_memory_intact("rollback"), "memory lost");
	vm_results_free(r);
}

static void phase_fallback(const char *sector) {
	const VmPlanEntry e[] = { { PLAIN_NAME, VM_STRATEGY_KEEP_RAM } };
	VmPlan plan = { .entries = e,
		        .n_entries = 1,
		        .keep_ram = config(KEEP_RAM_DIGEST_MARK, false) };
	VmResults *r = NULL;
	int k;

	printf("a VM without shared file RAM\n");
	CHECK(harness_define_and_start(conn, sector, PLAIN_NAME, 16, false) == 0, "start: %s",
	      virGetLastErrorMessage());
	k = vm_checkpoint_all(conn, &plan, NULL, NULL, &r);
	CHECK(k == -EINVAL && r && r->items[0].error &&
	              strstr(r->items[0].error, "cannot keep its RAM"),
	      "no fallback: %d %s", k, r && r->items[0].error ? r->items[0].error : "");
	CHECK(harness_state(conn, PLAIN_NAME) == VIR_DOMAIN_RUNNING, "touched");
	vm_results_free(r);
	r = NULL;

	plan.keep_ram = config(KEEP_RAM_DIGEST_MARK, true);
	k = vm_checkpoint_all(conn, &plan, NULL, NULL, &r);
	CHECK(k == 0 && r->items[0].strategy == VM_STRATEGY_CHECKPOINT && r->items[0].kept_ram &&
	              r->items[0].kept_ram->fallback_reason,
	      "fallback: %s", r && r->items[0].error ? r->items[0].error : strerror(-k));
	if (k == 0) {
		printf("  fell back: %s\n", r->items[0].kept_ram->fallback_reason);
		k = vm_restore_all(conn, &plan, r, NULL, NULL);
		CHECK(k == 0 && r->items[0].outcome == VM_OUTCOME_RESUMED, "restore");
	}
	vm_results_free(r);
}

/* memguest with shared file RAM: filled by the guest, kept by keep-ram, verified inside. */
static void phase_memguest(const char *image) {
	const VmPlanEntry e[] = { { MG_NAME, VM_STRATEGY_KEEP_RAM } };
	VmPlan plan = { .entries = e,
		        .n_entries = 1,
		        .keep_ram = config(KEEP_RAM_DIGEST_MARK, false) };
	VmResults *r = NULL;
	virDomainPtr d;
	int64_t sum;
	int k;

	printf("memguest: %u MiB, filled and verified by the guest itself\n", KR_MIB);
	CHECK(harness_define_and_start(conn, image, MG_NAME, KR_MIB, true) == 0, "start: %s",
	      virGetLastErrorMessage());
	CHECK(harness_mg_wait(conn, MG_NAME, MG_STATE, MG_STATE_READY, false, MG_FILL_TIMEOUT) ==
	              MG_STATE_READY,
	      "memguest not ready");
	CHECK(harness_read_word(conn, MG_NAME, MG_MIB) >= 512,
	      "memguest filled only %" PRId64 " MiB", harness_read_word(conn, MG_NAME, MG_MIB));
	sum = harness_read_word(conn, MG_NAME, MG_SUM);
	if (failures)
		return;
	k = vm_checkpoint_all(conn, &plan, NULL, NULL, &r);
	CHECK(k == 0 && r->items[0].saved_bytes < (8LL << 20), "save: %s",
	      r && r->items[0].error ? r->items[0].error : strerror(-k));
	if (k == 0) {
		k = vm_restore_all(conn, &plan, r, NULL, NULL);
		CHECK(k == 0 && r->items[0].outcome == VM_OUTCOME_RESUMED, "restore: %s",
		      r->items[0].error ? r->items[0].error : strerror(-k));
		printf("  keep-ram: %" PRId64 " bytes written, save %.2f s, restore %.2f s\n",
		       r->items[0].saved_bytes, (double)r->items[0].save_time / 1e6,
		       (double)r->items[0].restore_time / 1e6);
	}
	vm_results_free(r);
	CHECK(harness_read_word(conn, MG_NAME, MG_SUM) == sum, "another fill after the restore");
	CHECK(harness_mg_verify(conn, MG_NAME, "after keep-ram"),
	      "the guest found its memory changed");
	d = virDomainLookupByName(conn, MG_NAME);
	if (d) {
		(void)virDomainDestroy(d); /* its CPU and RAM back */
		virDomainFree(d);
	}
}

/* keep-ram (A) and checkpoint (B) of the same guest, interleaved. */
static void phase_compare(int rounds) {
	double sv[2][MAX_ROUNDS], rs[2][MAX_ROUNDS], dt[2][MAX_ROUNDS], by[2][MAX_ROUNDS];
	static const VmStrategy s[2] = { VM_STRATEGY_KEEP_RAM, VM_STRATEGY_CHECKPOINT };
	unsigned races_lost = 0;

	printf("keep-ram (A) vs checkpoint (B), %d rounds A B\n", rounds);
	for (int i = 0; i < rounds; i++)
		for (int j = 0; j < 2; j++) {
			Cycle c = {};

			if (cycle(s[j], KEEP_RAM_DIGEST_MARK, &c, NULL) < 0)
				return;
			check_continued(j ? "B" : "A");
			printf("  %c%d: save %.2f s, restore %.2f s (%u attempt(s)), downtime %.2f "
			       "s, "
			       "%" PRId64 " bytes written\n",
			       'A' + j, i + 1, c.save, c.restore, c.attempts, c.downtime, c.bytes);
			if (j == 0)
				races_lost += c.attempts - 1;
			sv[j][i] = c.save;
			rs[j][i] = c.restore;
			dt[j][i] = c.downtime;
			by[j][i] = (double)c.bytes;
		}
	printf("  x-ignore-shared race lost %u time(s) in %d keep-ram restores\n", races_lost,
	       rounds);
	for (int j = 0; j < 2; j++)
		printf("  median %-10s save %.2f s, restore %.2f s, downtime %.2f s, %.0f bytes "
		       "written\n",
		       vm_strategy_to_string(s[j]), harness_median(sv[j], rounds),
		       harness_median(rs[j], rounds), harness_median(dt[j], rounds),
		       harness_median(by[j], rounds));
	CHECK(guest_memory_intact("after A B"), "memory lost");
}

int main(int argc, char *argv[]) {
	const char *uri = getenv("LIBVIRT_TEST_URI");
	int rounds =
	        getenv("UPGRADED_TEST_AB_ROUNDS") ? atoi(getenv("UPGRADED_TEST_AB_ROUNDS")) : 2;

	backing = getenv("LIBVIRT_TEST_MEMORY_BACKING_DIR");
	root = getenv("UPGRADED_TEST_ROOT");
	if (argc < 2 || !uri || !backing || !root) {
		fprintf(stderr,
		        "usage: private-libvirtd (UPGRADED_TEST_KEEP_RAM=1) %s BOOT_SECTOR "
		        "[MEMGUEST]\n",
		        argv[0]);
		return 2;
	}
	rounds = rounds < 1 ? 1 : rounds > MAX_ROUNDS ? MAX_ROUNDS : rounds;
	setvbuf(stdout, NULL, _IOLBF, 0); /* progress in order with libvirt's stderr */
	conn = virConnectOpen(uri);
	if (!conn)
		return 1;
	if (harness_define_and_start(conn, argv[1], KR_NAME, KR_MIB, true) < 0) {
		fprintf(stderr, "cannot start %s: %s\n", KR_NAME, virGetLastErrorMessage());
		return 1;
	}
	CHECK(wait_counter(KR_NAME, MIN_TICKS, 60) >= MIN_TICKS, "guest not ticking");
	CHECK(fill_guest() == 0, "cannot fill the guest's RAM");
	CHECK(guest_memory_intact("filled"), "fill not visible to the guest");
	if (failures == 0) {
		phase_keep_ram();
		phase_guard();
		phase_rollback();
		phase_fallback(argv[1]);
		phase_compare(rounds);
	}
	if (failures == 0 && argc > 2)
		phase_memguest(argv[2]);
	virConnectClose(conn);
	printf("%s\n", failures ? "FAILED" : "PASSED");
	return failures ? 1 : 0;
}
