/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * upgraded-defer-generator: a systemd generator (systemd.generator(7)). On the boot
 * after an update's handoff, and only then, the units of [Restore] DeferUntilRestored=
 * wait until upgraded restored the VMs (defer-generator.c). It never fails the boot:
 * any error leaves the boot as it would be without it.
 */
#include <stdlib.h>

#include "defer-generator.h"
#include "log.h"

int main(int argc, char *argv[]) {
	int r;

	log_set_prefix("upgraded-defer-generator");
	/* systemd passes the normal, early and late output directories. */
	if (argc != 2 && argc != 4) {
		log_error("Expected the generator output directories as arguments.");
		return EXIT_FAILURE;
	}
	r = defer_generator_run(NULL, NULL, argv[1]);
	if (r < 0) {
		log_error_errno(r, "Cannot hold the deferred units back, ignoring: %m");
		return EXIT_SUCCESS;
	}
	if (r > 0)
		log_info("Boot after an update's handoff: %d unit(s) wait for the VM restore.", r);
	return EXIT_SUCCESS;
}
