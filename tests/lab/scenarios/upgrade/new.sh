# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# upgraded, new kernel: upgraded.service found the handoff record, restored
# and resumed the VMs and wrote its report. The runner checks the counters
# continued and puts the report next to its external clock.
. /lab-payload/scenarios/lib.sh

report_ready() {
        compgen -G '/var/lib/upgraded/reports/*.json' >/dev/null
}

wait_report() {
        local i
        for ((i = 0; i < 600; i++)); do
                report_ready && return 0
                sleep 0.5
        done
        return 1
}

ok=true
lab_check kernel-is-new test "$(uname -r)" = "$LAB_KERNEL_NEW" || ok=false
lab_check report-written wait_report || ok=false
lab_check vms-running lab_wait_vms_running 300 || ok=false
for vm in $(lab_counter_vms); do
        lab_marker counter-after "$vm" "$(lab_counter "$vm")"
done
lab_check daemon-idle sh -c 'upgradectl show -p State --value | grep -qx idle' || ok=false
upgradectl report >"$LAB_RESULTS/upgradectl-report.txt" 2>&1 || ok=false
upgradectl report --json >"$LAB_RESULTS/upgradectl-report.json" 2>&1 || ok=false
upgradectl status >"$LAB_RESULTS/status-new.txt" 2>&1 || true
cat /proc/cmdline >"$LAB_RESULTS/cmdline-new.txt"
if $ok; then
        lab_finish pass
else
        lab_finish fail upgrade-checks-failed
fi
