# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# keep-ram, new kernel: the region is persistent memory again (the carried memmap=
# on the command line, and the e820 table our loader built), the DAX filesystem
# mounted from fstab holds the data written on the old kernel bit for bit, and
# upgraded restored the VMs (their counters continued: the runner checks).
. /lab-payload/scenarios/lib.sh
. /lab-payload/scenarios/keep-ram/common.sh

kr_same_data() {
        [ "$(sha256sum "$KR_FILE" | cut -d' ' -f1)" = "$(cat "$KR_SUM")" ]
}

ok=true
lab_check kernel-is-new test "$(uname -r)" = "$LAB_KERNEL_NEW" || ok=false
lab_check cmdline-has-memmap kr_cmdline_has_memmap || ok=false
lab_check region-present kr_region || ok=false
lab_check pmem-device kr_pmem_device || ok=false
lab_check dax-mounted kr_dax_mounted || ok=false
lab_check data-kept kr_same_data || ok=false
lab_marker keep-ram-file read sha256="$(sha256sum "$KR_FILE" | cut -d' ' -f1)"
kr_capture new
lab_check report-written lab_wait_report || ok=false
lab_check vms-running lab_wait_vms_running 300 || ok=false
for vm in $(lab_counter_vms); do
        lab_marker counter-after "$vm" "$(lab_counter "$vm")"
done
ls -lR "$KR_DIR" >"$LAB_RESULTS/keep-ram-dir-new.txt" 2>&1 || true
lab_check daemon-idle sh -c 'upgradectl show -p State --value | grep -qx idle' || ok=false
upgradectl report >"$LAB_RESULTS/upgradectl-report.txt" 2>&1 || ok=false
upgradectl report --json >"$LAB_RESULTS/upgradectl-report.json" 2>&1 || ok=false
cp /var/lib/upgraded/updates/*.json "$LAB_RESULTS/" 2>/dev/null || true
if $ok; then
        lab_finish pass
else
        lab_finish fail keep-ram-checks-failed
fi
