# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# upgraded's own loader, verified handoff, new kernel: purgatory wrote its
# stamps into the new kernel's command line (mode v, an implementation, three
# ordered TSC values) and the update completed with a report naming the
# kexec_load backend and the verified handoff, and the relocation slice from the
# old kernel's shutdown dump in pstore.
. /lab-payload/scenarios/lib.sh

ok=true
lab_check kernel-is-new test "$(uname -r)" = "$LAB_KERNEL_NEW" || ok=false
cat /proc/cmdline >"$LAB_RESULTS/cmdline-new.txt"
lab_check stamps-verified lab_stamps v '[saxg]' || ok=false
lab_check_loader_report verified || ok=false
# The old kernel's shutdown dump reached the new kernel's pstore, and the report read it
# (the runner holds its figure against the console's clock: --check-relocation).
{ ls -lR /sys/fs/pstore /var/lib/systemd/pstore; dmesg | grep -iE 'ramoops|pstore'; } \
        >"$LAB_RESULTS/pstore-new.txt" 2>&1 || true
lab_check relocation-in-report sh -c \
        "grep -Eq '\"relocation\": ?\\{' /var/lib/upgraded/reports/*.json" || ok=false
if $ok; then
        lab_finish pass
else
        lab_finish fail loader-verified-checks-failed
fi
