/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Shared between vm-inventory.c and vm-orchestrate.c; not part of the API. */

#include <time.h>

#include "vm.h"

extern const VmOps *vm_ops;
extern usec_t vm_connect_retry_usec;

usec_t vm_now(clockid_t clock);
const char *vm_last_error(void);
const char *vm_state_to_string(int state);
int vm_state_from_string(const char *s);
void vm_result_set_error(VmResult *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
VmResults *vm_results_new(size_t n);
char *vm_checkpoint_blocker(virDomainPtr dom);
