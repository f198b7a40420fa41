#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# `make bench`: Describe and ListUpdates latency (p50, p99, max) of an unprivileged caller
# (one connection each, a call every 20 ms, bench-describe) on the real daemon and a private
# bus, idle and while root stages the largest legal initrd (1 GiB, IMAGE_INITRD_SIZE_MAX;
# sparse, so the figure is the hashing's, not the disk's), ROUNDS times. Target
# (docs/architecture.md, "Jobs"): p99 below 100 ms during the Stage. A figure, not a
# pass/fail; test-daemon-stage-job.sh asserts the loose bound.
# With BENCH_UPGRADED_BEFORE=PATH the same rounds run with that daemon too, interleaved.
# usage: bench-stage.sh UPGRADED UPGRADECTL BUS_CONF_IN POLICY_CONF MAKE_BZIMAGE VALIDATE
#        SCHEMA BENCH_DESCRIBE
set -uo pipefail

UPGRADED=$1 CTL=$2 BUS_CONF_IN=$3 POLICY=$4 MAKE_BZIMAGE=$5 BENCH=$8
TEST_USER=nobody ROUNDS=${BENCH_ROUNDS:-3}

. "$(dirname "$0")/lib.sh"
test_begin bench-stage "private dbus-daemon, setpriv, root-owned images" dbus-daemon busctl python3 setpriv
DBUS_PID= DAEMON_PID=
cleanup() {
        for pid in $DAEMON_PID $DBUS_PID; do
                kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
        done
        rm -rf "$T"
}
trap cleanup EXIT

mkdir -p "$ROOT/boot" "$ROOT/proc" "$ROOT/var/lib/upgraded/images"
python3 "$MAKE_BZIMAGE" "$ROOT/boot/vmlinuz-6.1.0-57-cloud-amd64" 6.1.0-57-cloud-amd64
KERNEL=/boot/vmlinuz-6.1.0-57-cloud-amd64
truncate -s 1G "$ROOT/boot/initrd.img-big"
chmod 0644 "$ROOT/boot/"*
echo "root=/dev/vda1 ro console=ttyS0" >"$ROOT/proc/cmdline"
start_bus "$BUS_CONF_IN" "$POLICY"
DAEMON_ARGS=(--backend=record --kexec-trigger=record --libvirt-uri=test:///default)

AS_USER=(setpriv --reuid="$TEST_USER" --regid=nogroup --clear-groups --)

one_round() { # one_round LABEL DAEMON
        local pids=() t0 id m
        UPGRADED=$2
        start_daemon "$1" || { echo "# $1: the daemon did not start"; return; }
        "${AS_USER[@]}" "$BENCH" 3 20 >"$T/idle.out" 2>&1
        echo "# $1 idle: $(cat "$T/idle.out")"
        for m in Describe ListUpdates; do
                # Not a function in the background: $! must be the bench itself.
                "${AS_USER[@]}" "$BENCH" 600 20 "$m" >"$T/bench-$m.out" 2>&1 &
                pids+=($!)
        done
        sleep 0.3
        t0=$(date +%s%N)
        id=$("$CTL" stage "$KERNEL" --initrd=/boot/initrd.img-big 2>&1)
        echo "# $1 stage of a 1 GiB initrd: $((($(date +%s%N) - t0) / 1000000)) ms ($id)"
        kill -INT "${pids[@]}"
        wait "${pids[@]}"
        for m in Describe ListUpdates; do echo "# $1 during the stage: $(cat "$T/bench-$m.out")"; done
        "$CTL" cancel >/dev/null 2>&1
        stop_daemon
}

echo "# $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), SHA-256: see bench-digest"
for round in $(seq "$ROUNDS"); do
        [ -n "${BENCH_UPGRADED_BEFORE:-}" ] && one_round "before#$round" "$BENCH_UPGRADED_BEFORE"
        one_round "after#$round" "$1"
done
exit 0
