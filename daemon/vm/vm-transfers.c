/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The per-VM transfer table behind Update.VMTransfers (vm-transfers.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "macros.h"
#include "string-util.h"
#include "vm-transfers.h"

typedef struct Transfer {
	char *name;
	bool restore;
	uint64_t done, total;
	usec_t started;      /* CLOCK_MONOTONIC, when first seen */
	usec_t started_wall; /* CLOCK_REALTIME */
	usec_t sampled;      /* CLOCK_MONOTONIC, last sample */
} Transfer;

struct VmTransfers {
	char *id; /* the update whose transfers these are */
	Transfer *items;
	size_t n;
};

/* ---- constructors / destructors ---- */

int vm_transfers_new(VmTransfers **ret) {
	*ret = calloc(1, sizeof(VmTransfers));
	return *ret ? 0 : -ENOMEM;
}

static void transfers_clear(VmTransfers *t) {
	for (size_t i = 0; i < t->n; i++)
		free(t->items[i].name);
	free(t->items);
	free(t->id);
	*t = (VmTransfers){};
}

VmTransfers *vm_transfers_free(VmTransfers *t) {
	if (!t)
		return NULL;
	transfers_clear(t);
	free(t);
	return NULL;
}

/* ---- helpers ---- */

static usec_t now_usec(clockid_t clock) {
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (usec_t)ts.tv_sec * 1000000ULL + (usec_t)ts.tv_nsec / 1000ULL;
}

/* The transfer of name in update id, started now when new; NULL on OOM. */
static Transfer *transfer_get(VmTransfers *t, const char *id, const char *name, bool restore) {
	Transfer *x;

	if (!streq_ptr(t->id, id)) {
		transfers_clear(t);
		t->id = strdup(id);
		if (!t->id)
			return NULL;
	}
	for (size_t i = 0; i < t->n; i++)
		if (streq(t->items[i].name, name) && t->items[i].restore == restore)
			return &t->items[i];
	x = realloc(t->items, (t->n + 1) * sizeof(*x));
	if (!x)
		return NULL;
	t->items = x;
	x = &x[t->n];
	*x = (Transfer){ .name = strdup(name),
		         .restore = restore,
		         .started = now_usec(CLOCK_MONOTONIC),
		         .started_wall = now_usec(CLOCK_REALTIME) };
	if (!x->name)
		return NULL;
	t->n++;
	return x;
}

/* ---- public entry points ---- */

void vm_transfers_result(VmTransfers *t, const char *id, const VmResult *r, bool restore) {
	Transfer *x;

	if (!t || (r->outcome != VM_OUTCOME_SAVING && r->outcome != VM_OUTCOME_SAVED &&
	           r->outcome != VM_OUTCOME_RESTORING && r->outcome != VM_OUTCOME_RESUMED &&
	           r->outcome != VM_OUTCOME_RESTORED))
		return;
	x = transfer_get(t, id, r->name, restore);
	if (!x)
		return;
	x->sampled = now_usec(CLOCK_MONOTONIC);
	if (r->saved_bytes <= 0)
		return;
	/* A restore reads the image the save wrote: its size is the total from the start. */
	if (r->outcome == VM_OUTCOME_RESTORING)
		x->total = (uint64_t)r->saved_bytes;
	else if (r->outcome != VM_OUTCOME_SAVING)
		x->done = x->total = (uint64_t)r->saved_bytes;
}

void vm_transfers_bytes(VmTransfers *t, const char *id, const char *name, bool restore,
                        uint64_t done, uint64_t total) {
	Transfer *x = t ? transfer_get(t, id, name, restore) : NULL;

	if (!x)
		return;
	x->done = done;
	x->total = total;
	x->sampled = now_usec(CLOCK_MONOTONIC);
}

int vm_transfers_append(const VmTransfers *t, const char *id, sd_bus_message *reply) {
	bool ours = t && streq_ptr(t->id, id);
	int r;

	r = sd_bus_message_open_container(reply, 'a', "(sstttt)");
	if (r < 0)
		return r;
	for (size_t i = 0; ours && i < t->n; i++) {
		const Transfer *x = &t->items[i];
		usec_t span = x->sampled > x->started ? x->sampled - x->started : 0;
		uint64_t rate = span > 0 ? (uint64_t)((double)x->done * 1e6 / (double)span) : 0;

		r = sd_bus_message_append(reply, "(sstttt)", x->name,
		                          x->restore ? "restore" : "save", x->done, x->total, rate,
		                          x->started_wall);
		if (r < 0)
			return r;
	}
	return sd_bus_message_close_container(reply);
}
