# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# Baseline, old kernel: what an operator does today without upgraded.
# libvirt-guests suspends the VMs (managedsave) on the way down and starts
# them (restore) on the way up; kexec -l + systemctl kexec switch kernels.
. /lab-payload/scenarios/lib.sh
set -e

# Without upgraded: the build under test is installed on every lab host, but
# here its daemon must not run (its start on the new kernel would compete with
# libvirt-guests' restores for the CPUs).
systemctl disable -q --now upgraded.service 2>/dev/null || true
cat >/etc/default/libvirt-guests <<EOC
ON_BOOT=start
START_DELAY=0
ON_SHUTDOWN=suspend
PARALLEL_SHUTDOWN=0
SHUTDOWN_TIMEOUT=300
EOC
# Stock bookworm libvirt-guests races libvirtd's stop at shutdown
# ("Disconnected from qemu:///system due to end of file"): order it.
mkdir -p /etc/systemd/system/libvirt-guests.service.d
cat >/etc/systemd/system/libvirt-guests.service.d/lab.conf <<EOC
[Unit]
Wants=libvirtd.service
After=libvirtd.service
EOC
systemctl daemon-reload
systemctl enable -q libvirt-guests.service
systemctl start libvirt-guests.service

lab_start_counter_vm lab-counter-1
lab_start_counter_vm lab-counter-2
# Established counters: a restarted VM (counting from 0) cannot pass for a restored one.
lab_wait_counters 60 180
for vm in $(lab_counter_vms); do
        lab_marker counter-before "$vm" "$(lab_counter "$vm")"
done

lab_kexec_load
lab_marker old-kernel-kexec method=systemctl
systemctl --no-block kexec
