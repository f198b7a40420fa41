# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# kdump-tools next to upgraded (docs/loader.md), checked by the panic scenario, the one lab
# boot with a crashkernel= reservation. The image has kdump-tools installed and disabled.
#   kd_old_kernel   old kernel, before the update: kdump loads its crash image; a staged
#                   update replaces it and marks the slot; kdump-tools' stop leaves ours
#                   alone; cancel gives kdump its image back (the daemon has systemd restart
#                   kdump-tools.service)
#   kd_rollback     old kernel, the VMs running: a commit that fails (libvirt's save directory
#                   made immutable) rolls back, and the rollback gives kdump its image back
#                   as cancel does; the VMs run on
#   kd_initrd_ahead old kernel, the real stage: its record says kdump's initrd for the staged
#                   kernel is current (built at stage by upgraded-kdump-initrd@.service)
#   kd_crash_boot   staged kernel after the panic path: kdump-tools did not start on the
#                   crash kernel (it would have saved a dump and rebooted), built no initrd
#                   on this boot, and loaded its crash image again
KD_MARK=/run/upgraded/crash-image

# The update id `upgradectl stage` printed into file $1 (not the newest record: a stage's
# kdump-initrd job rewrites an earlier update's record when it finishes).
kd_staged_id() { grep -Eom1 '^[0-9a-f]{16}$' "$1"; }

kd_crash_loaded() { [ "$(cat /sys/kernel/kexec_crash_loaded)" = 1 ]; }
kd_ready() { kd_crash_loaded && kdump-config status | grep -q 'ready to kdump'; }

# The record of update $1 says kdump's image was loaded again (waits: cancel's job does it).
kd_record_restored() {
        local rec=/var/lib/upgraded/updates/$1.json
        for _ in $(seq 240); do
                grep -Eq "\"crash_image_restore\": ?\"reloaded by 'systemctl restart kdump-tools.service'\"" \
                        "$rec" 2>/dev/null && return 0
                sleep 0.5
        done
        cat "$rec" >&2
        return 1
}

# kdump-tools.service is active, once it has left "activating" (a bounded wait). On a
# kernel's first boot its start builds kdump's initrd first, 60-175 s under TCG: kdump-config
# deletes and rebuilds the initrd whenever /var/lib/kdump/latest_sysctls-<kernel> is missing,
# which it is on every kernel's first boot (check_sysctl_change).
kd_active() {
        local i
        for ((i = 0; i < 600; i++)); do
                [ "$(systemctl is-active kdump-tools.service)" = activating ] || break
                sleep 0.5
        done
        systemctl is-active -q kdump-tools.service
}

# The record of update $1 says kdump's initrd for the staged kernel is current: waits for the
# stage's kdump-initrd job (mkinitramfs, minutes under TCG), then wants "current already" or
# "built ahead" (docs/loader.md).
kd_initrd_ahead() {
        local rec=/var/lib/upgraded/updates/$1.json
        for _ in $(seq 1200); do
                grep -Eq '"kdump_initrd": ?"' "$rec" 2>/dev/null && break
                sleep 0.5
        done
        grep -Eo '"kdump_initrd": ?"[^"]*"' "$rec" >"$LAB_RESULTS/kdump-initrd.txt" 2>&1
        grep -Eq '"kdump_initrd": ?"(current already|built ahead)' "$rec"
}

kd_old_kernel() {
        local id
        systemctl enable -q kdump-tools.service
        lab_check kdump-started systemctl start kdump-tools.service || return 1
        lab_check kdump-ready kd_ready || return 1
        upgradectl stage "/boot/vmlinuz-$LAB_KERNEL_NEW" --initrd "/boot/initrd.img-$LAB_KERNEL_NEW" \
                --reuse-cmdline >"$LAB_RESULTS/kdump-stage.txt" 2>&1 || return 1
        id=$(kd_staged_id "$LAB_RESULTS/kdump-stage.txt")
        lab_check kdump-replaced-and-marked sh -c "[ \"\$(cat $KD_MARK)\" = '$id' ] &&
                [ \"\$(cat /sys/kernel/kexec_crash_loaded)\" = 1 ]" || return 1
        lab_check kdump-before-recorded grep -Eq '"crash_image_before": ?"kdump-tools"' \
                "/var/lib/upgraded/updates/$id.json" || return 1
        # kdump-tools' stop, as at the handoff's orderly shutdown: our image stays.
        systemctl stop kdump-tools.service
        lab_check kdump-stop-keeps-ours kd_crash_loaded || return 1
        lab_check kdump-stop-said-so sh -c "journalctl -b -u kdump-tools.service --no-pager |
                grep -q 'panic image of upgraded update $id: left loaded'" || return 1
        upgradectl cancel "$id" >"$LAB_RESULTS/kdump-cancel.txt" 2>&1 || return 1
        lab_check kdump-restored-by-cancel kd_record_restored "$id" || return 1
        lab_check kdump-ready-after-cancel kd_ready || return 1
        lab_check kdump-mark-gone test ! -e "$KD_MARK"
}

kd_rollback() {
        local id rc=0 save=/var/lib/libvirt/qemu/save vm
        upgradectl stage "/boot/vmlinuz-$LAB_KERNEL_NEW" --initrd "/boot/initrd.img-$LAB_KERNEL_NEW" \
                --reuse-cmdline >"$LAB_RESULTS/kdump-stage-failing.txt" 2>&1 || return 1
        id=$(kd_staged_id "$LAB_RESULTS/kdump-stage-failing.txt")
        lab_check kdump-replaced-before-rollback sh -c "[ \"\$(cat $KD_MARK)\" = '$id' ]" || return 1
        mkdir -p "$save"
        chattr +i "$save" || return 1
        # Expected to fail: `|| rc=$?` keeps the caller's set -e from ending the scenario here.
        upgradectl commit --wait >"$LAB_RESULTS/kdump-commit-failing.txt" 2>&1 || rc=$?
        chattr -i "$save"
        echo "exit=$rc" >>"$LAB_RESULTS/kdump-commit-failing.txt"
        lab_check kdump-failing-commit-failed sh -c "[ $rc -ne 0 ] && grep -Eq '\"state\": ?\"failed\"' \
                /var/lib/upgraded/updates/$id.json" || return 1
        lab_check kdump-restored-by-rollback kd_record_restored "$id" || return 1
        lab_check kdump-ready-after-rollback kd_ready || return 1
        lab_check kdump-mark-gone-after-rollback test ! -e "$KD_MARK" || return 1
        for vm in $(lab_counter_vms); do
                lab_check "running-after-rollback-$vm" sh -c "[ \"\$(virsh -q domstate '$vm')\" = running ]" ||
                        return 1
        done
}

# systemd's "skipped because of an unmet condition" entry for kdump-tools in the crash
# kernel's boot (-1). One fresh-clone run found it missing although the journal collected
# later held it: ask again for up to 10 s, and keep what the last query saw.
kd_skipped_on_crash_kernel() {
        local _
        for _ in $(seq 20); do
                journalctl -b -1 -u kdump-tools.service --no-pager \
                        >"$LAB_RESULTS/kdump-crash-boot-query.txt" 2>&1
                grep -q 'ConditionKernelCommandLine=!upgraded.panic=1' \
                        "$LAB_RESULTS/kdump-crash-boot-query.txt" && return 0
                sleep 0.5
        done
        journalctl --list-boots --no-pager >>"$LAB_RESULTS/kdump-crash-boot-query.txt" 2>&1
        return 1
}

kd_crash_boot() {
        local ok=0
        lab_check kdump-skipped-on-crash-kernel kd_skipped_on_crash_kernel || ok=1
        # kdump saves each dump in a directory of its own under /var/crash (its kexec_cmd and
        # kdump_lock files lie beside them).
        ls -la /var/crash >"$LAB_RESULTS/var-crash-new.txt" 2>&1
        lab_check kdump-no-dump-saved sh -c '[ -z "$(find /var/crash -mindepth 1 -type d 2>/dev/null)" ]' || ok=1
        # kdump-config found the initrd the stage built current: no mkinitramfs before basic.target.
        lab_check kdump-no-initrd-build sh -c "! journalctl -b -u kdump-tools.service --no-pager |
                grep -q 'Generating /var/lib/kdump/initrd.img'" || ok=1
        lab_check kdump-active-again kd_active || ok=1
        lab_check kdump-ready-again kd_ready || ok=1
        kdump-config status >"$LAB_RESULTS/kdump-status-new.txt" 2>&1
        return $ok
}
