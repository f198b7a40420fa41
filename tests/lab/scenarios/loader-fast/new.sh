# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# upgraded's own loader, fast handoff, new kernel: purgatory hashed nothing
# (stamps mode f, implementation -), and the report names the kexec_load
# backend, the fast handoff, and the policy's reasons: the unknown machine-check
# and EDAC facts as warnings, no IOMMU refusal.
. /lab-payload/scenarios/lib.sh

report_reasons() {
        local f
        f=$(compgen -G '/var/lib/upgraded/reports/*.json' | sort | tail -n 1)
        grep -q 'warning: mce-unknown' "$f" && grep -q 'warning: edac-unknown' "$f" &&
                ! grep -q 'iommu-off' "$f"
}

ok=true
lab_check kernel-is-new test "$(uname -r)" = "$LAB_KERNEL_NEW" || ok=false
cat /proc/cmdline >"$LAB_RESULTS/cmdline-new.txt"
lab_check stamps-fast lab_stamps f - || ok=false
lab_check_loader_report fast || ok=false
lab_check report-policy-reasons report_reasons || ok=false
if $ok; then
        lab_finish pass
else
        lab_finish fail loader-fast-checks-failed
fi
