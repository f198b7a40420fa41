# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# memguest, old kernel: one nested VM with LAB_MEM_MIB MiB of RAM, more than 512 MiB of it
# filled with data that the guest verifies itself (vm-guest/memguest.S, docs/vms.md), goes
# through upgraded's checkpoint like the upgrade scenario's counter VMs. The fill and the
# verify under nested TCG are timed (markers mem-fill, mem-verify: guest ticks and seconds).
. /lab-payload/scenarios/lib.sh

LAB_MEM_MIB=640
fail() { lab_finish fail "$1"; exit 1; }

systemctl is-enabled -q upgraded.service || fail upgraded-not-enabled
lab_start_mem_vm lab-mem-1 "$LAB_MEM_MIB" || fail mem-vm-start-failed
t0=$SECONDS
lab_check mem-filled mg_wait_filled lab-mem-1 1200 || fail mem-fill-failed
mg_status lab-mem-1 || fail mem-status-unreadable
lab_marker mem-fill lab-mem-1 mib="$MG_MIB" sum="$MG_SUM" ticks="$MG_FILL_TICKS" \
        guest_s="$(mg_seconds "$MG_FILL_TICKS")" wall_s=$((SECONDS - t0))
echo "$MG_SUM" >"$LAB_STATE/mem-sum"
lab_check mem-512-mib test "$MG_MIB" -ge 512 || fail mem-too-small
lab_check mem-verify-old lab_mem_verify lab-mem-1 || fail mem-verify-failed
lab_marker counter-before lab-mem-1 "$(lab_counter lab-mem-1)"

upgradectl stage "/boot/vmlinuz-$LAB_KERNEL_NEW" --initrd "/boot/initrd.img-$LAB_KERNEL_NEW" \
        --reuse-cmdline >"$LAB_RESULTS/stage.txt" 2>&1 || fail stage-failed
lab_marker old-kernel-kexec method=upgraded
# --wait follows the commit until the daemon hands the host to systemd.
upgradectl commit --wait >"$LAB_RESULTS/commit.txt" 2>&1 || true
