# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# A Secure Boot host (lab.conf: OVMF, the test key in db), old kernel, no VMs. The
# kernel locked itself down (integrity) because Secure Boot is on. The daemon must
# name the platform (uefi, Secure Boot enabled, lockdown integrity), fall back to
# kexec_file_load and say why (Describe, status). Then two stages:
#  1. Debian's own 6.1.0-57 (/boot): its signature chains to the Debian Secure Boot
#     CA, which no keyring of this host holds (no shim, so no MOK list): the kernel
#     refuses it, and stage names that refusal (InvalidImage, lockdown, signature)
#     and changes nothing: no image loaded, no update record, the daemon idle;
#  2. the same kernel signed with the test key (/lab-payload/signed, copied to
#     /boot): the platform keyring holds db, so it loads, with the panic image;
#     the dry run says verified and why there is no fast handoff. Then the update.
. /lab-payload/scenarios/lib.sh

SIGNED=/boot/vmlinuz-$LAB_KERNEL_NEW.signed

ok=true
upgradectl --json status >"$LAB_RESULTS/describe-old.json" 2>&1 || ok=false
upgradectl status >"$LAB_RESULTS/status-old.txt" 2>&1 || ok=false
journalctl -k -b 0 --no-pager >"$LAB_RESULTS/kmsg-old.txt" 2>&1
lab_check lockdown-integrity grep -q '\[integrity\]' /sys/kernel/security/lockdown || ok=false
lab_check kernel-says-secure-boot grep -q 'Secure boot enabled' "$LAB_RESULTS/kmsg-old.txt" ||
        ok=false
lab_check describe-lockdown grep -Eq '"lockdown": ?"integrity"' "$LAB_RESULTS/describe-old.json" ||
        ok=false
lab_check describe-secure-boot grep -Eq '"secure_boot": ?"enabled"' \
        "$LAB_RESULTS/describe-old.json" || ok=false
lab_check backend-kexec-file sh -c "upgradectl show -p Backend --value | grep -qx kexec_file" ||
        ok=false
lab_check status-says-fallback grep -q 'fallback: .*lockdown' "$LAB_RESULTS/status-old.txt" ||
        ok=false
lab_check status-says-platform grep -q 'Platform: uefi, Secure Boot enabled, lockdown integrity' \
        "$LAB_RESULTS/status-old.txt" || ok=false

# 1. Debian's signature: refused, nothing changed.
rc=0
upgradectl stage "/boot/vmlinuz-$LAB_KERNEL_NEW" --initrd "/boot/initrd.img-$LAB_KERNEL_NEW" \
        --reuse-cmdline >"$LAB_RESULTS/stage-debian-signed.txt" 2>&1 || rc=$?
lab_check stage-refused test "$rc" != 0 || ok=false
lab_check stage-names-signature grep -q 'InvalidImage' "$LAB_RESULTS/stage-debian-signed.txt" ||
        ok=false
lab_check stage-names-lockdown grep -q 'lockdown (integrity)' \
        "$LAB_RESULTS/stage-debian-signed.txt" || ok=false
# With Secure Boot the arch policy enforces the check (ENOKEY); lockdown alone says EPERM.
lab_check kernel-says-unverified sh -c 'journalctl -k -b 0 --no-pager |
        grep -Eq "Enforced kernel signature verification failed|kexec of unsigned images"' ||
        ok=false
lab_check stage-names-secure-boot grep -q 'and Secure Boot, it loads only kernels' \
        "$LAB_RESULTS/stage-debian-signed.txt" || ok=false
lab_check nothing-loaded grep -qx 0 /sys/kernel/kexec_loaded || ok=false
lab_check no-panic-image grep -qx 0 /sys/kernel/kexec_crash_loaded || ok=false
lab_check daemon-idle sh -c 'upgradectl show -p State --value | grep -qx idle' || ok=false
lab_check no-update-record sh -c '! compgen -G "/var/lib/upgraded/updates/*.json" >/dev/null' ||
        ok=false

# 2. The test key's signature: loaded, then the update.
install -m 0644 "/lab-payload/signed/vmlinuz-$LAB_KERNEL_NEW" "$SIGNED"
rc=0
upgradectl stage "$SIGNED" --initrd "/boot/initrd.img-$LAB_KERNEL_NEW" \
        --reuse-cmdline >"$LAB_RESULTS/stage.txt" 2>&1 || rc=$?
lab_check stage-signed-ok test "$rc" = 0 || ok=false
lab_check image-loaded grep -qx 1 /sys/kernel/kexec_loaded || ok=false
lab_check panic-image-loaded grep -qx 1 /sys/kernel/kexec_crash_loaded || ok=false
upgradectl commit --dry-run >"$LAB_RESULTS/commit-dry-run.txt" 2>&1 || ok=false
lab_check dry-run-verified grep -qx 'Handoff: verified' "$LAB_RESULTS/commit-dry-run.txt" || ok=false
lab_check dry-run-no-fast grep -q 'kexec_file always verifies: no fast handoff and no purgatory stamps' \
        "$LAB_RESULTS/commit-dry-run.txt" || ok=false
if ! $ok; then
        lab_finish fail lockdown-old-checks-failed
        exit 1
fi
lab_marker old-kernel-kexec method=upgraded-kexec-file-secure-boot
upgradectl commit --wait >"$LAB_RESULTS/commit.txt" 2>&1 || true
