# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# upgraded's own loader, verified handoff, new kernel: purgatory wrote its
# stamps into the new kernel's command line (mode v, an implementation, three
# ordered TSC values) and the update completed with a report naming the
# kexec_load backend and the verified handoff.
. /lab-payload/scenarios/lib.sh

ok=true
lab_check kernel-is-new test "$(uname -r)" = "$LAB_KERNEL_NEW" || ok=false
cat /proc/cmdline >"$LAB_RESULTS/cmdline-new.txt"
lab_check stamps-verified lab_stamps v '[sag]' || ok=false
lab_check_loader_report verified || ok=false
if $ok; then
        lab_finish pass
else
        lab_finish fail loader-verified-checks-failed
fi
