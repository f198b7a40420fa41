# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# keep-ram-vms, new kernel: the kept memory is there again (region, DAX mount, the random
# file bit for bit), both VMs run on the very RAM files of the old kernel (same inode on
# /dev/pmem0), the memguest VM finds its memory intact, and upgraded's report says per VM
# strategy keep-ram, resumed, and a small saved_bytes (device state only). The runner checks
# the counters continued and measures the downtime.
. /lab-payload/scenarios/lib.sh
. /lab-payload/scenarios/keep-ram-vms/common.sh

KV_SAVED_MAX=$((8 << 20)) # a checkpoint of the same VMs writes their whole RAM

kr_same_data() {
        [ "$(sha256sum "$KR_FILE" | cut -d' ' -f1)" = "$(cat "$KR_SUM")" ]
}

kv_same_ram_file() {
        [ "$(stat -c %i "$(kr_ram_file "$1")")" = "$(cat "$LAB_STATE/$1.ram-inode")" ]
}

# "strategy result saved_bytes start_attempts downtime save_time restore_time" (times in
# µs, "-" when absent) of VM $1 in the newest report.
# No JSON tool in the lab host: the report is cut at , { } [ into "key":value lines; a
# "name" line starts a record, its saved_bytes line closes what the check needs.
kv_report_vm() {
        local f
        f=$(compgen -G '/var/lib/upgraded/reports/*.json' | sort | tail -n 1)
        [ -n "$f" ] || return 1
        tr ',{}[' '\n\n\n\n' <"$f" | sed -e 's/^[[:space:]]*//' -e 's/"//g' -e 's/: */:/' |
                awk -F: -v vm="$1" '
                $1 == "name" { cur = $2; s = r = ""; next }
                cur != vm { next }
                $1 == "strategy" { s = $2 }
                $1 == "result" { r = $2 }
                $1 == "saved_bytes" && sb == "" { sb = $2; ss = s; rr = r }
                $1 == "start_attempts" && sa == "" { sa = $2 }
                $1 == "downtime" && dt == "" { dt = $2 }
                $1 == "save_time" && st == "" { st = $2 }
                $1 == "restore_time" && rt == "" { rt = $2 }
                function v(x) { return x == "" ? "-" : x }
                END {
                        if (sb == "") exit 1
                        printf "%s %s %s %s %s %s %s\n", v(ss), v(rr), sb, v(sa), v(dt), v(st), v(rt)
                }'
}

kv_report_kept() {
        local s r sb sa dt st rt line
        line=$(kv_report_vm "$1") || return 1
        read -r s r sb sa dt st rt <<<"$line"
        line="strategy=$s result=$r saved_bytes=$sb start_attempts=$sa downtime_us=$dt"
        line+=" save_time_us=$st restore_time_us=$rt"
        # shellcheck disable=SC2086 # one k=v word each
        lab_marker kept-vm "$1" $line
        echo "$1 $line" >>"$LAB_RESULTS/keep-ram-vms.txt"
        [ "$s" = keep-ram ] && [ "$r" = resumed ] && [[ $sb =~ ^[0-9]+$ ]] && [ "$sb" -lt "$KV_SAVED_MAX" ]
}

ok=true
lab_check kernel-is-new test "$(uname -r)" = "$LAB_KERNEL_NEW" || ok=false
lab_check cmdline-has-memmap kr_cmdline_has_memmap || ok=false
lab_check region-present kr_region || ok=false
lab_check pmem-device kr_pmem_device || ok=false
lab_check dax-mounted kr_dax_mounted || ok=false
lab_check data-kept kr_same_data || ok=false
kr_capture new
lab_check report-written lab_wait_report || ok=false
lab_check vms-running lab_wait_vms_running 300 || ok=false
for vm in $(lab_counter_vms); do
        lab_marker counter-after "$vm" "$(lab_counter "$vm")"
done
lab_check "ram-file-on-dax-$KV_COUNTER" kr_ram_file_on_dax "$KV_COUNTER" 512 || ok=false
lab_check "ram-file-on-dax-$KV_MEM" kr_ram_file_on_dax "$KV_MEM" "$KV_MEM_MIB" || ok=false
for vm in $(lab_counter_vms); do
        lab_check "same-ram-file-$vm" kv_same_ram_file "$vm" || ok=false
        lab_check "report-keep-ram-$vm" kv_report_kept "$vm" || ok=false
done
lab_check mem-verify-new lab_mem_verify "$KV_MEM" || ok=false
lab_check mem-same-fill test "$MG_SUM" = "$(cat "$LAB_STATE/mem-sum")" || ok=false
ls -lR "$KR_DIR" >"$LAB_RESULTS/keep-ram-dir-new.txt" 2>&1 || true
ls -l /var/lib/upgraded/keep-ram >"$LAB_RESULTS/keep-ram-manifest-new.txt" 2>&1 || true
lab_check daemon-idle sh -c 'upgradectl show -p State --value | grep -qx idle' || ok=false
upgradectl report >"$LAB_RESULTS/upgradectl-report.txt" 2>&1 || ok=false
upgradectl report --json >"$LAB_RESULTS/upgradectl-report.json" 2>&1 || ok=false
cp /var/lib/upgraded/updates/*.json "$LAB_RESULTS/" 2>/dev/null || true
if $ok; then
        lab_finish pass
else
        lab_finish fail keep-ram-vms-checks-failed
fi
