# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# The journal events an update run without trouble never causes (docs/journal.md), caused on
# purpose on the old kernel before the real update, each found by its MESSAGE_ID (and the
# update's UPGRADED_ID) in this boot's journal:
#   je_reload_at_rest   `systemctl reload upgraded` re-reads the policy: "reloaded"; with a
#                       broken drop-in it is refused, the policy in effect kept: "reload
#                       refused"
#   je_failed_commit    a commit whose VM saves fail (libvirt's managed-save directory made
#                       immutable): "staged", "commit", "VM failed", "rollback"; both VMs run
#                       again and the update ends failed
# upgrade's new.sh finds the rest (handoff, VM saved, completed, VM restored, report).
JE_SAVE_DIR=/var/lib/libvirt/qemu/save

je_event() { # je_event MESSAGE_ID [UPGRADED_ID]: an entry of this boot with that id
        journalctl -b 0 -u upgraded.service MESSAGE_ID="$1" ${2:+UPGRADED_ID="$2"} -o cat |
                grep -q .
}

je_reload_at_rest() {
        local broken=/etc/upgraded/upgraded.conf.d/99-lab-broken.conf rc=0
        lab_check reload-at-rest systemctl reload upgraded.service || return 1
        lab_check journal-reloaded-event je_event d2259afa363b4c498e0a8caa92e08bd0 || return 1
        printf '[Handoff]\nMode=sideways\n' >"$broken"
        systemctl reload upgraded.service 2>"$LAB_RESULTS/reload-refused.txt" || rc=$?
        rm -f "$broken"
        lab_check reload-refused test "$rc" -ne 0 || return 1
        lab_check journal-reload-refused-event je_event 43500cdf59bf4aeaa6f9316556e3320f
}

je_vms_running() {
        local vm
        for vm in $(lab_counter_vms); do
                [ "$(virsh -q domstate "$vm")" = running ] || return 1
        done
}

je_failed_commit() {
        local id ok=0 rc
        upgradectl stage "/boot/vmlinuz-$LAB_KERNEL_NEW" --initrd "/boot/initrd.img-$LAB_KERNEL_NEW" \
                --reuse-cmdline >"$LAB_RESULTS/stage-failing.txt" 2>&1 || return 1
        id=$(basename "$(ls -t /var/lib/upgraded/updates/*.json | head -n1)" .json)
        mkdir -p "$JE_SAVE_DIR"
        chattr +i "$JE_SAVE_DIR" || return 1
        # Expected to fail: `|| rc=$?` keeps the caller's set -e from ending the scenario here.
        rc=0
        upgradectl commit --wait >"$LAB_RESULTS/commit-failing.txt" 2>&1 || rc=$?
        echo "exit=$rc" >>"$LAB_RESULTS/commit-failing.txt"
        chattr -i "$JE_SAVE_DIR"
        lab_check failing-commit-exit-status test "$rc" -ne 0 || ok=1
        lab_check failing-commit-failed grep -Eq '"state": ?"failed"' \
                "/var/lib/upgraded/updates/$id.json" || ok=1
        lab_check failing-commit-vms-running je_vms_running || ok=1
        lab_check journal-staged-event je_event 7512aec2b2264b33994bacca79181206 "$id" || ok=1
        lab_check journal-commit-event je_event b4e4da61c0d44a3689098d9fa4bde92c "$id" || ok=1
        lab_check journal-vm-failed-event je_event 19239a481c1940cab95d8f744f8806c7 "$id" || ok=1
        lab_check journal-rollback-event je_event 09c7450ce3124b9988971a06d25d5221 "$id" || ok=1
        return $ok
}
