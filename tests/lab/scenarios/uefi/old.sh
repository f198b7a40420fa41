# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# A UEFI-booted host (OVMF, lab.conf), old kernel, no VMs: the daemon names the
# platform (uefi, Secure Boot disabled, no lockdown) and uses its own loader,
# which hands the next kernel the EFI state (loader/efi.h): the normal image and
# the panic image are loaded through kexec_load. The host has an IOMMU (lab.conf),
# which the policy's own facts see as DMA remapping; its kernel (Debian's cloud
# flavour) has neither machine-check nor EDAC support, so Mode=auto refuses fast,
# and the drop-in (lab_policy_fast) is what an operator writes for such a host:
# Mode=fast with AllowFast=yes. The dry run says fast. This boot is also the lab's
# proof of the fast handoff. The EFI facts the loader reads are kept as a fixture
# (efi-old.txt, efi-old.tar.gz: tests/fixtures/efi-ovmf).
. /lab-payload/scenarios/lib.sh
. /lab-payload/scenarios/uefi/efi-facts.sh

ok=true
lab_efi_facts >"$LAB_RESULTS/efi-old.txt" 2>&1
lab_efi_tree "$LAB_RESULTS/efi-old"
lab_efi_runtime_regions >"$LAB_RESULTS/efi-runtime-old.txt"
upgradectl --json status >"$LAB_RESULTS/describe-old.json" 2>&1 || ok=false
upgradectl status >"$LAB_RESULTS/status-old.txt" 2>&1 || ok=false
lab_check efi-booted test -d /sys/firmware/efi || ok=false
lab_check runtime-map test -d /sys/firmware/efi/runtime-map/0 || ok=false
lab_check describe-uefi grep -Eq '"firmware": ?"uefi"' "$LAB_RESULTS/describe-old.json" || ok=false
lab_check describe-secure-boot-disabled grep -Eq '"secure_boot": ?"disabled"' \
        "$LAB_RESULTS/describe-old.json" || ok=false
lab_check describe-no-lockdown grep -Eq '"lockdown": ?"none"' "$LAB_RESULTS/describe-old.json" ||
        ok=false
ls /sys/class/iommu >"$LAB_RESULTS/iommu.txt" 2>&1 || true
grep -H . /sys/kernel/iommu_groups/*/type >"$LAB_RESULTS/iommu-groups.txt" 2>&1 || true
lab_check iommu-registered test -n "$(ls /sys/class/iommu)" || ok=false
lab_policy_fast
lab_check backend-kexec-load sh -c "upgradectl show -p Backend --value | grep -qx kexec_load" ||
        ok=false
lab_check status-no-fallback sh -c '! grep -q "fallback:" "$LAB_RESULTS/status-old.txt"' ||
        ok=false
rc=0
upgradectl stage "/boot/vmlinuz-$LAB_KERNEL_NEW" --initrd "/boot/initrd.img-$LAB_KERNEL_NEW" \
        --reuse-cmdline >"$LAB_RESULTS/stage.txt" 2>&1 || rc=$?
lab_check stage-ok test "$rc" = 0 || ok=false
lab_check image-loaded grep -qx 1 /sys/kernel/kexec_loaded || ok=false
# The panic image, through our loader too (crashkernel=, cmdline-extra).
lab_check panic-image-loaded grep -qx 1 /sys/kernel/kexec_crash_loaded || ok=false
upgradectl commit --dry-run >"$LAB_RESULTS/commit-dry-run.txt" 2>&1 || ok=false
lab_check dry-run-fast grep -qx 'Handoff: fast' "$LAB_RESULTS/commit-dry-run.txt" || ok=false
if ! $ok; then
        lab_finish fail uefi-old-checks-failed
        exit 1
fi
lab_marker old-kernel-kexec method=upgraded-loader-fast-uefi
upgradectl commit --wait >"$LAB_RESULTS/commit.txt" 2>&1 || true
