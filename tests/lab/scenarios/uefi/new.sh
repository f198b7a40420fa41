# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# The UEFI host, new kernel (reached through upgraded's own loader, fast): it
# still sees the firmware: /sys/firmware/efi and its runtime map (the regions the
# loader passed, at the same virtual addresses), efivars readable through the
# runtime services, ACPI and SMBIOS found, nothing in the kernel log about the
# runtime services being disabled or failing to map; purgatory's stamps say fast;
# the report names the backend, the handoff and the platform of the stage.
. /lab-payload/scenarios/lib.sh
. /lab-payload/scenarios/uefi/efi-facts.sh

# The policy's reasons for the fast handoff: machine-check and EDAC counts
# honestly unknown on the cloud kernel, and the IOMMU seen (no iommu-off).
report_reasons() {
        local f
        f=$(compgen -G '/var/lib/upgraded/reports/*.json' | sort | tail -n 1)
        grep -q 'warning: mce-unknown' "$f" && grep -q 'warning: edac-unknown' "$f" &&
                ! grep -q 'iommu-off' "$f"
}

ok=true
lab_check kernel-is-new test "$(uname -r)" = "$LAB_KERNEL_NEW" || ok=false
journalctl -k -b 0 --no-pager -o short-monotonic >"$LAB_RESULTS/kmsg-new.txt" 2>&1
grep -i 'efi' "$LAB_RESULTS/kmsg-new.txt" >"$LAB_RESULTS/kmsg-efi-new.txt"
lab_check new-efi test -d /sys/firmware/efi || ok=false
lab_check new-runtime-map test -d /sys/firmware/efi/runtime-map/0 || ok=false
lab_efi_facts >"$LAB_RESULTS/efi-new.txt" 2>&1
lab_efi_tree "$LAB_RESULTS/efi-new"
# efivarfs reads go through GetVariable(): a working runtime service.
lab_check new-efivars-readable grep -Eq '^SecureBoot: *06 00 00 00 0[01] *$' \
        "$LAB_RESULTS/efi-new.txt" || ok=false
lab_check new-efi-runtime-clean sh -c \
        '! grep -Eiq "runtime services (are )?disabled|efi.*(fail|error|cannot|could not)" \
        "$LAB_RESULTS/kmsg-efi-new.txt"' || ok=false
lab_efi_runtime_regions >"$LAB_RESULTS/efi-runtime-new.txt"
lab_check runtime-map-same cmp -s "$LAB_RESULTS/efi-runtime-old.txt" \
        "$LAB_RESULTS/efi-runtime-new.txt" || ok=false
lab_check acpi-tables test -d /sys/firmware/acpi/tables || ok=false
lab_check smbios-read test -s /sys/firmware/dmi/tables/DMI || ok=false
cat /proc/cmdline >"$LAB_RESULTS/cmdline-new.txt"
lab_check stamps-fast lab_stamps f - || ok=false
lab_check_loader_report fast || ok=false
f=$(compgen -G '/var/lib/upgraded/reports/*.json' | sort | tail -n 1)
lab_check report-platform-uefi grep -Eq '"firmware": ?"uefi"' "$f" || ok=false
lab_check report-policy-reasons report_reasons || ok=false
if $ok; then
        lab_finish pass
else
        lab_finish fail uefi-checks-failed
fi
