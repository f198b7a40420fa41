# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# keep-ram, new kernel: the kept memory is there again (the carried memmap= on the command
# line, the region, the DAX mount, the random file bit for bit), both memguests run on the
# very RAM files of the old kernel (same inode on /dev/pmem0) and find their memory intact,
# and upgraded's report says per VM: keep-ram, resumed, a small saved_bytes (device state
# only) for them; checkpoint with the reason it could not keep its RAM for the plain VM;
# and the old kernel went down fast (Shutdown=fast, no orderly stop of its units).
# The runner checks the counters continued and measures the downtime.
. /lab-payload/scenarios/lib.sh
. /lab-payload/scenarios/keep-ram/common.sh

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
for vm in $KV_MEMS; do
        lab_check "ram-file-on-dax-$vm" kr_ram_file_on_dax "$vm" "$KV_MEM_MIB" || ok=false
        lab_check "same-ram-file-$vm" kv_same_ram_file "$vm" || ok=false
        lab_check "report-keep-ram-$vm" kv_report_kept "$vm" keep-ram - || ok=false
done
lab_check "report-fallback-$KV_PLAIN" kv_report_kept "$KV_PLAIN" checkpoint set || ok=false
for vm in $KV_MEMS; do
        lab_check "mem-verify-new-$vm" lab_mem_verify "$vm" || ok=false
        lab_check "mem-same-fill-$vm" test "$MG_SUM" = "$(cat "$LAB_STATE/$vm.mem-sum")" || ok=false
done
ls -lR "$KR_DIR" >"$LAB_RESULTS/keep-ram-dir-new.txt" 2>&1 || true
ls -l /var/lib/upgraded/keep-ram >"$LAB_RESULTS/keep-ram-manifest-new.txt" 2>&1 || true
lab_check daemon-idle sh -c 'upgradectl show -p State --value | grep -qx idle' || ok=false
upgradectl report >"$LAB_RESULTS/upgradectl-report.txt" 2>&1 || ok=false
# Shutdown=fast was taken: every VM saved or kept, the journal flushed (old.sh's drop-in).
lab_check report-shutdown-fast grep -Eq '^ +Shutdown: fast$' "$LAB_RESULTS/upgradectl-report.txt" ||
        ok=false
upgradectl report --json >"$LAB_RESULTS/upgradectl-report.json" 2>&1 || ok=false
cp /var/lib/upgraded/updates/*.json "$LAB_RESULTS/" 2>/dev/null || true
if $ok; then
        lab_finish pass
else
        lab_finish fail keep-ram-checks-failed
fi
