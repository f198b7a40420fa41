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

# The same files copied into a directory tree under $1 (a root the loader's unit
# tests read through loader_options.root): what a kexec loader reads on this host.
lab_efi_tree() {
        local dest=$1 f
        for f in $(find /sys/firmware/efi/runtime-map /sys/firmware/memmap -type f) \
                /sys/firmware/efi/systab /sys/firmware/efi/fw_platform_size \
                /sys/firmware/efi/fw_vendor /sys/firmware/efi/runtime \
                /sys/firmware/efi/config_table /sys/kernel/boot_params/data \
                /sys/kernel/boot_params/version /proc/iomem; do
                [ -r "$f" ] || continue
                mkdir -p "$dest$(dirname "$f")"
                cat "$f" >"$dest$f"
        done
        mkdir -p "$dest/sys/firmware/efi/efivars" "$dest/sys/kernel/security"
        cat "$LAB_EFI_SECURE_BOOT" >"$dest$LAB_EFI_SECURE_BOOT" 2>/dev/null
        cat /sys/kernel/security/lockdown >"$dest/sys/kernel/security/lockdown" 2>/dev/null
        tar -C "$dest" -czf "$dest.tar.gz" . && rm -rf "$dest"
}

# The runtime regions as "phys virt pages type attribute" lines, sorted: the set a
# kexec'd kernel must see again (its indices may differ).
lab_efi_runtime_regions() {
        local d
        for d in /sys/firmware/efi/runtime-map/*/; do
                echo "$(cat "$d/phys_addr") $(cat "$d/virt_addr") $(cat "$d/num_pages")" \
                        "$(cat "$d/type") $(cat "$d/attribute")"
        done | sort
}
