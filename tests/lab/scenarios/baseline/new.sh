# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# Baseline, new kernel: libvirt-guests has restored the VMs; check the
# update happened and the VMs continued. The runner computes the downtime
# from the host-timestamped counter samples.
. /lab-payload/scenarios/lib.sh

ok=true
lab_check kernel-is-new test "$(uname -r)" = "$LAB_KERNEL_NEW" || ok=false
lab_check vms-running lab_wait_vms_running 300 || ok=false
# What the restores waited for on this boot, and what stopped after the request on the old
# one: the benchmark prints both next to upgraded's (tests/lab/bench). Not a verdict.
lab_critical_chain libvirt-guests.service critical-chain-baseline.txt ||
        echo "critical chain of libvirt-guests.service not collected" >&2
for vm in $(lab_counter_vms); do
        lab_marker counter-after "$vm" "$(lab_counter "$vm")"
done
if $ok; then
        lab_finish pass
else
        lab_finish fail baseline-checks-failed
fi
