# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# keep-ram-vms, both kernels: the keep-ram scenario's host (common.sh there: region,
# DAX filesystem, memory_backing_dir) with its VMs through the keep-ram strategy.
. /lab-payload/scenarios/keep-ram/common.sh

KV_COUNTER=lab-counter-1 # a counter VM, 512 MiB of shared file-backed RAM
KV_MEM=lab-mem-1         # a memguest VM, KV_MEM_MIB MiB, filled and verified by itself
KV_MEM_MIB=256
KV_POLICY=/etc/upgraded/upgraded.conf.d/50-lab-keep-ram.conf
KV_HOOK_LINK=/etc/libvirt/hooks/qemu.d/upgraded
