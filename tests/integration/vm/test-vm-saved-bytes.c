/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The size of a managed save image, as the VM library records it (saved_bytes), under the
 * privileges it is given: check-saved-bytes runs this with the capability set of
 * upgraded.service, on a save directory laid out like libvirt's (a parent only its owner and
 * group may search).
 *
 * Checkpoints the domain "test" of libvirt's test:///default driver with its managed save
 * images looked up in SAVE_DIR (SAVE_DIR/test.save prepared by the caller), prints the
 * saved_bytes it recorded and exits 0 when that equals EXPECTED (-1: unknown).
 *
 * Usage: test-vm-saved-bytes SAVE_DIR EXPECTED
 */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "vm.h"

/* The test driver refuses VIR_DOMAIN_START_PAUSED and the library retries without it: not
 * worth a line on stderr. */
static void quiet(void *userdata, virErrorPtr err) {
	(void)userdata;
	(void)err;
}

int main(int argc, char **argv) {
	const VmPlanEntry e[] = { { "test", VM_STRATEGY_CHECKPOINT } };
	VmPlan plan = { .entries = e, .n_entries = 1 };
	VmResults *res = NULL;
	const VmResult *r;
	virConnectPtr conn;
	long long expected;
	char *end;
	int ret = 1;

	if (argc != 3) {
		fprintf(stderr, "usage: %s SAVE_DIR EXPECTED\n", argv[0]);
		return 2;
	}
	plan.save_dir = argv[1];
	expected = strtoll(argv[2], &end, 10);
	if (*argv[2] == '\0' || *end != '\0') {
		fprintf(stderr, "EXPECTED '%s' is not a number\n", argv[2]);
		return 2;
	}

	virSetErrorFunc(NULL, quiet);
	conn = virConnectOpen("test:///default");
	if (!conn) {
		fprintf(stderr, "cannot open test:///default\n");
		return 1;
	}
	if (vm_checkpoint_all(conn, &plan, NULL, NULL, &res) < 0 ||
	    !(r = vm_results_find(res, "test")))
		fprintf(stderr, "checkpoint of 'test' failed\n");
	else {
		printf("saved_bytes %" PRId64 " (expected %lld)\n", r->saved_bytes, expected);
		ret = r->saved_bytes == (int64_t)expected ? 0 : 1;
		if (vm_restore_all(conn, &plan, res, NULL, NULL) < 0) {
			fprintf(stderr, "restore of 'test' failed\n");
			ret = 1;
		}
	}
	vm_results_free(res);
	virConnectClose(conn);
	return ret;
}
