# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# upgraded's own loader, fast handoff, old kernel. The lab host runs with an
# IOMMU (lab.conf), so the policy's own facts see DMA remapping; its kernel
# (Debian's cloud flavour) has neither machine-check nor EDAC support, so
# those health facts stay unknown. Mode=auto refuses fast for that; the drop-in
# (lab_policy_fast) is what an operator writes for such a host: Mode=fast with
# AllowFast=yes, where unknown health facts are warnings and everything known
# (IOMMU, taint, files, memory map) must still hold. The dry run must say fast.
. /lab-payload/scenarios/lib.sh
set -e

ls /sys/class/iommu >"$LAB_RESULTS/iommu.txt" 2>&1 || true
# The policy wants every group translating (DMA, DMA-FQ), not passthrough (identity).
grep -H . /sys/kernel/iommu_groups/*/type >"$LAB_RESULTS/iommu-groups.txt" 2>&1 || true
lab_check iommu-registered test -n "$(ls /sys/class/iommu)"
lab_policy_fast
lab_check backend-kexec-load sh -c "upgradectl show -p Backend --value | grep -qx kexec_load"
upgradectl stage "/boot/vmlinuz-$LAB_KERNEL_NEW" --initrd "/boot/initrd.img-$LAB_KERNEL_NEW" \
        --reuse-cmdline >"$LAB_RESULTS/stage.txt" 2>&1
lab_check image-loaded grep -qx 1 /sys/kernel/kexec_loaded
upgradectl commit --dry-run >"$LAB_RESULTS/commit-dry-run.txt" 2>&1 || true
lab_check dry-run-fast grep -qx 'Handoff: fast' "$LAB_RESULTS/commit-dry-run.txt"
lab_marker old-kernel-kexec method=upgraded-loader-fast
upgradectl commit --wait >"$LAB_RESULTS/commit.txt" 2>&1 || true
