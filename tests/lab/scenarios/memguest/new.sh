# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# memguest, new kernel: upgraded restored the VM; its counter continued (the runner) and
# the guest finds every filled page as it was before the kexec, with the same fill's sum.
. /lab-payload/scenarios/lib.sh

ok=true
lab_check kernel-is-new test "$(uname -r)" = "$LAB_KERNEL_NEW" || ok=false
lab_check report-written lab_wait_report || ok=false
lab_check vms-running lab_wait_vms_running 300 || ok=false
lab_marker counter-after lab-mem-1 "$(lab_counter lab-mem-1)"
lab_check mem-verify-new lab_mem_verify lab-mem-1 || ok=false
lab_check mem-same-fill test "$MG_SUM" = "$(cat "$LAB_STATE/mem-sum")" || ok=false
upgradectl report >"$LAB_RESULTS/upgradectl-report.txt" 2>&1 || ok=false
upgradectl report --json >"$LAB_RESULTS/upgradectl-report.json" 2>&1 || ok=false
if $ok; then
        lab_finish pass
else
        lab_finish fail memguest-checks-failed
fi
