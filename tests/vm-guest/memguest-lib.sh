# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# Sourced: memguest VMs (memguest.S) of a libvirtd, driven with virsh only (no socket or
# Python, so the lab host can use it too). MG_URI, when set, is the libvirt URI.
#
#   mg_define NAME IMAGE_BIN TEMPLATE MIB DIR
#                           defines and starts NAME from TEMPLATE (domain.xml or
#                           domain-shared.xml) with MIB MiB of RAM; its disk is a copy of
#                           IMAGE_BIN and its COM1 log DIR/NAME.serial, both in DIR
#   mg_status NAME          reads the status block into MG_TICKS MG_STATE MG_MIB MG_SUM
#                           MG_RESULT MG_COUNT MG_BADADDR MG_FILL_TICKS MG_VERIFY_TICKS
#                           MG_SEED MG_PROGRESS (decimal, MG_SUM and MG_BADADDR hex);
#                           fails when it cannot be read or lacks the magics
#   mg_wait_filled NAME [TIMEOUT]
#                           waits until the fill is done (state ready; default 300 s);
#                           fails at once on state "no RAM" or "fault"
#   mg_verify NAME [TIMEOUT]
#                           asks the guest to verify (key V through `virsh send-key`), waits
#                           for that verify to complete (default 300 s) and prints its
#                           result line; 0 ok, 1 memory differs, 2 no answer
#   mg_seconds TICKS        ticks as seconds (PIT 18.2065 Hz), e.g. 12.34
#   mg_ram_file NAME [DIR]  the RAM file of a running domain with shared file-backed RAM
#                           under memory_backing_dir DIR (default /var/lib/libvirt/qemu/ram)
#   mg_flip_byte FILE OFFSET [MASK]
#                           XORs one byte of FILE with MASK (default 0x5a) in place: in a RAM
#                           file, OFFSET is the guest physical address (below the PCI hole)

MG_HZ_MILLI=18207 # 1193182 / 65536 Hz, times 1000
MG_STATE_READY=2 MG_STATE_NO_RAM=4 MG_STATE_FAULT=5
MG_RESULT_OK=1

mg_virsh() { virsh -q ${MG_URI:+-c "$MG_URI"} "$@"; }

mg_define() { # mg_define NAME IMAGE_BIN TEMPLATE MIB DIR
        local name=$1 bin=$2 template=$3 mib=$4 dir=$5
        cp "$bin" "$dir/$name.img" || return 1
        : >"$dir/$name.serial"
        sed -e "s|@NAME@|$name|g" -e "s|@IMAGE@|$dir/$name.img|g" -e "s|@MEMORY_MIB@|$mib|g" \
                -e "s|@SERIAL_LOG@|$dir/$name.serial|g" "$template" >"$dir/$name.xml" || return 1
        mg_virsh define "$dir/$name.xml" >/dev/null && mg_virsh start "$name" >/dev/null
}

# shellcheck disable=SC2034 # the MG_* words are for the caller
mg_status() { # mg_status NAME
        local out w=()
        out=$(mg_virsh qemu-monitor-command --hmp "$1" 'xp /13wx 0x500' 2>/dev/null) || return 1
        read -r -a w <<<"$(sed -n 's/^[0-9a-fA-F]*: *//p' <<<"$out" | tr -d '\r' | tr '\n' ' ')"
        [ "${#w[@]}" -eq 13 ] && [ "${w[0]}" = 0x43424c55 ] && [ "${w[2]}" = 0x474d454d ] || return 1
        MG_TICKS=$((w[1])) MG_STATE=$((w[3])) MG_MIB=$((w[4])) MG_SUM=${w[5]}
        MG_RESULT=$((w[6])) MG_COUNT=$((w[7])) MG_BADADDR=${w[8]} MG_FILL_TICKS=$((w[9]))
        MG_VERIFY_TICKS=$((w[10])) MG_SEED=${w[11]} MG_PROGRESS=$((w[12]))
}

mg_wait_filled() { # mg_wait_filled NAME [TIMEOUT]
        local t0=$SECONDS
        while [ $((SECONDS - t0)) -lt "${2:-300}" ]; do
                if mg_status "$1"; then
                        [ "$MG_STATE" = "$MG_STATE_READY" ] && return 0
                        [ "$MG_STATE" = "$MG_STATE_NO_RAM" ] || [ "$MG_STATE" = "$MG_STATE_FAULT" ] &&
                                { echo "memguest $1: state $MG_STATE"; return 1; }
                fi
                sleep 0.5
        done
        echo "memguest $1: fill not done within ${2:-300} s"
        return 1
}

mg_verify() { # mg_verify NAME [TIMEOUT]
        local before t0=$SECONDS
        mg_status "$1" || { echo "memguest $1: no status block"; return 2; }
        before=$MG_COUNT
        mg_virsh send-key "$1" KEY_V >/dev/null || return 2
        while [ $((SECONDS - t0)) -lt "${2:-300}" ]; do
                sleep 0.2
                mg_status "$1" || continue
                [ "$MG_COUNT" -gt "$before" ] && [ "$MG_STATE" = "$MG_STATE_READY" ] || continue
                if [ "$MG_RESULT" = "$MG_RESULT_OK" ]; then
                        echo "VERIFY ok mib=$MG_MIB sum=$MG_SUM n=$MG_COUNT ticks=$MG_VERIFY_TICKS"
                        return 0
                fi
                echo "VERIFY BAD addr=$MG_BADADDR mib=$MG_MIB sum=$MG_SUM n=$MG_COUNT ticks=$MG_VERIFY_TICKS"
                return 1
        done
        echo "memguest $1: verify not answered within ${2:-300} s"
        return 2
}

mg_seconds() { # mg_seconds TICKS
        local ms=$(($1 * 1000000 / MG_HZ_MILLI))
        printf '%d.%02d\n' $((ms / 1000)) $((ms % 1000 / 10))
}

mg_ram_file() { # mg_ram_file NAME [DIR]
        local f
        f=$(find "${2:-/var/lib/libvirt/qemu/ram}" -name pc.ram -path "*-$1/*" 2>/dev/null | head -n 1)
        [ -n "$f" ] && echo "$f"
}

mg_flip_byte() { # mg_flip_byte FILE OFFSET [MASK]
        local old
        old=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ') && [ -n "$old" ] || return 1
        # shellcheck disable=SC2059 # the format is the byte, as an octal escape
        printf "\\$(printf '%03o' $((old ^ ${3:-0x5a})))" |
                dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
