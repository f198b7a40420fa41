#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Benchmark scaffold (`make bench`, inside private-libvirtd): the downtime of a VM's
# checkpoint (managed save + start, wall clock around both virsh calls) at two sizes of
# memguest guests, a small one and one with more than 512 MiB of data, interleaved
# S L S L..., medians and the slope per GiB of data. Every round must keep the guest's
# memory (verify ok, same sum) and counter; a round that does not fails the benchmark.
# A strategy is a function STRATEGY_NAME DOMAIN that takes the VM down and back up; keep-ram
# joins `checkpoint` here when it exists.
# usage: bench-memguest.sh MEMGUEST_BIN VM_GUEST_DIR [ROUNDS]
set -uo pipefail

BIN=$1 GUEST_DIR=$2 ROUNDS=${3:-${MEMGUEST_BENCH_ROUNDS:-3}}
SIZES=(64 768) # MiB of RAM; the guest fills all but 2 MiB
STRATEGIES=(checkpoint)
MG_URI=${LIBVIRT_TEST_URI:?run me through private-libvirtd}
. "$GUEST_DIR/memguest-lib.sh"

T=$(mktemp -d /tmp/upgraded-memguest-bench.XXXXXX)
cleanup() {
        local m
        for m in "${SIZES[@]}"; do
                mg_virsh destroy "mg-$m" >/dev/null 2>&1
                mg_virsh undefine --managed-save "mg-$m" >/dev/null 2>&1
        done
        umount /var/lib/libvirt/qemu/ram 2>/dev/null
        rm -rf "$T"
}
trap cleanup EXIT
now_ms() { echo $(($(date +%s%N) / 1000000)); }
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

strategy_checkpoint() { # strategy_checkpoint DOMAIN
        mg_virsh managedsave "$1" >/dev/null && mg_virsh start "$1" >/dev/null
}

mount -o remount,size=$((SIZES[-1] * 2 + 256))m /var/lib/libvirt/qemu/save || exit 1
mkdir -p /var/lib/libvirt/qemu/ram &&
        mount -t tmpfs -o size=$((SIZES[-1] + SIZES[0] + 256))m upgraded-vm-ram /var/lib/libvirt/qemu/ram ||
        exit 1
declare -A sum data
for m in "${SIZES[@]}"; do
        mg_define "mg-$m" "$BIN" "$GUEST_DIR/domain-shared.xml" "$m" "$T" || exit 1
done
for m in "${SIZES[@]}"; do
        mg_wait_filled "mg-$m" 900 && mg_status "mg-$m" || exit 1
        sum[$m]=$MG_SUM data[$m]=$MG_MIB
        echo "# mg-$m: $MG_MIB MiB of data, filled in $(mg_seconds "$MG_FILL_TICKS") s (guest ticks)"
done

for s in "${STRATEGIES[@]}"; do
        for ((r = 1; r <= ROUNDS; r++)); do
                for m in "${SIZES[@]}"; do
                        mg_status "mg-$m" || exit 1
                        before=$MG_TICKS
                        t0=$(now_ms)
                        "strategy_$s" "mg-$m" || { echo "$s mg-$m round $r: failed"; exit 1; }
                        ms=$(($(now_ms) - t0))
                        out=$(mg_verify "mg-$m" 600) || { echo "$s mg-$m round $r: $out"; exit 1; }
                        mg_status "mg-$m"
                        if [ "$MG_SUM" != "${sum[$m]}" ] || [ "$MG_TICKS" -lt "$before" ]; then
                                echo "$s mg-$m round $r: sum $MG_SUM (was ${sum[$m]}), ticks $before -> $MG_TICKS"
                                exit 1
                        fi
                        echo "$ms" >>"$T/$s-$m"
                        echo "# $s mg-$m round $r: downtime $ms ms"
                done
        done
        small=$(median <"$T/$s-${SIZES[0]}") large=$(median <"$T/$s-${SIZES[-1]}")
        gib_milli=$(((data[${SIZES[-1]}] - data[${SIZES[0]}]) * 1000 / 1024))
        echo "$s: median downtime ${small} ms at ${data[${SIZES[0]}]} MiB, ${large} ms at" \
                "${data[${SIZES[-1]}]} MiB; slope $(((large - small) * 1000 / gib_milli)) ms per GiB;" \
                "large/small $(awk -v a="$large" -v b="$small" 'BEGIN { printf "%.2f", a / b }')"
done
