/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes the handoff-record reader: the daemon on the new kernel reads
 * /var/lib/upgraded/updates/<id>.json with update_from_record() and the VMs in it with
 * vm_results_from_json(). Any input must be read or refused (-EBADMSG), never crash or leak;
 * and what was read must survive being written and read again unchanged, since that is what
 * every step of the update does with the record. A finished update's report is built from
 * it (report_build()), as the daemon does with the record it read.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "update.h"
#include "vm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Both documents must have the same text; frees them. */
static void check_same_and_put(json_object *a, json_object *b) {
	char *ta = strdup(json_object_to_json_string_ext(a, JSON_C_TO_STRING_PLAIN));
	char *tb = strdup(json_object_to_json_string_ext(b, JSON_C_TO_STRING_PLAIN));

	if (!ta || !tb || strcmp(ta, tb) != 0)
		abort();
	free(ta);
	free(tb);
	json_object_put(a);
	json_object_put(b);
}

/* Writes u, reads it back, writes that again: both texts must be equal. */
static void check_update_round_trip(const Update *u) {
	json_object *a = NULL, *b = NULL;
	Update *v = NULL;

	if (update_to_json(u, &a) < 0 || update_from_json(a, &v) < 0 || update_to_json(v, &b) < 0)
		abort();
	check_same_and_put(a, b);
	update_free(v);
}

static void check_vms_round_trip(json_object *vms) {
	VmResults *r = NULL, *r2 = NULL;
	json_object *a;
	int k;

	k = vm_results_from_json(vms, &r);
	if (k == -EBADMSG)
		return;
	if (k < 0)
		abort();
	a = vm_results_to_json(r);
	if (!a || vm_results_from_json(a, &r2) < 0)
		abort();
	check_same_and_put(a, vm_results_to_json(r2));
	vm_results_free(r);
	vm_results_free(r2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	Update *u = NULL;
	char *text;
	int r;

	if (size > 1u << 20) /* the daemon reads at most 1 MiB */
		return 0;
	text = malloc(size + 1);
	if (!text)
		abort();
	memcpy(text, data, size);
	text[size] = '\0';
	r = update_from_record(text, &u);
	free(text);
	if (r == -EBADMSG)
		return 0;
	if (r < 0 || !u)
		abort();
	if (!update_id_is_valid(u->id) || update_state_to_string(u->state) == NULL ||
	    u->progress > 100)
		abort();
	check_update_round_trip(u);
	if (u->vms)
		check_vms_round_trip(u->vms);
	if (u->state == UPDATE_DONE || u->state == UPDATE_FAILED) {
		json_object *report = NULL;

		if (report_build(u, false, &report) < 0 || !report)
			abort();
		json_object_put(report);
	}
	update_free(u);
	return 0;
}
