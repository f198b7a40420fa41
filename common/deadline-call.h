/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * A blocking call with a deadline. Some calls wait without a bound for another process
 * (libvirt for libvirtd or QEMU, libbpf for the kernel's verifier): such a call runs on a
 * detached thread of its own, and the caller waits for it at most until a deadline. When the
 * caller gives up, the call's data belongs to the thread, which hands it to orphan() once the
 * call returned: orphan undoes what the late call did and frees the data.
 */

#include <stdatomic.h>
#include <stdint.h>

typedef struct DeadlineCall {
	/* The blocking call; it keeps its results in data. */
	void (*run)(void *data);
	/* After run() returned on a call the caller gave up on: undo and free data. NULL:
	 * nothing to undo, nothing to free. */
	void (*orphan)(void *data);
	/* When non-NULL, counts the thread while it runs, so that a caller can wait for every
	 * late call before it exits. */
	atomic_uint *pending;
} DeadlineCall;

/*
 * call->run(data) on a detached thread, waited for at most timeout_usec.
 * 0: it returned, data is the caller's again; -ETIMEDOUT: data belongs to the thread (see
 * orphan); another -errno: nothing ran, data is the caller's.
 */
int deadline_call(const DeadlineCall *call, void *data, uint64_t timeout_usec);
