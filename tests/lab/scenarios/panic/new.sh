# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# upgraded, staged kernel after the panic path: the crash kernel took the
# update over and kexeced here with the full memory map and the EFI state. upgraded.service
# found its handoff record, restored the VMs and wrote a report that names the
# panic path. The runner checks the boots on the console, the counters and the
# report's schema.
. /lab-payload/scenarios/lib.sh
. /lab-payload/scenarios/keep-ram/common.sh
. /lab-payload/scenarios/panic/kdump.sh

PANIC_MEMS="lab-mem-1 lab-mem-2"
PANIC_PLAIN=lab-counter-1

ok=true
lab_check kernel-is-new test "$(uname -r)" = "$LAB_KERNEL_NEW" || ok=false
lab_check not-crash-kernel sh -c '! grep -qw "upgraded\.panic=1" /proc/cmdline' || ok=false
# A UEFI host (lab.conf): the EFI state went through two of our loads (old kernel to
# crash kernel, crash kernel to here), and the firmware still answers.
lab_check efi-after-two-loads test -d /sys/firmware/efi/runtime-map/0 || ok=false
lab_check efivars-readable sh -c 'od -An -tx1 \
        /sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c | \
        grep -Eq "^ *06 00 00 00 0[01] *$"' || ok=false
# The old kernel failed one commit on purpose (kd_rollback): wait for the successful report.
pn_success_report() {
        local i
        for ((i = 0; i < 600; i++)); do
                grep -Elq '"result": ?"success"' /var/lib/upgraded/reports/*.json 2>/dev/null && return 0
                sleep 0.5
        done
        return 1
}
lab_check report-written pn_success_report || ok=false
lab_check vms-running lab_wait_vms_running 300 || ok=false
for vm in $(lab_counter_vms); do
        lab_marker counter-after "$vm" "$(lab_counter "$vm")"
done
# json-c writes "key":value (no space): match either way.
lab_check report-success sh -c 'grep -Eq "\"result\": ?\"success\"" /var/lib/upgraded/reports/*.json' || ok=false
lab_check report-panic-path sh -c 'grep -Eq "\"crash_kernel_boot_id\": ?\"[0-9a-f]{32}\"" /var/lib/upgraded/reports/*.json' || ok=false
# The panic came on the boot CPU (old.sh): the crash kernel was told which CPU that is
# (disable_cpu_apicid=0, ignored there since it runs on it), and this kernel, started from the
# boot CPU, runs both CPUs with nothing parked, as the report says (loader/boot-cpu.c).
lab_check crash-kernel-knew-boot-cpu sh -c 'journalctl -b -1 -k --no-pager |
        grep -q "Command line:.* disable_cpu_apicid=0 nr_cpus=1 reset_devices upgraded.panic=1"' || ok=false
lab_check all-cpus-online sh -c '! grep -qw "disable_cpu_apicid=[0-9x]*" /proc/cmdline &&
        [ "$(cat /sys/devices/system/cpu/online)" = 0-1 ]' || ok=false
lab_check report-boot-cpu-not-parked sh -c 'grep -Eq "\"boot_cpu_parked\": ?null[,}]" /var/lib/upgraded/reports/*.json' || ok=false
# The kept RAM across the crash kernel: the region and its mount again, the memguests on the
# very files they left, intact by their own verify; the plain VM checkpointed instead, said so.
lab_check cmdline-has-memmap kr_cmdline_has_memmap || ok=false
lab_check dax-mounted kr_dax_mounted || ok=false
for vm in $PANIC_MEMS; do
        lab_check "same-ram-file-$vm" kv_same_ram_file "$vm" || ok=false
        lab_check "report-keep-ram-$vm" kv_report_kept "$vm" keep-ram - || ok=false
done
lab_check "report-fallback-$PANIC_PLAIN" kv_report_kept "$PANIC_PLAIN" checkpoint set || ok=false
for vm in $PANIC_MEMS; do
        lab_check "mem-verify-new-$vm" lab_mem_verify "$vm" || ok=false
        lab_check "mem-same-fill-$vm" test "$MG_SUM" = "$(cat "$LAB_STATE/$vm.mem-sum")" || ok=false
done
lab_check daemon-idle sh -c 'upgradectl show -p State --value | grep -qx idle' || ok=false
kd_crash_boot || ok=false
upgradectl report >"$LAB_RESULTS/upgradectl-report.txt" 2>&1 || ok=false
upgradectl status >"$LAB_RESULTS/status-new.txt" 2>&1 || true
cat /proc/cmdline >"$LAB_RESULTS/cmdline-new.txt"
free -k >"$LAB_RESULTS/free-new.txt" 2>&1
# The crash kernel's own log: its boot is the one before this one.
journalctl --no-pager -o short-monotonic -b -1 >"$LAB_RESULTS/journal-crash.txt" 2>&1
journalctl --no-pager -o short-monotonic -b -2 >"$LAB_RESULTS/journal-old-kernel.txt" 2>&1
if $ok; then
        lab_finish pass
else
        lab_finish fail panic-checks-failed
fi
