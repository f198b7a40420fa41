# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# upgraded, new kernel: upgraded.service found the handoff record, restored
# and resumed the VMs and wrote its report. The runner checks the counters
# continued and puts the report next to its external clock.
. /lab-payload/scenarios/lib.sh

ok=true
lab_check kernel-is-new test "$(uname -r)" = "$LAB_KERNEL_NEW" || ok=false
lab_check report-written lab_wait_report || ok=false
lab_check vms-running lab_wait_vms_running 300 || ok=false
for vm in $(lab_counter_vms); do
        lab_marker counter-after "$vm" "$(lab_counter "$vm")"
done
lab_check daemon-idle sh -c 'upgradectl show -p State --value | grep -qx idle' || ok=false
upgradectl report >"$LAB_RESULTS/upgradectl-report.txt" 2>&1 || ok=false
upgradectl report --json >"$LAB_RESULTS/upgradectl-report.json" 2>&1 || ok=false
upgradectl status >"$LAB_RESULTS/status-new.txt" 2>&1 || true
# What `upgradectl watch` printed while upgraded restored the VMs (old.sh's lab-watch.service):
# the post-boot phase, each VM's restore and the end, exit 0.
kv_watch_done() { grep -q '^exit=' "$LAB_STATE/watch-new.txt" 2>/dev/null; }
for _ in $(seq 600); do kv_watch_done && break; sleep 0.5; done
cp "$LAB_STATE/watch-new.txt" "$LAB_RESULTS/watch-new.txt" 2>/dev/null || true
lab_check watch-ended kv_watch_done || ok=false
lab_check watch-exit-0 grep -qx 'exit=0' "$LAB_STATE/watch-new.txt" || ok=false
lab_check watch-saw-post-boot grep -Eq '^ *[0-9]+%  post-boot$' "$LAB_STATE/watch-new.txt" || ok=false
for vm in $(lab_counter_vms); do
        lab_check "watch-saw-restore-$vm" grep -Eq "VM $vm (restore|\(checkpoint\): resumed)" \
                "$LAB_STATE/watch-new.txt" || ok=false
done
# The report's critical path, held against systemd-analyze and the journal by the runner.
lab_check critical-chain-collected lab_critical_chain || ok=false
cat /proc/cmdline >"$LAB_RESULTS/cmdline-new.txt"
if $ok; then
        lab_finish pass
else
        lab_finish fail upgrade-checks-failed
fi
