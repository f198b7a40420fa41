# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# keep-ram, old kernel: the host booted with memmap=2G!5G (cmdline-extra) gets a
# DAX ext4 on /dev/pmem0 for libvirt's memory_backing_dir (fstab, so the new kernel
# mounts it too), a file of random data on it, and two counter VMs with 512 MiB of
# shared file-backed RAM there. upgradectl stage gets a --cmdline without the memmap=
# word: stage must carry it over, and its kept-memory facts must say the host is
# ready. The VMs go through checkpoint (keep-ram-vms takes them through keep-ram).
. /lab-payload/scenarios/lib.sh
. /lab-payload/scenarios/keep-ram/common.sh
set -e

fail() { lab_finish fail "$1"; exit 1; }

systemctl is-enabled -q upgraded.service || fail upgraded-not-enabled
lab_check region-present kr_region || fail no-pmem-region
lab_check pmem-device kr_pmem_device || fail no-pmem-device
# The drivers at every boot, before fstab's mount of the region (docs/vms.md).
printf 'nd_e820\nnd_pmem\n' >/etc/modules-load.d/keep-ram.conf
mkfs.ext4 -q -F -b 4096 /dev/pmem0 || fail mkfs-failed
mkdir -p "$KR_DIR"
echo "/dev/pmem0 $KR_DIR ext4 dax,nofail,x-systemd.before=libvirtd.service,x-systemd.required-by=libvirtd.service 0 0" >>/etc/fstab
systemctl daemon-reload
mount "$KR_DIR" || fail mount-failed
lab_check dax-mounted kr_dax_mounted || fail not-dax
# memory_backing_dir named explicitly, as the recipe says (docs/vms.md). libvirt puts RAM
# files in <dir>/libvirt/qemu/<id>-<name>/ only for an explicit setting (its default puts
# them in <dir>/<id>-<name>/), and reads qemu.conf at its start: restart it before any VM
# runs, and the sampler, whose long-lived virsh would hold a dead connection.
echo "memory_backing_dir = \"$KR_DIR\"" >>/etc/libvirt/qemu.conf
systemctl restart libvirtd.service || fail libvirtd-restart-failed
systemctl restart lab-sampler.service || true
lab_check libvirtd-answers virsh -q list --all
kr_capture old

t0=$SECONDS
dd if=/dev/urandom of="$KR_FILE" bs=1M count=256 status=none conv=fsync || fail write-failed
sha256sum "$KR_FILE" | cut -d' ' -f1 >"$KR_SUM"
lab_marker keep-ram-file written mib=256 sha256="$(cat "$KR_SUM")" wall_s=$((SECONDS - t0))

kr_start_vm lab-counter-1 512 || fail vm-start-failed
kr_start_vm lab-counter-2 512 || fail vm-start-failed
lab_wait_counters 60 300 || fail counters-not-running
for vm in $(lab_counter_vms); do
        lab_check "ram-file-on-dax-$vm" kr_ram_file_on_dax "$vm" 512 || fail ram-file-not-on-dax
        lab_marker counter-before "$vm" "$(lab_counter "$vm")"
done
ls -lR "$KR_DIR" >"$LAB_RESULTS/keep-ram-dir-old.txt" 2>&1 || true

# The operator's line without memmap=: stage carries it over.
cmdline=$(tr ' ' '\n' </proc/cmdline | grep -v -e '^memmap=' -e '^BOOT_IMAGE=' | tr '\n' ' ')
upgradectl stage "/boot/vmlinuz-$LAB_KERNEL_NEW" --initrd "/boot/initrd.img-$LAB_KERNEL_NEW" \
        --cmdline "${cmdline% }" >"$LAB_RESULTS/stage.txt" 2>&1 || fail stage-failed
upgradectl status --json >"$LAB_RESULTS/status-staged.json" 2>&1 || true
cp /var/lib/upgraded/updates/*.json "$LAB_RESULTS/" 2>/dev/null || true
record=$(ls -t /var/lib/upgraded/updates/*.json | head -1)
lab_check staged-cmdline-carried grep -q "\"cmdline\": *\"[^\"]*$KR_MEMMAP" "$record" ||
        fail memmap-not-carried
lab_check kept-memory-ready grep -q '"kept-memory-ready"' "$record" || fail kept-memory-not-ready
lab_check kept-memory-carried-said grep -q '"kept-memory-cmdline-carried"' "$record" ||
        fail carry-not-said
upgradectl commit --dry-run --json >"$LAB_RESULTS/commit-dry-run.json" 2>&1 || true
lab_marker old-kernel-kexec method=upgraded
upgradectl commit --wait >"$LAB_RESULTS/commit.txt" 2>&1 || true
