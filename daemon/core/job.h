/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Long work off the event loop (docs/architecture.md, "Jobs").
 *
 * One lock guards the daemon's state (Context, its updates, the bus objects): the event loop
 * holds it while it dispatches (job_loop_run()), a job's worker thread holds it while it runs,
 * except around calls that may block (libvirt, a sync of the disk), which it brackets with
 * job_blocking_begin()/job_blocking_end(). While a worker waits on libvirt the loop answers
 * every call; while the loop dispatches the worker waits at most for one handler.
 *
 * Workers never touch sd-bus or sd-event: what must happen on the loop (a signal, a reply, the
 * kexec request) is handed over with job_defer(), which wakes the loop through an eventfd and
 * runs the function there, in order, with the lock held.
 *
 * A job may be cancelled (job_cancel(): a flag the work polls, e.g. between two libvirt calls
 * or while saves run) and may have a deadline: when it passes, the job is abandoned: its done
 * callback runs at once with -ETIMEDOUT, and the worker, whenever its blocking call returns,
 * gets -ETIMEDOUT from job_blocking_end() and must leave the state alone.
 */

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

typedef struct Job Job;

/* On the worker, lock held. Returns what done receives. */
typedef int (*JobRun)(Job *j, void *userdata);
/* On the loop, lock held: the worker's result, or -ETIMEDOUT when the deadline passed first
 * (then the job's worker may still run; it is freed once it returned). Called once. */
typedef void (*JobDone)(Job *j, int result, void *userdata);

/* The loop's side: watches the wake-up eventfd on e (again on a new loop; the old one must
 * not run any more). */
int job_attach_event(sd_event *e);
/* sd_event_loop() with the state lock held while dispatching. Returns the exit code. */
int job_loop_run(sd_event *e);
/* Whether the caller is the event loop's thread (also true before job_loop_run() ran). */
bool job_on_loop(void);

/* Runs fn(data) on the loop, with the lock held, in the order of the calls. On the loop
 * itself fn runs later too (never re-entrantly). free_data (may be NULL) frees data after. */
int job_defer(void (*fn)(void *data), void *data, void (*free_data)(void *data));

/* From a job's worker (state lock held): runs fn(data) on the loop and waits until it ran,
 * with the lock released meanwhile (the loop needs it), so that what fn reads of the state
 * is what the worker left (a signal carrying each intermediate value). Elsewhere: fn(data)
 * right away. */
void job_defer_wait(void (*fn)(void *data), void *data);

/* Starts a worker thread running run(j, userdata); done(j, r, userdata) follows on the loop.
 * timeout_usec 0: no deadline. ret may be NULL; the pointer stays valid until done ran. */
int job_start(const char *name, uint64_t timeout_usec, JobRun run, JobDone done, void *userdata,
              Job **ret);
const char *job_name(const Job *j);
/* The job of the calling worker thread, NULL on the loop or outside any job. */
Job *job_current(void);
/* Asks the job to stop (thread-safe); the work decides where it can. */
void job_cancel(Job *j);
bool job_is_cancelled(const Job *j);
/* The address of the cancel flag, for libraries that poll a plain flag (vm.h's VmPlan). */
const atomic_bool *job_cancel_flag(Job *j);
/* Jobs whose done callback has not run yet. */
unsigned job_count(void);

/* Around a call that may block. On a worker: releases the lock, and takes it again after;
 * job_blocking_end() returns -ETIMEDOUT when the job was abandoned meanwhile. Elsewhere
 * (loop, unit tests): nothing, returns 0. */
void job_blocking_begin(void);
int job_blocking_end(void);
