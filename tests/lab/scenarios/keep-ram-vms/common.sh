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

# The RAM file of the running domain $1: below the DAX mount, at least $2 MiB.
kv_ram_file() {
        local id
        id=$(virsh domid "$1" | tr -d ' \n')
        echo "$KR_DIR/libvirt/qemu/$id-$1/pc.ram"
}

kv_ram_on_dax() {
        local f
        f=$(kv_ram_file "$1")
        [ -f "$f" ] && [ "$(stat -c %s "$f")" -ge $(($2 << 20)) ] &&
                [ "$(findmnt -n -o SOURCE --target "$f")" = /dev/pmem0 ]
}
