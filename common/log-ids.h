/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The MESSAGE_IDs of the events an operator searches the journal for
 * (`journalctl MESSAGE_ID=...`, docs/journal.md). Each has an entry in
 * catalog/upgraded.catalog, which `journalctl -x` shows next to it; the
 * catalog-ids test keeps the two in step. Never change an id: fleets search by it.
 */

#define LOG_MID_STAGED         "7512aec2b2264b33994bacca79181206" /* an update was staged */
#define LOG_MID_COMMIT         "b4e4da61c0d44a3689098d9fa4bde92c" /* its commit began */
#define LOG_MID_HANDOFF        "0879630b0e3b4aec9c03bcfdcf1a00c3" /* the point of no return */
#define LOG_MID_ROLLBACK       "09c7450ce3124b9988971a06d25d5221" /* failed before it: rollback */
#define LOG_MID_COMPLETED      "30198716b8814ddbb152709d49b6da98" /* done on the new kernel */
#define LOG_MID_VM_SAVED       "c313a0fe6fb8479eb6961966d66a9b40" /* a VM's state is preserved */
#define LOG_MID_VM_RESTORED    "32098ab1f2d2418596fb12f5a9b485d7" /* a VM runs again */
#define LOG_MID_VM_FAILED      "19239a481c1940cab95d8f744f8806c7" /* a VM step failed */
#define LOG_MID_RELOADED       "d2259afa363b4c498e0a8caa92e08bd0" /* the policy was re-read */
#define LOG_MID_RELOAD_REFUSED "43500cdf59bf4aeaa6f9316556e3320f" /* ... refused, old kept */
/* The report (daemon/core/report.h, REPORT_MESSAGE_ID) */
#define LOG_MID_REPORT         "0a0af9656c174fea9b8cf44325ea169c"
