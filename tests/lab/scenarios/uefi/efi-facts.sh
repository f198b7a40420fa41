# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# The EFI facts a kexec loader hands the next kernel, as the running kernel shows
# them; both kernels of the uefi scenario write them (efi-old.txt, efi-new.txt).

LAB_EFI_SECURE_BOOT=/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c

# Every file below these sysfs directories, as "path: content" (hex for binary).
lab_efi_facts() {
        local f
        for f in $(find /sys/firmware/efi/runtime-map /sys/firmware/memmap -type f | sort) \
                /sys/firmware/efi/systab /sys/firmware/efi/fw_platform_size \
                /sys/firmware/efi/runtime /sys/firmware/efi/config_table; do
                [ -r "$f" ] && printf '%s: %s\n' "$f" "$(tr '\n' ' ' <"$f")"
        done
        od -An -tx1 "$LAB_EFI_SECURE_BOOT" | sed 's/^/SecureBoot:/'
        findmnt -n /sys/firmware/efi/efivars | sed 's/^/efivarfs: /'
        ls /sys/firmware/efi/efivars | wc -l | sed 's/^/efivars: /'
}
