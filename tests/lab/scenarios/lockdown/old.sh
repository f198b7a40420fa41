# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# A locked-down host (lockdown=integrity, cmdline-extra), old kernel, no VMs. The
# daemon must see the lockdown, fall back to kexec_file_load and say why (Describe,
# status); the kernel then refuses Debian's signed 6.1.0-57 (on a BIOS boot no
# keyring holds the key it is signed with), and stage must name that refusal
# (InvalidImage, lockdown, signature) and change nothing: no image loaded, no
# update record, the daemon idle.
. /lab-payload/scenarios/lib.sh

ok=true
upgradectl --json status >"$LAB_RESULTS/describe-old.json" 2>&1 || ok=false
upgradectl status >"$LAB_RESULTS/status-old.txt" 2>&1 || ok=false
lab_check lockdown-integrity grep -q '\[integrity\]' /sys/kernel/security/lockdown || ok=false
lab_check describe-lockdown grep -Eq '"lockdown": ?"integrity"' "$LAB_RESULTS/describe-old.json" ||
        ok=false
lab_check describe-firmware-bios grep -Eq '"firmware": ?"bios"' "$LAB_RESULTS/describe-old.json" ||
        ok=false
lab_check backend-kexec-file sh -c "upgradectl show -p Backend --value | grep -qx kexec_file" ||
        ok=false
lab_check status-says-fallback grep -q 'fallback: .*lockdown' "$LAB_RESULTS/status-old.txt" ||
        ok=false
lab_check status-says-platform grep -q 'Platform: bios, Secure Boot unsupported, lockdown integrity' \
        "$LAB_RESULTS/status-old.txt" || ok=false
rc=0
upgradectl stage "/boot/vmlinuz-$LAB_KERNEL_NEW" --initrd "/boot/initrd.img-$LAB_KERNEL_NEW" \
        --reuse-cmdline >"$LAB_RESULTS/stage.txt" 2>&1 || rc=$?
lab_check stage-refused test "$rc" != 0 || ok=false
lab_check stage-names-signature grep -q 'InvalidImage' "$LAB_RESULTS/stage.txt" || ok=false
lab_check stage-names-lockdown grep -q 'lockdown (integrity)' "$LAB_RESULTS/stage.txt" || ok=false
lab_check kernel-says-unsigned sh -c \
        'journalctl -k -b 0 --no-pager | grep -q "kexec of unsigned images is restricted"' || ok=false
lab_check nothing-loaded grep -qx 0 /sys/kernel/kexec_loaded || ok=false
lab_check no-panic-image grep -qx 0 /sys/kernel/kexec_crash_loaded || ok=false
lab_check daemon-idle sh -c 'upgradectl show -p State --value | grep -qx idle' || ok=false
lab_check no-update-record sh -c '! compgen -G "/var/lib/upgraded/updates/*.json" >/dev/null' ||
        ok=false
if $ok; then
        lab_finish pass
else
        lab_finish fail lockdown-checks-failed
fi
