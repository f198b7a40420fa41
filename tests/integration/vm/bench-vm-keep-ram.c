/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * `make bench` (issue 14): three ways of carrying a VM through a host update, side by side in
 * one run, at two VM sizes. Run inside private-libvirtd with UPGRADED_TEST_KEEP_RAM=1 (libvirt's
 * memory_backing_dir is a tmpfs standing in for DAX, upgraded-libvirt-hook installed).
 *
 *   baseline    what an operator does without upgraded: virDomainManagedSave() then
 *               virDomainCreate(), the calls `virsh managedsave` and `virsh start` make, on a
 *               VM with ordinary RAM; downtime = wall clock around the two calls.
 *   checkpoint  upgraded's checkpoint strategy through the daemon's own VM code:
 *               vm_checkpoint_all() then vm_restore_all() (daemon/vm/), a VM with shared
 *               file-backed RAM on the tmpfs; downtime = the record's paused_at -> resumed_at.
 *   keep-ram    the same calls with the keep-ram strategy on the same kind of VM: device state
 *               saved, RAM kept in place, restored through the hook after the guard (generation
 *               mark); downtime as for checkpoint.
 *
 * Every side has a memguest VM (docs/memguest.md) of each size that fills its RAM itself.
 * Rounds run interleaved (per size: baseline, checkpoint, keep-ram; then the next size; then
 * the next round), and after every round the guest verifies every filled page itself: a round
 * whose VM does not verify ok with the same fill sum and a counter that did not go back fails
 * the benchmark. Times never fail it: the targets are printed as computed ratios.
 *
 * Usage: bench-vm-keep-ram MEMGUEST
 * UPGRADED_BENCH_ROUNDS (default 3), UPGRADED_BENCH_SIZES "SMALL,LARGE" in MiB (default 64,2048).
 */

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "keep-ram.h"
#include "vm-harness.h"
#include "vm.h"

#define N_SIZES            2
#define MAX_ROUNDS         9
#define TARGET_FLAT        0.10 /* keep-ram large vs small: within 10% */
#define TARGET_VS_BASELINE 0.35 /* keep-ram vs baseline at the large size: at most 0.35x */
#define LARGE_DATA_MIN_MIB 512

typedef enum Side { SIDE_BASELINE, SIDE_CHECKPOINT, SIDE_KEEP_RAM, _SIDE_MAX } Side;

static const struct {
	const char *name;
	bool shared_ram;
	const char *what;
} sides[_SIDE_MAX] = {
	[SIDE_BASELINE] = { "baseline", false,
	                    "libvirt managed save + start (virsh managedsave / virsh start), "
	                    "ordinary RAM" },
	[SIDE_CHECKPOINT] = { "checkpoint", true,
	                      "upgraded vm_checkpoint_all + vm_restore_all, strategy checkpoint, "
	                      "shared file RAM on the tmpfs" },
	[SIDE_KEEP_RAM] = { "keep-ram", true,
	                    "upgraded vm_checkpoint_all + vm_restore_all, strategy keep-ram "
	                    "(RAM kept on the tmpfs, hook, mark guard)" },
};

typedef struct Figures {
	double downtime, save, restore, wall, bytes;
} Figures;

typedef struct Guest {
	char name[64];
	unsigned mib;
	int64_t data_mib, sum;
	Figures rounds[MAX_ROUNDS];
} Guest;

static virConnectPtr conn;
static int failures;
static Guest guests[N_SIZES][_SIDE_MAX];

static const KeepRamConfig *keep_ram_config(void) {
	static KeepRamConfig c;

	c = (KeepRamConfig){ .root = getenv("UPGRADED_TEST_ROOT"),
		             .backing_dir = getenv("LIBVIRT_TEST_MEMORY_BACKING_DIR"),
		             .update_id = "bench",
		             .digest = KEEP_RAM_DIGEST_MARK };
	return &c;
}

static int64_t image_bytes(const char *name) {
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s.save", VM_SAVE_DIR_DEFAULT, name);
	return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

/* The baseline: libvirt's managed save and start, timed around the two calls. */
static int cycle_baseline(const char *name, Figures *ret) {
	virDomainPtr d = virDomainLookupByName(conn, name);
	double t0 = harness_now(), t1, t2;
	int64_t bytes = -1;
	int r = -1;

	if (!d)
		return -1;
	if (virDomainManagedSave(d, 0) == 0) {
		t1 = harness_now();
		bytes = image_bytes(name);
		r = virDomainCreate(d);
		t2 = harness_now();
		*ret = (Figures){ .downtime = t2 - t0,
			          .save = t1 - t0,
			          .restore = t2 - t1,
			          .wall = t2 - t0,
			          .bytes = (double)bytes };
	}
	if (r < 0)
		fprintf(stderr, "%s: %s\n", name, virGetLastErrorMessage());
	virDomainFree(d);
	return r;
}

/* checkpoint and keep-ram: the daemon's own save and restore, figures from its record. */
static int cycle_upgraded(const char *name, VmStrategy s, Figures *ret) {
	const VmPlanEntry e[] = { { name, s } };
	VmPlan plan = { .entries = e, .n_entries = 1, .keep_ram = keep_ram_config() };
	VmResults *r = NULL;
	const VmResult *v;
	double t0 = harness_now();
	int k;

	k = vm_checkpoint_all(conn, &plan, NULL, NULL, &r);
	v = r ? &r->items[0] : NULL;
	if (k == 0)
		k = vm_restore_all(conn, &plan, r, NULL, NULL);
	if (k == 0 && v->outcome == VM_OUTCOME_RESUMED && v->strategy == s)
		*ret = (Figures){ .downtime = (double)vm_result_downtime(v) / 1e6,
			          .save = (double)v->save_time / 1e6,
			          .restore = (double)v->restore_time / 1e6,
			          .wall = harness_now() - t0,
			          .bytes = (double)v->saved_bytes };
	else {
		fprintf(stderr, "%s %s: %s\n", name, vm_strategy_to_string(s),
		        v && v->error ? v->error : strerror(-k));
		k = k < 0 ? k : -EIO;
	}
	vm_results_free(r);
	return k;
}

/* One round of one VM: take it down and up, then the guest proves its memory intact. */
static int bench_round(Guest *g, Side side, int round) {
	int64_t ticks = harness_read_word(conn, g->name, MG_TICKS), after;
	Figures *f = &g->rounds[round];
	char phase[96];
	int r;

	r = side == SIDE_BASELINE ? cycle_baseline(g->name, f)
	                          : cycle_upgraded(g->name,
	                                           side == SIDE_KEEP_RAM ? VM_STRATEGY_KEEP_RAM
	                                                                 : VM_STRATEGY_CHECKPOINT,
	                                           f);
	if (r < 0) {
		failures++;
		return r;
	}
	printf("  round %d %-10s %4u MiB: downtime %6.2f s (save %.2f s, restore %.2f s, wall "
	       "%.2f s), %.0f bytes written\n",
	       round + 1, sides[side].name, g->mib, f->downtime, f->save, f->restore, f->wall,
	       f->bytes);
	snprintf(phase, sizeof(phase), "round %d %s", round + 1, sides[side].name);
	after = harness_read_word(conn, g->name, MG_TICKS);
	CHECK(after >= ticks, "%s: counter %" PRId64 " before, %" PRId64 " after", g->name, ticks,
	      after);
	CHECK(harness_read_word(conn, g->name, MG_SUM) == g->sum, "%s: another fill", g->name);
	CHECK(harness_mg_verify(conn, g->name, phase), "%s: memory not intact", g->name);
	return failures ? -EIO : 0;
}

/* Defines every VM, lets them fill concurrently, records each fill. */
static int start_guests(const char *image, const unsigned mib[N_SIZES]) {
	for (int z = 0; z < N_SIZES; z++)
		for (int s = 0; s < _SIDE_MAX; s++) {
			Guest *g = &guests[z][s];

			g->mib = mib[z];
			snprintf(g->name, sizeof(g->name), "bench-%s-%u", sides[s].name, mib[z]);
			if (harness_define_and_start(conn, image, g->name, g->mib,
			                             sides[s].shared_ram) < 0) {
				fprintf(stderr, "cannot start %s: %s\n", g->name,
				        virGetLastErrorMessage());
				return -1;
			}
		}
	for (int z = 0; z < N_SIZES; z++)
		for (int s = 0; s < _SIDE_MAX; s++) {
			Guest *g = &guests[z][s];

			if (harness_mg_wait(conn, g->name, MG_STATE, MG_STATE_READY, false,
			                    MG_FILL_TIMEOUT) != MG_STATE_READY) {
				fprintf(stderr, "%s: fill not done\n", g->name);
				return -1;
			}
			g->data_mib = harness_read_word(conn, g->name, MG_MIB);
			g->sum = harness_read_word(conn, g->name, MG_SUM);
			printf("# %s: %" PRId64 " MiB of data (sum %#" PRIx64 ")\n", g->name,
			       g->data_mib, g->sum);
		}
	return 0;
}

static Figures median_of(const Guest *g, int rounds) {
	double v[5][MAX_ROUNDS];

	for (int i = 0; i < rounds; i++) {
		v[0][i] = g->rounds[i].downtime;
		v[1][i] = g->rounds[i].save;
		v[2][i] = g->rounds[i].restore;
		v[3][i] = g->rounds[i].wall;
		v[4][i] = g->rounds[i].bytes;
	}
	return (Figures){ .downtime = harness_median(v[0], rounds),
		          .save = harness_median(v[1], rounds),
		          .restore = harness_median(v[2], rounds),
		          .wall = harness_median(v[3], rounds),
		          .bytes = harness_median(v[4], rounds) };
}

static void print_loadavg(const char *when) {
	double l[3];

	if (getloadavg(l, 3) == 3)
		printf("# load average %s: %.2f %.2f %.2f\n", when, l[0], l[1], l[2]);
}

/* Medians per side and size, slopes per GiB of data, and the issue's targets as ratios. */
static void print_summary(int rounds) {
	Figures m[N_SIZES][_SIDE_MAX];
	double ratio_flat, ratio_base;

	printf("medians of %d round(s); downtime = pause -> running again (baseline: wall clock "
	       "around managed save + start)\n",
	       rounds);
	printf("  %-10s %8s %8s %12s %9s %9s %9s %14s %14s\n", "side", "VM MiB", "data MiB",
	       "downtime s", "save s", "restore s", "wall s", "bytes written", "slope s/GiB");
	for (int s = 0; s < _SIDE_MAX; s++) {
		double gib, slope;

		for (int z = 0; z < N_SIZES; z++)
			m[z][s] = median_of(&guests[z][s], rounds);
		gib = (double)(guests[1][s].data_mib - guests[0][s].data_mib) / 1024.0;
		slope = gib > 0 ? (m[1][s].downtime - m[0][s].downtime) / gib : NAN;
		for (int z = 0; z < N_SIZES; z++) {
			printf("  %-10s %8u %8" PRId64 " %12.2f %9.2f %9.2f %9.2f %14.0f",
			       sides[s].name, guests[z][s].mib, guests[z][s].data_mib,
			       m[z][s].downtime, m[z][s].save, m[z][s].restore, m[z][s].wall,
			       m[z][s].bytes);
			if (z == N_SIZES - 1)
				printf(" %14.2f", slope);
			putchar('\n');
		}
	}
	ratio_flat = m[1][SIDE_KEEP_RAM].downtime / m[0][SIDE_KEEP_RAM].downtime;
	ratio_base = m[1][SIDE_KEEP_RAM].downtime / m[1][SIDE_BASELINE].downtime;
	printf("target: keep-ram worst-VM downtime at %u MiB vs %u MiB within %.0f%%: %.2f s / "
	       "%.2f s = %.3f -> %s\n",
	       guests[1][0].mib, guests[0][0].mib, TARGET_FLAT * 100, m[1][SIDE_KEEP_RAM].downtime,
	       m[0][SIDE_KEEP_RAM].downtime, ratio_flat,
	       fabs(ratio_flat - 1) <= TARGET_FLAT ? "met" : "NOT met");
	printf("target: keep-ram vs baseline at %u MiB at most %.2fx: %.2f s / %.2f s = %.3fx -> "
	       "%s\n",
	       guests[1][0].mib, TARGET_VS_BASELINE, m[1][SIDE_KEEP_RAM].downtime,
	       m[1][SIDE_BASELINE].downtime, ratio_base,
	       ratio_base <= TARGET_VS_BASELINE ? "met" : "NOT met");
	printf("  (keep-ram vs checkpoint at %u MiB: %.3fx)\n", guests[1][0].mib,
	       m[1][SIDE_KEEP_RAM].downtime / m[1][SIDE_CHECKPOINT].downtime);
}

static int parse_sizes(unsigned ret_mib[N_SIZES]) {
	const char *e = getenv("UPGRADED_BENCH_SIZES");
	unsigned a = 64, b = 2048;

	if (e && (sscanf(e, "%u,%u", &a, &b) != 2 || a < 16 || b <= a))
		return -1;
	ret_mib[0] = a;
	ret_mib[1] = b;
	return 0;
}

int main(int argc, char *argv[]) {
	const char *uri = getenv("LIBVIRT_TEST_URI"), *e = getenv("UPGRADED_BENCH_ROUNDS");
	int rounds = e ? atoi(e) : 3;
	unsigned mib[N_SIZES];

	if (argc != 2 || !uri || !getenv("LIBVIRT_TEST_MEMORY_BACKING_DIR") ||
	    !getenv("UPGRADED_TEST_ROOT") || parse_sizes(mib) < 0) {
		fprintf(stderr,
		        "usage: private-libvirtd (UPGRADED_TEST_KEEP_RAM=1) %s MEMGUEST\n"
		        "  UPGRADED_BENCH_ROUNDS=1..%d, UPGRADED_BENCH_SIZES=SMALL,LARGE (MiB)\n",
		        argv[0], MAX_ROUNDS);
		return 2;
	}
	rounds = rounds < 1 ? 1 : rounds > MAX_ROUNDS ? MAX_ROUNDS : rounds;
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int s = 0; s < _SIDE_MAX; s++)
		printf("# %-10s = %s\n", sides[s].name, sides[s].what);
	print_loadavg("at the start");
	conn = virConnectOpen(uri);
	if (!conn || start_guests(argv[1], mib) < 0)
		return 1;
	if (guests[1][0].data_mib < LARGE_DATA_MIN_MIB)
		printf("# the large VM holds less than %d MiB of data: not the issue's size\n",
		       LARGE_DATA_MIN_MIB);
	for (int i = 0; i < rounds && failures == 0; i++)
		for (int z = 0; z < N_SIZES && failures == 0; z++)
			for (int s = 0; s < _SIDE_MAX; s++)
				if (bench_round(&guests[z][s], (Side)s, i) < 0)
					break;
	print_loadavg("at the end");
	if (failures == 0)
		print_summary(rounds);
	virConnectClose(conn);
	printf("%s\n", failures ? "FAILED: a round lost memory or did not complete" : "done");
	return failures ? 1 : 0;
}
