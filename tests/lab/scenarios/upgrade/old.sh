# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# upgraded, old kernel: the same two counter VMs as the baseline; upgraded
# stages the new kernel and commits. The daemon pauses and checkpoints the VMs,
# writes its handoff record and asks systemd for the kexec.
. /lab-payload/scenarios/lib.sh
set -e

systemctl is-enabled -q upgraded.service
# A harmless timer of the lab's own, held back on the new kernel's boot with the built-in
# list (apt-daily.timer and the other housekeeping timers): [Restore] DeferUntilRestored=,
# docs/policy.md "Deferred units". A glob, as an operator may write one; new.sh checks it
# started after the VMs were restored, again.sh that the next boot starts it as usual.
cat >/etc/systemd/system/lab-defer.timer <<UNIT
[Unit]
Description=upgraded lab: a timer deferred until the VMs are restored

[Timer]
OnActiveSec=1h

[Install]
WantedBy=timers.target
UNIT
cat >/etc/systemd/system/lab-defer.service <<UNIT
[Unit]
Description=upgraded lab: what lab-defer.timer would run

[Service]
Type=oneshot
ExecStart=/bin/true
UNIT
systemctl enable -q lab-defer.timer
mkdir -p /etc/upgraded/upgraded.conf.d
printf '[Restore]\nDeferUntilRestored=lab-defer*.timer\n' \
        >/etc/upgraded/upgraded.conf.d/60-lab-defer.conf
upgraded --check-config

lab_start_counter_vm lab-counter-1
lab_start_counter_vm lab-counter-2
# Established counters: a restarted VM (counting from 0) cannot pass for a restored one.
lab_wait_counters 60 180
# The journal events of a reload and of a failed commit (journal-events.sh), before the real
# update: the failed one leaves both VMs running and ends failed, with a report of its own.
. /lab-payload/scenarios/upgrade/journal-events.sh
je_reload_at_rest
je_failed_commit
for vm in $(lab_counter_vms); do
        lab_marker counter-before "$vm" "$(lab_counter "$vm")"
done

# On the new kernel, `upgradectl watch` attaches to the update as soon as upgraded has its
# bus name (Type=notify: READY=1 comes before the restores): a unit of the next boot,
# ordered right after upgraded.service; new.sh keeps what it printed.
cat >/etc/systemd/system/lab-watch.service <<UNIT
[Unit]
Description=upgraded lab: upgradectl watch on the new kernel
After=upgraded.service
Wants=upgraded.service
ConditionKernelCommandLine=!upgraded.panic=1

[Service]
Type=oneshot
ExecStart=/bin/sh -c 'upgradectl watch --wait-timeout=900 >$LAB_STATE/watch-new.txt 2>&1; echo "exit=\$?" >>$LAB_STATE/watch-new.txt'

[Install]
WantedBy=multi-user.target
UNIT
systemctl enable -q lab-watch.service

upgradectl stage "/boot/vmlinuz-$LAB_KERNEL_NEW" --initrd "/boot/initrd.img-$LAB_KERNEL_NEW" \
        --reuse-cmdline >"$LAB_RESULTS/stage.txt" 2>&1
upgradectl status >"$LAB_RESULTS/status-staged.txt" 2>&1 || true
lab_marker old-kernel-kexec method=upgraded
# --wait follows the commit until the daemon hands the host to systemd; the
# connection then ends with the old kernel.
upgradectl commit --wait >"$LAB_RESULTS/commit.txt" 2>&1 || true
