# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# After purgatory refused the wrong digest and reset the machine, the host
# booted its default (old) kernel, as firmware would. The host's previous state
# must be intact: the old kernel runs with a command line purgatory never
# touched; the installed daemon found the update record on disk, rolled the
# update back (failed: "booted kernel OLD after the handoff, not the staged
# NEW") and wrote the report; the counter VM it had checkpointed runs again
# from its saved state (the runner checks that its counter continued).
. /lab-payload/scenarios/lib.sh

newest_report() {
        compgen -G '/var/lib/upgraded/reports/*.json' | sort | tail -n 1
}

report_failed_old_kernel() {
        local f
        f=$(newest_report)
        grep -Eq '"result": ?"failed"' "$f" &&
                grep -q "booted kernel $LAB_KERNEL_OLD after the handoff, not the staged $LAB_KERNEL_NEW" "$f" &&
                grep -Eq '"mode": ?"verified"' "$f"
}

# The VM's record in the report says it was restored on this (old) kernel.
report_vm_back() {
        grep -Eq '"result": ?"(rolled-back|restored|resumed)"' "$(newest_report)"
}

ok=true
lab_check kernel-is-old test "$(uname -r)" = "$LAB_KERNEL_OLD" || ok=false
cat /proc/cmdline >"$LAB_RESULTS/cmdline-again.txt"
lab_check no-stamps sh -c '! grep -q upgraded.stamps= /proc/cmdline' || ok=false
# The installed daemon, not the test build, ran the recovery.
lab_check installed-daemon sh -c 'readlink /proc/$(systemctl show -p MainPID --value upgraded.service)/exe |
        grep -qx /usr/sbin/upgraded' || ok=false
lab_check report-written lab_wait_report || ok=false
lab_check report-failed-old-kernel report_failed_old_kernel || ok=false
lab_check vm-running lab_wait_vms_running 300 || ok=false
lab_check report-vm-back report_vm_back || ok=false
lab_marker counter-after lab-counter-1 "$(lab_counter lab-counter-1)"
lab_check daemon-idle sh -c 'upgradectl show -p State --value | grep -qx idle' || ok=false
upgradectl list >"$LAB_RESULTS/list-again.txt" 2>&1 || ok=false
lab_check update-record-failed grep -q failed "$LAB_RESULTS/list-again.txt" || ok=false
upgradectl report --json >"$LAB_RESULTS/upgradectl-report.json" 2>&1 || ok=false
if $ok; then
        lab_finish pass
else
        lab_finish fail loader-corrupt-checks-failed
fi
