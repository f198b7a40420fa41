/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * How the old kernel goes down once the VMs are saved ([Handoff] Shutdown=, docs/policy.md,
 * "Shutdown after the saves"):
 *
 *   orderly  systemd starts kexec.target: every unit is stopped in order, then the kexec.
 *   fast     systemd's Manager.KExec(), as `systemctl kexec --force`: no orderly stop of
 *            the remaining units; processes are killed and file systems unmounted.
 *
 * Fast is taken only when nothing is left to protect: every VM the update handles is saved
 * or shut down (none left running, none failed), and the journal is flushed. The third
 * condition, the handoff record on disk, holds by construction: the decision is written in
 * that record and synced before the kexec is requested (context_handoff()).
 *
 * The decision is JSON, kept in the update record and copied into the report
 * (handoff.shutdown): {"requested": "orderly"|"fast", "mode": "orderly"|"fast",
 * "reasons": ["...", ...]}, the reasons saying why fast was or was not taken.
 */

#include <json-c/json.h>

#include "policy.h"
#include "update.h"

#define JOURNAL_SYNC_TIMEOUT_USEC (5ULL * 1000 * 1000)

/* Asks journald to write everything it holds to disk (its varlink call
 * io.systemd.Journal.Synchronize on <root>/run/systemd/journal/io.systemd.journal, the one
 * `journalctl --sync` makes), waiting at most JOURNAL_SYNC_TIMEOUT_USEC. On failure
 * *ret_why says why. */
int journal_sync(const char *root, char **ret_why);

typedef int (*JournalSyncFunc)(const char *root, char **ret_why);

/* The decision for u (its "vms" results as the pre-handoff steps left them). flush: the
 * journal flush (journal_sync(), a seam for unit tests); called only when everything
 * else allows fast. p NULL: orderly. */
int handoff_shutdown_decide(const Policy *p, const Update *u, const char *root,
                            JournalSyncFunc flush, json_object **ret);

/* The decision in u->shutdown; orderly without one. */
ShutdownMode handoff_shutdown_mode(const Update *u);
/* Whether the decision in u->shutdown is fast; false without one. */
bool handoff_shutdown_is_fast(const Update *u);
