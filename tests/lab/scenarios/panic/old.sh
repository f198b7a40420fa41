# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# upgraded, old kernel, panic path: booted with crashkernel= and memmap=
# (cmdline-extra). The test build upgraded-test-panic-hold (meson
# -Dtest-panic-hold=true) runs the service on a host prepared for keep-ram
# (keep-ram/common.sh: DAX memory_backing_dir, hook, DefaultStrategy=keep-ram):
# two memguest VMs keep their RAM there, a plain counter VM falls back to
# checkpoint. Stage loads the verified crash image, commit saves both VMs and
# then holds before the handoff record. The scenario crashes the kernel right
# there (sysrq c). The crash kernel (the staged kernel, upgraded.panic=1) must
# kexec into the staged kernel (new.sh), keeping out of the kept RAM.
. /lab-payload/scenarios/lib.sh
. /lab-payload/scenarios/keep-ram/common.sh
. /lab-payload/scenarios/panic/kdump.sh
set -e

PANIC_MEMS="lab-mem-1 lab-mem-2" # memguests, PANIC_MEM_MIB of shared file-backed RAM: keep-ram
PANIC_MEM_MIB=96
PANIC_PLAIN=lab-counter-1 # ordinary RAM: checkpoint (fallback)

HOLD_BIN=/usr/local/lib/upgraded-lab/upgraded-test-panic-hold
HOLD_READY=/run/upgraded/test-panic-hold.ready

lab_check test-binary-not-installed sh -c "! grep -q upgraded-test-panic-hold \
        '$LAB_RESULTS/installed-files.txt'"
lab_check crash-reserved sh -c '[ "$(cat /sys/kernel/kexec_crash_size)" -gt 0 ]'
# Not below /run: Debian's initramfs mounts it noexec. The drop-in that uses it
# is in /run, so the crash kernel and the final kernel run the installed daemon.
install -D -m 0755 "$LAB_TEST_BINARY" "$HOLD_BIN"
mkdir -p /run/systemd/system/upgraded.service.d
cat >/run/systemd/system/upgraded.service.d/50-lab-panic-hold.conf <<CONF
[Service]
ExecStart=
ExecStart=$HOLD_BIN
CONF
systemctl daemon-reload
systemctl restart upgraded.service
upgraded --check-config
kr_prepare_host || { lab_finish fail "$KR_FAILED"; exit 1; }
kd_old_kernel || { lab_finish fail kdump-checks-failed; exit 1; }

for vm in $PANIC_MEMS; do
        lab_start_mem_vm "$vm" "$PANIC_MEM_MIB" domain-shared.xml
done
lab_start_counter_vm "$PANIC_PLAIN"
for vm in $PANIC_MEMS; do
        lab_check "mem-filled-$vm" mg_wait_filled "$vm" 900
        mg_status "$vm"
        echo "$MG_SUM" >"$LAB_STATE/$vm.mem-sum"
        lab_marker mem-fill "$vm" mib="$MG_MIB" sum="$MG_SUM"
        lab_check "ram-file-on-dax-$vm" kr_ram_file_on_dax "$vm" "$PANIC_MEM_MIB"
        stat -c %i "$(kr_ram_file "$vm")" >"$LAB_STATE/$vm.ram-inode"
done
lab_wait_counters 60 180
kd_rollback || { lab_finish fail kdump-checks-failed; exit 1; }
for vm in $(lab_counter_vms); do
        lab_marker counter-before "$vm" "$(lab_counter "$vm")"
done

upgradectl stage "/boot/vmlinuz-$LAB_KERNEL_NEW" --initrd "/boot/initrd.img-$LAB_KERNEL_NEW" \
        --reuse-cmdline >"$LAB_RESULTS/stage.txt" 2>&1
upgradectl status >"$LAB_RESULTS/status-staged.txt" 2>&1 || true
lab_check crash-image-loaded sh -c '[ "$(cat /sys/kernel/kexec_crash_loaded)" = 1 ]'
id=$(kd_staged_id "$LAB_RESULTS/stage.txt")
journalctl --no-pager -o short-monotonic -b 0 -u 'upgraded-kdump-initrd@*' \
        >"$LAB_RESULTS/journal-kdump-initrd.txt" 2>&1 || true
lab_check kdump-initrd-ahead kd_initrd_ahead "$id"

# The commit never returns: the daemon holds, then the kernel dies.
upgradectl commit --wait >"$LAB_RESULTS/commit.txt" 2>&1 &
for ((i = 0; i < 600; i++)); do
        [ -e "$HOLD_READY" ] && break
        sleep 0.5
done
lab_check daemon-holds test -e "$HOLD_READY"
# Every VM saved (the keep-ram one: its device state): shut off with a managed save image.
for vm in $(lab_counter_vms); do
        lab_check "saved-$vm" sh -c "virsh -q dominfo '$vm' | grep -Eq '^Managed save: +yes'"
done
upgradectl status >"$LAB_RESULTS/status-hold.txt" 2>&1 || true
cp /var/lib/upgraded/updates/*.json "$LAB_RESULTS/" 2>/dev/null || true
journalctl --no-pager -o short-monotonic -b 0 >"$LAB_RESULTS/journal-old-before-crash.txt" 2>&1 || true
sync
# On the boot CPU, always: where a panic comes decides whether the staged kernel may start
# every CPU. After a panic on the second CPU the boot CPU stays parked in the dead kernel
# (docs/loader.md, "The boot CPU"); the lab saw that host complete the update on one CPU and
# then reset 70-100 s later in three runs of four, which no verdict can call a pass.
lab_marker old-kernel-crash method=sysrq-c cpu=0
echo 1 >/proc/sys/kernel/sysrq
taskset -c 0 sh -c 'echo c >/proc/sysrq-trigger'
