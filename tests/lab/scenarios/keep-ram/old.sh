# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# keep-ram, old kernel: the host booted with memmap=2G!5G (cmdline-extra) is prepared as
# docs/vms.md says (common.sh, kr_prepare_host: DAX ext4 on /dev/pmem0 as libvirt's
# memory_backing_dir, the hook, `[VM] DefaultStrategy=keep-ram`; the shipped unit, QEMU as
# Debian's libvirt-qemu), with 256 MiB of random data on it, and `[Handoff] Shutdown=fast`.
# Three VMs: two memguests with KV_MEM_MIB MiB of shared file-backed RAM there, filled and
# verified by the guests themselves, and a 16 MiB counter VM with ordinary RAM, which
# cannot keep it and falls back to checkpoint (a mixed host). upgradectl stage gets a
# --cmdline without the memmap= word: stage must carry it over, and its kept-memory facts
# must say the host is ready. Then the plan, and the commit.
. /lab-payload/scenarios/lib.sh
. /lab-payload/scenarios/keep-ram/common.sh
set -e

fail() { lab_finish fail "$1"; exit 1; }

kv_qemu_user() {
        local pid
        pid=$(pgrep -f "guest=$1," | head -n 1)
        [ -n "$pid" ] && ps -o user= -p "$pid" | tr -d ' '
}

systemctl is-enabled -q upgraded.service || fail upgraded-not-enabled
# The fast shutdown (docs/policy.md): every VM here is saved or kept, the journal persistent,
# so systemd is asked for KExec() with no orderly stop (kr_prepare_host restarts upgraded).
mkdir -p /etc/upgraded/upgraded.conf.d
printf '[Handoff]\nShutdown=fast\n' >/etc/upgraded/upgraded.conf.d/60-lab-shutdown.conf
kr_prepare_host || fail "$KR_FAILED"
kr_capture old

t0=$SECONDS
dd if=/dev/urandom of="$KR_FILE" bs=1M count=256 status=none conv=fsync || fail write-failed
sha256sum "$KR_FILE" | cut -d' ' -f1 >"$KR_SUM"
lab_marker keep-ram-file written mib=256 sha256="$(cat "$KR_SUM")" wall_s=$((SECONDS - t0))

# The memguests fill in parallel (the lab host has two vCPUs).
t0=$SECONDS
for vm in $KV_MEMS; do
        lab_start_mem_vm "$vm" "$KV_MEM_MIB" domain-shared.xml || fail mem-vm-start-failed
done
lab_start_counter_vm "$KV_PLAIN" || fail vm-start-failed
for vm in $KV_MEMS; do
        lab_check "mem-filled-$vm" mg_wait_filled "$vm" 1500 || fail mem-fill-failed
        mg_status "$vm" || fail mem-status-unreadable
        lab_marker mem-fill "$vm" mib="$MG_MIB" sum="$MG_SUM" ticks="$MG_FILL_TICKS" \
                guest_s="$(mg_seconds "$MG_FILL_TICKS")" wall_s=$((SECONDS - t0))
        echo "$MG_SUM" >"$LAB_STATE/$vm.mem-sum"
        lab_check "mem-data-$vm" test "$MG_MIB" -ge 512 || fail mem-too-small
        lab_check "mem-verify-old-$vm" lab_mem_verify "$vm" || fail mem-verify-failed
        lab_check "ram-file-on-dax-$vm" kr_ram_file_on_dax "$vm" "$KV_MEM_MIB" || fail ram-file-not-on-dax
        # The new kernel's RAM file must be this very file (the hook links it back).
        stat -c %i "$(kr_ram_file "$vm")" >"$LAB_STATE/$vm.ram-inode"
        lab_marker ram-file "$vm" inode="$(cat "$LAB_STATE/$vm.ram-inode")" \
                owner="$(stat -c %U "$(kr_ram_file "$vm")")" qemu_user="$(kv_qemu_user "$vm")"
done
lab_wait_counters 60 300 || fail counters-not-running
for vm in $(lab_counter_vms); do
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
# The plan: keep-ram for every VM (the plain one falls back only at the save), nothing
# refused (a refused plan would not commit and the runner would wait for a kexec that
# never comes).
upgradectl commit --dry-run --json >"$LAB_RESULTS/commit-dry-run.json" 2>&1 || true
upgradectl commit --dry-run >"$LAB_RESULTS/commit-dry-run.txt" 2>&1 || true
n=$(grep -Eo '"strategy": ?"keep-ram"' "$LAB_RESULTS/commit-dry-run.json" | wc -l)
lab_marker plan keep_ram_vms="$n"
lab_check plan-not-refused sh -c "! grep -Eq '\"refused\": ?true' '$LAB_RESULTS/commit-dry-run.json'" ||
        fail plan-refused
lab_check plan-keep-ram test "$n" -ge 2 || fail plan-not-keep-ram
lab_marker old-kernel-kexec method=upgraded
# A commit that failed and rolled back ends the run here (the runner would wait for a kexec
# until its timeout); on the way to the kexec upgradectl never prints this line.
if ! upgradectl commit --wait >"$LAB_RESULTS/commit.txt" 2>&1; then
        if grep -q '^Update failed' "$LAB_RESULTS/commit.txt"; then fail commit-failed; fi
fi
