# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# The Secure Boot host, new kernel (reached through kexec_file_load, which passed
# the Secure Boot state on): it is locked down again and still sees the firmware;
# the report names kexec_file, why (lockdown) and the platform of the stage. Then
# it stages again and crashes (AFTER_NEW=panic): panic.sh checks the crash kernel.
. /lab-payload/scenarios/lib.sh

ok=true
lab_check kernel-is-new test "$(uname -r)" = "$LAB_KERNEL_NEW" || ok=false
lab_check still-locked-down grep -q '\[integrity\]' /sys/kernel/security/lockdown || ok=false
lab_check new-efivars-readable sh -c 'od -An -tx1 \
        /sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c | \
        grep -Eq "^ *06 00 00 00 01 *$"' || ok=false
lab_check report-written lab_wait_report || ok=false
f=$(compgen -G '/var/lib/upgraded/reports/*.json' | sort | tail -n 1)
lab_check report-kexec-file grep -Eq '"name": ?"kexec_file"' "$f" || ok=false
lab_check report-success grep -Eq '"result": ?"success"' "$f" || ok=false
lab_check report-reason-lockdown grep -Eq '"reason": ?"[^"]*lockdown' "$f" || ok=false
lab_check report-secure-boot grep -Eq '"secure_boot": ?"enabled"' "$f" || ok=false
lab_check report-no-fast grep -q 'backend-verifies-only' "$f" || ok=false
lab_check daemon-idle sh -c 'upgradectl show -p State --value | grep -qx idle' || ok=false
if ! $ok; then
        lab_finish fail lockdown-checks-failed
        exit 1
fi
# The panic path of this backend (lab.conf AFTER_NEW=panic): stage again, which loads
# the panic image through kexec_file_load with the panic mark, then crash. panic.sh
# runs on the crash kernel.
rc=0
upgradectl stage "/boot/vmlinuz-$LAB_KERNEL_NEW.signed" --initrd "/boot/initrd.img-$LAB_KERNEL_NEW" \
        --reuse-cmdline >"$LAB_RESULTS/stage-again.txt" 2>&1 || rc=$?
lab_check stage-again test "$rc" = 0 || ok=false
lab_check panic-image-loaded-again grep -qx 1 /sys/kernel/kexec_crash_loaded || ok=false
if ! $ok; then
        lab_finish fail lockdown-stage-again-failed
        exit 1
fi
lab_next_panic
