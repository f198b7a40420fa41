# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# upgraded's own loader, verified handoff, old kernel: no VMs (the upgrade
# scenario covers them), so the run stays short. A ramoops area (cmdline-extra)
# keeps the old kernel's shutdown dump for the report's relocation slice. The lab host boots with
# SeaBIOS and without lockdown, so the daemon must pick the kexec_load backend
# (our loader + purgatory) and say so; purgatory checks every segment.
. /lab-payload/scenarios/lib.sh
set -e

# ramoops now (the shutdown dump) and on the new kernel's boot (its pstore shows the dump).
echo ramoops >/etc/modules-load.d/lab-ramoops.conf
lab_check ramoops-loaded modprobe ramoops
lab_check ramoops-area sh -c "dmesg | grep -q 'ramoops: using 0x100000@0x40000000'"
upgradectl --json status >"$LAB_RESULTS/describe-old.json" 2>&1 || true
lab_check backend-kexec-load sh -c "upgradectl show -p Backend --value | grep -qx kexec_load"
upgradectl stage "/boot/vmlinuz-$LAB_KERNEL_NEW" --initrd "/boot/initrd.img-$LAB_KERNEL_NEW" \
        --reuse-cmdline >"$LAB_RESULTS/stage.txt" 2>&1
lab_check image-loaded grep -qx 1 /sys/kernel/kexec_loaded
cat /sys/kernel/kexec_crash_size >"$LAB_RESULTS/kexec-crash-size.txt" 2>&1 || true
lab_marker old-kernel-kexec method=upgraded-loader-verified
upgradectl commit --wait >"$LAB_RESULTS/commit.txt" 2>&1 || true
