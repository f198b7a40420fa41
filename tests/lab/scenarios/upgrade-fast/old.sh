# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# The upgrade scenario with `[Handoff] Shutdown=fast` (docs/policy.md): the same two counter
# VMs, checkpointed, then systemd's KExec() without the orderly stop of the old kernel's
# units. Not in make check: `make bench` (tests/lab/bench-shutdown) runs it against the
# upgrade scenario, interleaved, to measure what the fast shutdown takes out.
. /lab-payload/scenarios/lib.sh
mkdir -p /etc/upgraded/upgraded.conf.d
printf '[Handoff]\nShutdown=fast\n' >/etc/upgraded/upgraded.conf.d/60-lab-shutdown.conf
# The daemon reads its policy when it starts.
systemctl restart upgraded.service
. /lab-payload/scenarios/upgrade/old.sh
