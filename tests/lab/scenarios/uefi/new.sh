# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# The UEFI host, new kernel (reached through kexec_file_load): it still sees the
# firmware: /sys/firmware/efi and its runtime map, efivars readable through the
# runtime services, nothing in the kernel log about them being disabled or failing
# to map; and the report names the backend, why, and the platform of the stage.
. /lab-payload/scenarios/lib.sh
. /lab-payload/scenarios/uefi/efi-facts.sh

ok=true
lab_check kernel-is-new test "$(uname -r)" = "$LAB_KERNEL_NEW" || ok=false
journalctl -k -b 0 --no-pager -o short-monotonic >"$LAB_RESULTS/kmsg-new.txt" 2>&1
grep -i 'efi' "$LAB_RESULTS/kmsg-new.txt" >"$LAB_RESULTS/kmsg-efi-new.txt"
lab_check new-efi test -d /sys/firmware/efi || ok=false
lab_check new-runtime-map test -d /sys/firmware/efi/runtime-map/0 || ok=false
lab_efi_facts >"$LAB_RESULTS/efi-new.txt" 2>&1
# efivarfs reads go through GetVariable(): a working runtime service.
lab_check new-efivars-readable grep -Eq '^SecureBoot: *06 00 00 00 0[01] *$' \
        "$LAB_RESULTS/efi-new.txt" || ok=false
lab_check new-efi-runtime-clean sh -c \
        '! grep -Eiq "runtime services (are )?disabled|efi.*(fail|error|cannot|could not)" \
        "$LAB_RESULTS/kmsg-efi-new.txt"' || ok=false
lab_check report-written lab_wait_report || ok=false
f=$(compgen -G '/var/lib/upgraded/reports/*.json' | sort | tail -n 1)
lab_check report-kexec-file grep -Eq '"name": ?"kexec_file"' "$f" || ok=false
lab_check report-success grep -Eq '"result": ?"success"' "$f" || ok=false
lab_check report-reason-efi grep -Eq '"reason": ?"[^"]*EFI-booted host' "$f" || ok=false
lab_check report-platform-uefi grep -Eq '"firmware": ?"uefi"' "$f" || ok=false
lab_check daemon-idle sh -c 'upgradectl show -p State --value | grep -qx idle' || ok=false
if $ok; then
        lab_finish pass
else
        lab_finish fail uefi-checks-failed
fi
