#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# `make bench`: Describe latency (p50, p99, max) of the real daemon on a private bus, measured
# by bench-describe (one connection, a call every 20 ms):
#   idle     nothing running;
#   saving   while a commit pauses and saves two 512 MiB TCG guests (RAM filled, so the saves
#            take seconds) of a private libvirtd, until the kexec request;
#   hung     while libvirtd hangs (fake-libvirtd.py accepts and never answers) and three
#            PlanCommit calls at a time wait on it.
# Target (docs/architecture.md): p99 below 100 ms in every case. A figure, not a pass/fail.
# With BENCH_UPGRADED_BEFORE=PATH the same cases run with that daemon too, interleaved
# (before, after, before, after) for a side-by-side comparison.
# usage: bench-describe.sh UPGRADED UPGRADECTL BUS_CONF_IN BUS_POLICY MAKE_BZIMAGE VALIDATE SCHEMA COUNTER_FILL_BIN BENCH_DESCRIBE
set -uo pipefail

UPGRADED_CONF=$'[VM]\nSaveParallel=1\n'
GUEST_MIB=512 WAIT_COUNTER_S=90
BENCH=$9
. "$(dirname "$0")/daemon-vms-lib.sh"
FAKE=$(dirname "$0")/fake-libvirtd.py
SAVE_DIR=/var/lib/libvirt/qemu/save
mount -o remount,size=1200m "$SAVE_DIR" || { echo "cannot grow $SAVE_DIR"; exit 1; }
vms_setup
AFTER=$UPGRADED

bench_saving() { # bench_saving LABEL: one commit of both VMs, then both given back
        local id bench_pid
        id=$("$CTL" stage "/boot/vmlinuz-$NEW" --cmdline="root=/dev/vda1 ro")
        "$BENCH" 600 20 >"$T/bench.out" 2>&1 &
        bench_pid=$!
        "$CTL" commit --wait >"$T/commit.out" 2>&1
        kill -INT "$bench_pid"
        wait "$bench_pid"
        echo "# $1 saving: $(cat "$T/bench.out") ($(grep -c 'save:' "$T/commit.out") transfer lines)"
        # Give both VMs back: the "new kernel" restores them.
        stop_daemon
        start_new_kernel_daemon "new-$1" >/dev/null
        for _ in $(seq 600); do [ "$("$CTL" show "$id" -p State --value)" = done ] && break; sleep 0.2; done
        stop_daemon
}

bench_hung() { # bench_hung LABEL
        local id pids=() fake_pid bench_pid
        rm -f "$T/fake.sock"
        python3 "$FAKE" "$T/fake.sock" &
        fake_pid=$!
        for _ in $(seq 50); do [ -S "$T/fake.sock" ] && break; sleep 0.1; done
        DAEMON_ARGS=(--backend=record --kexec-trigger=record --libvirt-timeout=5
                "--libvirt-uri=qemu+unix:///system?socket=$T/fake.sock")
        start_daemon "hung-$1"
        id=$("$CTL" stage "/boot/vmlinuz-$NEW" --cmdline="root=/dev/vda1 ro")
        "$BENCH" 10 20 >"$T/bench.out" 2>&1 &
        bench_pid=$!
        for _ in 1 2 3; do
                (for _ in 1 2 3; do "$CTL" commit --dry-run >/dev/null 2>&1; done) &
                pids+=($!)
        done
        wait "$bench_pid"
        echo "# $1 hung: $(cat "$T/bench.out")"
        kill "${pids[@]}" 2>/dev/null
        wait "${pids[@]}" 2>/dev/null
        "$CTL" cancel "$id" >/dev/null 2>&1
        stop_daemon
        kill "$fake_pid"
        wait "$fake_pid" 2>/dev/null
        DAEMON_ARGS=(--libvirt-uri="$URI" --backend=record --kexec-trigger=record)
}

one_round() { # one_round LABEL DAEMON
        UPGRADED=$2
        start_daemon "idle-$1"
        "$BENCH" 3 20 >"$T/bench.out" 2>&1
        echo "# $1 idle: $(cat "$T/bench.out")"
        bench_saving "$1"
        bench_hung "$1"
}

for round in 1 2; do
        [ -n "${BENCH_UPGRADED_BEFORE:-}" ] && one_round "before#$round" "$BENCH_UPGRADED_BEFORE"
        one_round "after#$round" "$AFTER"
done
ok "benchmark ran"
echo "1..$n"
