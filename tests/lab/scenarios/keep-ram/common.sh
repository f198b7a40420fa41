# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# keep-ram, both kernels: the persistent-memory region, its DAX filesystem and
# libvirt's memory_backing_dir on it (docs/vms.md, "Memory that survives the kexec").

KR_REGION_START=140000000 # 5 GiB, memmap=2G!5G (cmdline-extra)
KR_REGION_END=1bfffffff
KR_MEMMAP='memmap=2G!5G'
KR_DIR=/var/lib/libvirt/qemu/ram # libvirt's default memory_backing_dir, set in qemu.conf too
KR_FILE=$KR_DIR/lab-keep-ram.bin # data written on the old kernel, read back on the new
KR_SUM=/var/lib/upgraded-lab/keep-ram.sha256

kr_region() {
        grep -Eq "^$KR_REGION_START-$KR_REGION_END : Persistent Memory \(legacy\)$" /proc/iomem
}

kr_pmem_device() {
        local i
        modprobe -a nd_e820 nd_pmem 2>/dev/null
        for ((i = 0; i < 120; i++)); do
                [ -b /dev/pmem0 ] && return 0
                sleep 0.5
        done
        return 1
}

kr_dax_mounted() {
        findmnt -n -o FSTYPE,OPTIONS --target "$KR_DIR" | grep -Eq '^ext4 .*dax(=always)?(,|$)' &&
                [ "$(findmnt -n -o SOURCE --target "$KR_DIR")" = /dev/pmem0 ]
}

kr_cmdline_has_memmap() {
        tr ' ' '\n' </proc/cmdline | grep -qxF "$KR_MEMMAP"
}

# A counter VM with MIB MiB of shared RAM in a file below memory_backing_dir.
kr_start_vm() {
        local name=$1 mib=$2 img=$LAB_COUNTER_IMAGES/$1.img
        mkdir -p "$LAB_COUNTER_IMAGES" "$LAB_STATE"
        cp "$LAB_PAYLOAD/counter-vm/counter.img" "$img"
        sed -e "s|@NAME@|$name|g" -e "s|@IMAGE@|$img|g" \
                -e "s|<memory unit='MiB'>16</memory>|<memory unit='MiB'>$mib</memory>|" \
                -e "s|<vcpu>|<memoryBacking><source type='file'/><access mode='shared'/></memoryBacking>\n  <vcpu>|" \
                "$LAB_PAYLOAD/counter-vm/domain.xml" >"$LAB_STATE/$name.xml"
        virsh -q define "$LAB_STATE/$name.xml" >/dev/null || return 1
        virsh -q start "$name" >/dev/null || return 1
        echo "$name" >>"$LAB_STATE/counter-vms"
        lab_marker vm-started "$name" mib="$mib" ram=shared-file
}

# The RAM file libvirt gave the running domain NAME.
kr_ram_file() {
        local id
        id=$(virsh domid "$1" | tr -d ' \n')
        echo "$KR_DIR/libvirt/qemu/$id-$1/pc.ram"
}

# kr_ram_file_on_dax NAME MIB: that file is there, at least MIB MiB, below the DAX mount.
kr_ram_file_on_dax() {
        local f
        f=$(kr_ram_file "$1")
        [ -f "$f" ] && [ "$(stat -c %s "$f")" -ge $(($2 << 20)) ] &&
                [ "$(findmnt -n -o SOURCE --target "$f")" = /dev/pmem0 ]
}

# The real files the kept-memory facts read, for the unit tests' fixtures.
kr_capture() {
        local d=$LAB_RESULTS/keep-ram-$1
        mkdir -p "$d"
        cp /proc/iomem "$d/iomem"
        cp /proc/self/mountinfo "$d/mountinfo"
        cp /proc/cmdline "$d/cmdline"
        cat /sys/block/pmem0/dev >"$d/pmem0-dev" 2>&1
        cat /sys/block/pmem0/device/resource >"$d/pmem0-resource" 2>&1
        cat /sys/block/pmem0/size >"$d/pmem0-size" 2>&1
        ls -l /sys/block/pmem0/device >"$d/pmem0-device-link" 2>&1
        ls /sys/bus/nd/devices >"$d/nd-devices" 2>&1
        grep -r . /sys/firmware/memmap >"$d/firmware-memmap" 2>&1
        dmesg | grep -iE 'pmem|nd_|e820|memmap|dax' >"$d/dmesg" 2>&1
}
