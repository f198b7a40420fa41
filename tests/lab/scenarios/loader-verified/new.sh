# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# upgraded's own loader, verified handoff, new kernel: purgatory wrote its
# stamps into the new kernel's command line (mode v, an implementation, three
# ordered TSC values) and the update completed with a report naming the
# kexec_load backend and the verified handoff.
. /lab-payload/scenarios/lib.sh

# E,V,J as 16 lowercase hex digits, mode v, impl s|a|g (docs/purgatory.md).
stamps_verified() {
        local s
        s=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^upgraded\.stamps=//p' | tail -n 1)
        printf '%s\n' "$s" >"$LAB_RESULTS/stamps.txt"
        [[ $s =~ ^([0-9a-f]{16}),([0-9a-f]{16}),([0-9a-f]{16}),v,[sag]$ ]] || return 1
        local e=$((16#${BASH_REMATCH[1]})) v=$((16#${BASH_REMATCH[2]})) j=$((16#${BASH_REMATCH[3]}))
        # Unsigned order through the shell's signed 64-bit integers is fine for TSC
        # values below 2^63 (years of uptime).
        lab_marker purgatory-stamps entry="$e" verified="$v" jump="$j" verify_ticks=$((v - e))
        [ "$e" -gt 0 ] && [ "$v" -ge "$e" ] && [ "$j" -ge "$v" ]
}

# The lab image has no JSON tool: match the keys upgraded writes, with or
# without the space json-c puts after the colon.
report_says() {
        local f
        f=$(compgen -G '/var/lib/upgraded/reports/*.json' | sort | tail -n 1)
        grep -Eq '"name": ?"kexec_load"' "$f" &&
                grep -Eq '"mode": ?"'"$1"'"' "$f" &&
                grep -Eq '"result": ?"success"' "$f"
}

ok=true
lab_check kernel-is-new test "$(uname -r)" = "$LAB_KERNEL_NEW" || ok=false
cat /proc/cmdline >"$LAB_RESULTS/cmdline-new.txt"
lab_check stamps-verified stamps_verified || ok=false
lab_check report-written lab_wait_report || ok=false
lab_check report-kexec-load-verified report_says verified || ok=false
lab_check daemon-idle sh -c 'upgradectl show -p State --value | grep -qx idle' || ok=false
upgradectl report --json >"$LAB_RESULTS/upgradectl-report.json" 2>&1 || ok=false
if $ok; then
        lab_finish pass
else
        lab_finish fail loader-verified-checks-failed
fi
