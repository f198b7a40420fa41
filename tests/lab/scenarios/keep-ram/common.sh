# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# keep-ram, both kernels: the persistent-memory region, its DAX filesystem and
# libvirt's memory_backing_dir on it (docs/vms.md, "Memory that survives the kexec"),
# and the VMs that keep their RAM there across the kexec.

KR_REGION_START=140000000 # 5 GiB, memmap=2G!5G (cmdline-extra)
KR_REGION_END=1bfffffff
KR_MEMMAP='memmap=2G!5G'
KR_DIR=/var/lib/libvirt/qemu/ram # libvirt's default memory_backing_dir, set in qemu.conf too
KR_FILE=$KR_DIR/lab-keep-ram.bin # data written on the old kernel, read back on the new
KR_SUM=/var/lib/upgraded-lab/keep-ram.sha256

KV_MEMS="lab-mem-1 lab-mem-2" # memguest VMs, KV_MEM_MIB MiB of shared file-backed RAM each,
KV_MEM_MIB=544                # filled (542 MiB) and verified by the guests themselves
KV_PLAIN=lab-counter-1        # a 16 MiB counter VM with ordinary RAM: cannot keep it
KV_POLICY=/etc/upgraded/upgraded.conf.d/50-lab-keep-ram.conf
KV_HOOK_LINK=/etc/libvirt/hooks/qemu.d/upgraded

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

# The hook program as `meson install` laid it out (<libexecdir>/upgraded/).
kr_hook_path() {
        local f
        f=$(cd /lab-payload/destdir && find . -type f -path '*/upgraded/upgraded-libvirt-hook' | head -n 1)
        [ -n "$f" ] && [ -x "${f#.}" ] && echo "${f#.}"
}

# The old kernel's host, as docs/vms.md's recipe has it: the region's DAX ext4 mounted on
# libvirt's memory_backing_dir (fstab, so the new kernel mounts it too), that directory named
# in qemu.conf, the libvirt hook installed, libvirt's daemon (libvirtd, or virtqemud on a host
# with the modular daemons: lab_libvirt_unit) restarted to read both before any VM
# runs (and the sampler, whose long-lived virsh would hold a dead connection), and the policy
# drop-in `[VM] DefaultStrategy=keep-ram`, upgraded restarted to load it. Nothing else: QEMU
# runs as Debian's libvirt-qemu and upgraded.service is the shipped unit. On failure
# KR_FAILED names the step.
kr_prepare_host() {
        local hook libvirt
        libvirt=$(lab_libvirt_unit)
        KR_FAILED=no-pmem-region
        lab_check region-present kr_region || return 1
        KR_FAILED=no-pmem-device
        lab_check pmem-device kr_pmem_device || return 1
        # The drivers at every boot, before fstab's mount of the region.
        printf 'nd_e820\nnd_pmem\n' >/etc/modules-load.d/keep-ram.conf
        KR_FAILED=mkfs-failed
        mkfs.ext4 -q -F -b 4096 /dev/pmem0 || return 1
        mkdir -p "$KR_DIR"
        echo "/dev/pmem0 $KR_DIR ext4 dax,nofail,x-systemd.before=$libvirt,x-systemd.required-by=$libvirt 0 0" >>/etc/fstab
        systemctl daemon-reload
        KR_FAILED=mount-failed
        mount "$KR_DIR" || return 1
        KR_FAILED=not-dax
        lab_check dax-mounted kr_dax_mounted || return 1
        echo "memory_backing_dir = \"$KR_DIR\"" >>/etc/libvirt/qemu.conf
        KR_FAILED=hook-not-installed
        hook=$(kr_hook_path) || return 1
        mkdir -p "${KV_HOOK_LINK%/*}"
        ln -sf "$hook" "$KV_HOOK_LINK"
        lab_marker hook-installed path="$hook"
        KR_FAILED=libvirtd-restart-failed
        systemctl restart "$libvirt" || return 1
        systemctl restart lab-sampler.service || true
        lab_check libvirtd-answers virsh -q list --all || return 1
        mkdir -p "${KV_POLICY%/*}"
        printf '[VM]\nDefaultStrategy=keep-ram\n' >"$KV_POLICY"
        KR_FAILED=config-refused
        lab_check config-ok upgraded --check-config || return 1
        KR_FAILED=upgraded-restart-failed
        systemctl restart upgraded.service || return 1
        KR_FAILED=
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

# ---- new kernel ----

KV_SAVED_MAX=$((8 << 20)) # a checkpoint of the same VMs writes their whole RAM

kr_same_data() {
        [ "$(sha256sum "$KR_FILE" | cut -d' ' -f1)" = "$(cat "$KR_SUM")" ]
}

kv_same_ram_file() {
        [ "$(stat -c %i "$(kr_ram_file "$1")")" = "$(cat "$LAB_STATE/$1.ram-inode")" ]
}

# "strategy result saved_bytes start_attempts downtime save restore fallback"
# (times in ns, report schema 2: downtime.ns, save_ns, restore_ns; "-" when absent; fallback "set" when the report gives a fallback_reason)
# of VM $1 in the newest report.
# No JSON tool in the lab host: the report is cut at , { } [ into "key":value lines; a
# "name" line starts a record, its saved_bytes line closes what the check needs.
kv_report_vm() {
        local f
        # The newest: a scenario may have failed a commit on purpose before (panic/kdump.sh).
        f=$(ls -t /var/lib/upgraded/reports/*.json 2>/dev/null | head -n 1)
        [ -n "$f" ] || return 1
        tr ',{}[' '\n\n\n\n' <"$f" | sed -e 's/^[[:space:]]*//' -e 's/"//g' -e 's/: */:/' |
                awk -F: -v vm="$1" '
                $1 == "name" { cur = $2; s = r = ""; next }
                cur != vm { next }
                $1 == "strategy" { s = $2 }
                $1 == "result" { r = $2 }
                $1 == "saved_bytes" && sb == "" { sb = $2; ss = s; rr = r }
                $1 == "start_attempts" && sa == "" { sa = $2 }
                $1 == "ns" && dt == "" { dt = $2 }
                $1 == "save_ns" && st == "" { st = $2 }
                $1 == "restore_ns" && rt == "" { rt = $2 }
                $1 == "fallback_reason" && fb == "" { fb = ($2 == "null") ? "-" : "set" }
                function v(x) { return x == "" ? "-" : x }
                END {
                        if (sb == "") exit 1
                        printf "%s %s %s %s %s %s %s %s\n", v(ss), v(rr), sb, v(sa), v(dt), v(st), v(rt), v(fb)
                }'
}

# kv_report_kept VM STRATEGY FALLBACK: the report's line for VM says STRATEGY, resumed, and
# a fallback reason or none (FALLBACK set or -); keep-ram wrote less than KV_SAVED_MAX.
kv_report_kept() {
        local s r sb sa dt st rt fb line
        line=$(kv_report_vm "$1") || return 1
        read -r s r sb sa dt st rt fb <<<"$line"
        line="strategy=$s result=$r saved_bytes=$sb start_attempts=$sa downtime_ns=$dt"
        line+=" save_ns=$st restore_ns=$rt fallback=$fb"
        # shellcheck disable=SC2086 # one k=v word each
        lab_marker kept-vm "$1" $line
        echo "$1 $line" >>"$LAB_RESULTS/keep-ram-vms.txt"
        [ "$s" = "$2" ] && [ "$r" = resumed ] && [ "$fb" = "$3" ] && [[ $sb =~ ^[0-9]+$ ]] || return 1
        [ "$s" != keep-ram ] || [ "$sb" -lt "$KV_SAVED_MAX" ]
}
