/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * probe_open() with a deadline. Loading, verifying and attaching the eBPF program is the
 * one step between the new kernel's daemon start and the restore of the VMs that the
 * daemon does not control (one lab guest went silent right there, docs/lab.md). It runs on
 * a thread of its own; the caller waits at most timeout_usec and then goes on without a
 * probe. A late opener closes what it opened by itself.
 */

#include <stdint.h>

#include "probe-loader.h"

typedef int (*ProbeOpenFunc)(const ProbeOptions *opts, Probe **ret);

/* The default deadline: the lab's TCG guest opens the probe in well under a second. */
#define PROBE_OPEN_TIMEOUT_USEC (10ULL * 1000000ULL)

/* As probe_open() (open: NULL means probe_open()), or -ETIMEDOUT when it did not return
 * within timeout_usec; *ret is only written when it returned. */
int probe_open_bounded(ProbeOpenFunc open, const ProbeOptions *opts, uint64_t timeout_usec,
                       Probe **ret);
