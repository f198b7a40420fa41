#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# memguest (tests/vm-guest) on a private real libvirtd (run inside private-libvirtd): two
# 768 MiB TCG guests, one with ordinary RAM and one with shared file-backed RAM, each
#   1. fills at least 512 MiB above 1 MiB with its pattern and verifies it (inside the guest);
#   2. goes through a managed save and a start (a plain checkpoint): its tick counter
#      continues from where it was and the same memory verifies again;
# and the file-backed one
#   3. reports the exact dword of one byte changed in its RAM file (the guest's RAM, shared)
#      as BAD, and verifies again once the byte is put back.
# Prints the fill, verify, save and restore times (TCG on this machine).
# usage: test-memguest.sh MEMGUEST_BIN VM_GUEST_DIR
set -uo pipefail

BIN=$1 GUEST_DIR=$2
MIB=768
# From the read before the pause to the pause itself a few ticks pass; a fresh boot starts at 0.
SLACK=60
MG_URI=${LIBVIRT_TEST_URI:?run me through private-libvirtd}
command -v virsh >/dev/null || { echo "SKIP: virsh missing"; exit 77; }
. "$(dirname "$0")/../lib.sh"
. "$GUEST_DIR/memguest-lib.sh"

T=$(mktemp -d /tmp/upgraded-memguest.XXXXXX)
cleanup() {
        local d
        for d in mg-plain mg-shared; do
                mg_virsh destroy "$d" >/dev/null 2>&1
                mg_virsh undefine --managed-save "$d" >/dev/null 2>&1
        done
        [ "$failures" -ne 0 ] && for d in "$T"/*.serial; do echo "--- $d"; cat "$d"; done
        umount /var/lib/libvirt/qemu/ram 2>/dev/null
        rm -rf "$T"
}
trap cleanup EXIT
now() { date +%s%N; }
elapsed() { local ms=$((($(now) - $1) / 1000000)); printf '%d.%03d s' $((ms / 1000)) $((ms % 1000)); }

# A 768 MiB save image does not fit the 64 MiB the wrapper gives the save directory. The
# file-backed RAM (qemu.conf's default memory_backing_dir) goes to a tmpfs, as keep-ram's
# would be on memory that is not written back to a disk.
mount -o remount,size=$((MIB * 2 + 256))m /var/lib/libvirt/qemu/save ||
        { echo "cannot enlarge the save directory"; exit 1; }
mkdir -p /var/lib/libvirt/qemu/ram &&
        mount -t tmpfs -o size=$((MIB + 256))m,mode=0711 upgraded-vm-ram /var/lib/libvirt/qemu/ram ||
        { echo "cannot mount a tmpfs for the RAM files"; exit 1; }

check "both guests defined and started" bash -c "$(declare -f mg_virsh mg_define); MG_URI='$MG_URI'
        mg_define mg-plain '$BIN' '$GUEST_DIR/domain.xml' $MIB '$T' &&
        mg_define mg-shared '$BIN' '$GUEST_DIR/domain-shared.xml' $MIB '$T'"

declare -A sum
for d in mg-plain mg-shared; do
        check "$d: fill done" mg_wait_filled "$d" 600
        mg_status "$d"
        echo "# $d: filled $MG_MIB MiB, sum $MG_SUM, in $MG_FILL_TICKS ticks ($(mg_seconds "$MG_FILL_TICKS") s guest time)"
        check "$d: at least 512 MiB filled" test "$MG_MIB" -ge 512
        sum[$d]=$MG_SUM
        check "$d: the serial log has the fill's line" grep -q "^FILL done mib=$MG_MIB sum=$MG_SUM " "$T/$d.serial"
        t0=$(now)
        out=$(mg_verify "$d" 300)
        rc=$?
        mg_status "$d" # mg_verify ran in a subshell
        check "$d: verifies ($out, $(elapsed "$t0") from the request)" test "$rc" -eq 0
        echo "# $d: verify $MG_VERIFY_TICKS ticks ($(mg_seconds "$MG_VERIFY_TICKS") s guest time)"
        check "$d: the serial log has the verify's line" grep -q "^VERIFY ok mib=$MG_MIB sum=$MG_SUM n=1 " "$T/$d.serial"
done

# ---- 2. managed save and start: the counter continues, the memory is the same ----
for d in mg-plain mg-shared; do
        mg_status "$d"
        before=$MG_TICKS
        t0=$(now)
        mg_virsh managedsave "$d" >/dev/null
        rc=$?
        check "$d: managed save ($(elapsed "$t0"))" test "$rc" -eq 0
        check "$d: shut off with a managed save image" bash -c "[ \"\$(virsh -q -c '$MG_URI' domstate $d)\" = 'shut off' ] && virsh -c '$MG_URI' dominfo $d | grep -qE 'Managed save: +yes'"
        echo "# $d: save image $(du -m /var/lib/libvirt/qemu/save/$d.save 2>/dev/null | cut -f1) MiB"
        t0=$(now)
        mg_virsh start "$d" >/dev/null
        rc=$?
        check "$d: restored ($(elapsed "$t0"))" test "$rc" -eq 0
        mg_status "$d"
        after=$MG_TICKS
        echo "# $d: counter $before before the save -> $after after the restore"
        check "$d: the counter continued" test "$after" -ge "$before" -a "$after" -lt $((before + SLACK))
        check "$d: the same fill (sum ${sum[$d]})" test "$MG_SUM" = "${sum[$d]}" -a "$MG_COUNT" = 1
        out=$(mg_verify "$d" 300)
        rc=$?
        check "$d: verifies after the restore ($out)" test "$rc" -eq 0
        mg_status "$d"
        check "$d: and keeps counting" test "$MG_TICKS" -gt "$after"
done

# ---- 3. one byte changed in the RAM file: the verify names its dword ----
ram=$(mg_ram_file mg-shared)
check "mg-shared: its RAM file exists ($ram)" test -n "$ram" -a -f "$ram"
if [ -n "$ram" ]; then
        addr=$((0x10000000 + 0x2345)) # 256 MiB + a bit: inside the fill, not a page's stamp
        mg_flip_byte "$ram" "$addr"
        out=$(mg_verify mg-shared 300)
        rc=$?
        mg_status mg-shared
        want=$(printf '0x%08x' $((addr & ~3)))
        check "mg-shared: verify reports the changed dword ($out)" test "$rc" -eq 1 -a "$MG_BADADDR" = "$want"
        check "mg-shared: the serial log has the BAD line" grep -q "^VERIFY BAD addr=$want " "$T/mg-shared.serial"
        mg_flip_byte "$ram" "$addr"
        out=$(mg_verify mg-shared 300)
        rc=$?
        check "mg-shared: verifies again with the byte put back ($out)" test "$rc" -eq 0
fi

echo "1..$n"
[ "$failures" -eq 0 ]
