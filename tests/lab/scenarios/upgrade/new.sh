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
# The journal: the update's events by MESSAGE_ID and UPGRADED_ID, on both boots, explained by
# the installed catalog (journalctl -x).
kv_id=$(upgradectl show -p LastReport --value)
kv_event() { # kv_event BOOT MESSAGE_ID: an entry of this update with that id
        journalctl -b "$1" -u upgraded.service MESSAGE_ID="$2" UPGRADED_ID="$kv_id" -o cat | grep -q .
}
lab_check journal-staged-event kv_event -1 7512aec2b2264b33994bacca79181206 || ok=false
lab_check journal-commit-event kv_event -1 b4e4da61c0d44a3689098d9fa4bde92c || ok=false
lab_check journal-handoff-event kv_event -1 0879630b0e3b4aec9c03bcfdcf1a00c3 || ok=false
lab_check journal-vm-saved-event kv_event -1 c313a0fe6fb8479eb6961966d66a9b40 || ok=false
lab_check journal-completed-event kv_event 0 30198716b8814ddbb152709d49b6da98 || ok=false
lab_check journal-vm-restored-event kv_event 0 32098ab1f2d2418596fb12f5a9b485d7 || ok=false
lab_check journal-report-event kv_event 0 0a0af9656c174fea9b8cf44325ea169c || ok=false
journalctl -x -b 0 MESSAGE_ID=30198716b8814ddbb152709d49b6da98 --no-pager \
        >"$LAB_RESULTS/journal-x-completed.txt" 2>&1
lab_check journal-catalog-explains grep -q 'Subject: A kernel update completed' \
        "$LAB_RESULTS/journal-x-completed.txt" || ok=false
# upgrade-fast (the same checks): the old kernel went down fast.
if [ -e /etc/upgraded/upgraded.conf.d/60-lab-shutdown.conf ]; then
        lab_check report-shutdown-fast grep -Eq '^ +Shutdown: fast$' \
                "$LAB_RESULTS/upgradectl-report.txt" || ok=false
fi
# Deferred units (docs/policy.md): this boot carries the handoff mark, the generator held
# lab-defer.timer (old.sh's, through a glob) and the built-in list back, and systemd started
# them only after upgraded restored the VMs: after the last VM's resume mark in the report
# (each VM's "resume" in probe.new, this boot's CLOCK_MONOTONIC; the journal's last "VM
# restored" event where the report has none), after the daemon's deferred-released stamp,
# and after the waiter (upgraded-defer.service) ended. Times in usec of this boot's
# CLOCK_MONOTONIC, the clock of systemd's ActiveEnterTimestampMonotonic.
kv_active() { # kv_active UNIT: active within 60 s (the report is written after the release)
        local _
        for _ in $(seq 120); do systemctl -q is-active "$1" && return 0; sleep 0.5; done
        return 1
}
kv_after_restore() { # kv_after_restore UNIT: active, and entered after the restore
        local t
        kv_active "$1" || return 1
        t=$(lab_unit_mono "$1")
        lab_marker deferred-unit "$1" active_usec="$t" restored_usec="$kv_restored" \
                released_usec="$kv_released" waiter_usec="$kv_waiter"
        [ "${t:-0}" -gt "$kv_restored" ] && [ "$t" -ge "$kv_released" ] && [ "$t" -ge "$kv_waiter" ]
}
kv_report=$(tr -d ' \n' <"$LAB_RESULTS/upgradectl-report.json")
kv_restored=$(grep -o '"resume":[0-9]*' <<<"$kv_report" | sed 's/.*://' | sort -n | tail -n 1)
if [ -n "$kv_restored" ]; then
        kv_restored=$((kv_restored / 1000))
else
        kv_restored=$(lab_journal_mono 32098ab1f2d2418596fb12f5a9b485d7)
fi
kv_released=$(grep -o '"name":"deferred-released","at":"[^"]*","monotonic_ns":[0-9]*' \
        <<<"$kv_report" | sed 's/.*://')
[ -z "$kv_released" ] || kv_released=$((kv_released / 1000))
lab_check defer-handoff-mark grep -qw 'upgraded\.handoff=1' /proc/cmdline || ok=false
lab_check defer-dropin-written \
        test -f /run/systemd/generator/lab-defer.timer.d/50-upgraded-defer.conf || ok=false
kv_active upgraded-defer.service
kv_waiter=$(lab_unit_mono upgraded-defer.service)
lab_check defer-restore-seen test "${kv_restored:-0}" -gt 0 || ok=false
lab_check defer-released-after-restore test "${kv_released:-0}" -ge "${kv_restored:-0}" || ok=false
lab_check defer-waiter-after-release test "${kv_waiter:-0}" -ge "${kv_released:-1}" || ok=false
lab_check defer-lab-timer-after-restore kv_after_restore lab-defer.timer || ok=false
# A real one from the built-in list, where the image enables it.
if [ "$(systemctl show -p UnitFileState --value apt-daily.timer)" = enabled ]; then
        lab_check defer-apt-daily-after-restore kv_after_restore apt-daily.timer || ok=false
else
        lab_log "apt-daily.timer is not enabled in this image: only lab-defer.timer checked"
fi
kv_report_defer() {
        grep -q '"deferred_units":{"units":\[[^]]*"lab-defer\.timer"' <<<"$kv_report"
}
lab_check defer-in-report kv_report_defer || ok=false
lab_check defer-in-upgradectl-report grep -Eq '^ +Deferred units: .*lab-defer\.timer' \
        "$LAB_RESULTS/upgradectl-report.txt" || ok=false
ls -R /run/systemd/generator >"$LAB_RESULTS/generator-new.txt" 2>&1
# The release: os-release, upgraded built for it, the report's kernels, the libvirt daemon.
. /lab-payload/scenarios/upgrade/release.sh
rl_checks || ok=false
# The report's critical path, held against systemd-analyze and the journal by the runner.
lab_check critical-chain-collected lab_critical_chain || ok=false
cat /proc/cmdline >"$LAB_RESULTS/cmdline-new.txt"
if ! $ok; then
        lab_finish fail upgrade-checks-failed
elif [ "${LAB_AFTER_NEW:-finish}" = reboot ]; then
        # lab.conf AFTER_NEW=reboot: again.sh checks the boot after this one.
        lab_next_boot
else
        lab_finish pass
fi
