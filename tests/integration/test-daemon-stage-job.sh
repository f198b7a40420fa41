#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Stage as a job (docs/dbus-api.md, "Stage"), on the real daemon and a private bus:
#   - the size limit: a sparse 20 GiB initrd is refused with ImageTooLarge within a second,
#     before a byte of it is read, and nothing is staged;
#   - responsiveness: while root stages a 1 GiB initrd (the largest legal one: reading and
#     hashing it takes seconds here), an unprivileged user calls Describe and ListUpdates
#     every 20 ms; none of those calls may wait more than MAX_WAIT_MS. This asserts that the
#     loop answers, not how fast: the figures are `make bench` (bench-stage.sh);
#   - Cancel while the files are read: the Stage call fails with Cancelled, no record, no
#     image loaded;
#   - SIGTERM while the files are read: the daemon exits within STOP_MAX_MS, nothing staged.
# usage: test-daemon-stage-job.sh UPGRADED UPGRADECTL BUS_CONF_IN POLICY_CONF MAKE_BZIMAGE
#        VALIDATE SCHEMA BENCH_DESCRIBE
set -uo pipefail

UPGRADED=$1 CTL=$2 BUS_CONF_IN=$3 POLICY=$4 MAKE_BZIMAGE=$5 BENCH=$8
TEST_USER=nobody
MAX_WAIT_MS=2000 STOP_MAX_MS=2000

. "$(dirname "$0")/lib.sh"
test_begin stage-job "private dbus-daemon, setpriv, root-owned images" dbus-daemon busctl python3 setpriv
DBUS_PID= DAEMON_PID= BENCH_PIDS=()
cleanup() {
        for pid in "${BENCH_PIDS[@]}" $DAEMON_PID $DBUS_PID; do
                kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
        done
        [ "$failures" -ne 0 ] && { echo "--- daemon log"; cat "$T"/daemon-*.log; }
        rm -rf "$T"
}
trap cleanup EXIT

now_ms() { echo $(($(date +%s%N) / 1000000)); }
mkdir -p "$ROOT/boot" "$ROOT/proc" "$ROOT/var/lib/upgraded/images"
python3 "$MAKE_BZIMAGE" "$ROOT/boot/vmlinuz-6.1.0-57-cloud-amd64" 6.1.0-57-cloud-amd64
KERNEL=/boot/vmlinuz-6.1.0-57-cloud-amd64
# Sparse: no disk space, and the file system reads its holes as fast as it can.
truncate -s 20G "$ROOT/boot/initrd.img-huge"
truncate -s 1G "$ROOT/boot/initrd.img-big" # IMAGE_INITRD_SIZE_MAX: legal
chmod 0644 "$ROOT/boot/"*
echo "root=/dev/vda1 ro console=ttyS0" >"$ROOT/proc/cmdline"
start_bus "$BUS_CONF_IN" "$POLICY"
DAEMON_ARGS=(--backend=record --kexec-trigger=record --libvirt-uri=test:///default)
check "daemon starts" start_daemon stage-job
records() { find "$ROOT/var/lib/upgraded/updates" -name '*.json' 2>/dev/null | wc -l; }
loaded() { # the record backend's state: 1 when an image is loaded
        python3 -c 'import json,sys
try: print(int(json.load(open(sys.argv[1])).get("loaded", 0)))
except FileNotFoundError: print(0)' "$ROOT/run/upgraded/kexec-record.json"
}

# ---- the limit ----
t0=$(now_ms)
expect_fail "a sparse 20 GiB initrd -> ImageTooLarge (exit 3)" 3 "ImageTooLarge" \
        "$CTL" stage "$KERNEL" --initrd=/boot/initrd.img-huge
ms=$(($(now_ms) - t0))
# Not read: 20 GiB would take minutes to hash; the bound is only the bus round trip
# and two process starts on a loaded machine.
check "refused at once: within $MAX_WAIT_MS ms ($ms ms)" test "$ms" -lt "$MAX_WAIT_MS"
grep -q "limit is 1024 MiB" "$T/err" || not_ok "the message names the limit: $(cat "$T/err")"
check "nothing staged: no record" test "$(records)" -eq 0
check "nothing staged: no update listed" test -z "$("$CTL" list --no-legend 2>&1)"
check "nothing loaded" test "$(loaded)" -eq 0

# ---- responsiveness during the largest Stage ----
bench() { # bench METHOD: as the unprivileged user, every 20 ms until SIGINT
        setpriv --reuid="$TEST_USER" --regid=nogroup --clear-groups -- "$BENCH" 600 20 "$1" \
                >"$T/bench-$1.out" 2>&1 &
        BENCH_PIDS+=($!)
}
bench Describe
bench ListUpdates
sleep 0.5
t0=$(now_ms)
"$CTL" stage "$KERNEL" --initrd=/boot/initrd.img-big >"$T/stage.out" 2>"$T/stage.err"
rc=$? stage_ms=$(($(now_ms) - t0))
kill -INT "${BENCH_PIDS[@]}"
wait "${BENCH_PIDS[@]}"
BENCH_PIDS=()
check "the 1 GiB initrd is staged ($stage_ms ms)" test "$rc" -eq 0
ID=$(cat "$T/stage.out")
for m in Describe ListUpdates; do
        line=$(cat "$T/bench-$m.out")
        echo "# during the Stage, $TEST_USER: $line"
        max=$(sed -n 's/.* max=\([0-9]*\)\..*/\1/p' <<<"$line")
        if [ -n "$max" ] && [ "$max" -le "$MAX_WAIT_MS" ] && grep -q "failed=0 " <<<"$line"; then
                ok "$m: no call waited more than $MAX_WAIT_MS ms during the Stage"
        else
                not_ok "$m: a call waited more than $MAX_WAIT_MS ms or failed during the Stage: $line"
        fi
done
check "the update is staged" \
        test "$("$CTL" show "$ID" -p State --value)" = staged
check "cancel the staged update" "$CTL" cancel "$ID"

# ---- Cancel while the files are read ----
wait_log() { # wait_log LOGNAME PATTERN N: until PATTERN is on N lines, within 10 s
        for _ in $(seq 100); do
                [ "$(grep -c "$2" "$T/daemon-$1.log")" -ge "$3" ] && return 0
                sleep 0.1
        done
        return 1
}
before=$(records) jobs_before=$(grep -c "Staging update" "$T/daemon-stage-job.log")
"$CTL" stage "$KERNEL" --initrd=/boot/initrd.img-big >"$T/stage.out" 2>"$T/stage.err" &
stage_pid=$!
check "the Stage job started" wait_log stage-job "Staging update" $((jobs_before + 1))
SID=$(sed -n 's/.*Staging update \([0-9a-f]*\):.*/\1/p' "$T/daemon-stage-job.log" | tail -1)
expect_fail "a second Stage meanwhile -> AlreadyStaged naming the staging update" 6 "$SID" \
        "$CTL" stage "$KERNEL"
check "cancel the update being staged (by its id)" "$CTL" cancel "$SID"
wait "$stage_pid"
rc=$?
check "the Stage call failed with Cancelled (exit $rc)" \
        bash -c "[ $rc -ne 0 ] && grep -q Cancelled '$T/stage.err'"
check "nothing left: no new record" test "$(records)" -eq "$before"
check "nothing left: no record for $SID" test ! -e "$ROOT/var/lib/upgraded/updates/$SID.json"
check "nothing left: nothing loaded" test "$(loaded)" -eq 0
check "nothing left: no update $SID" bash -c "! '$CTL' show '$SID' >/dev/null 2>&1"
check "the next Stage works" bash -c "'$CTL' stage '$KERNEL' >'$T/id' && '$CTL' cancel \$(cat '$T/id')"

# ---- SIGTERM while the files are read ----
before=$(records) jobs_before=$(grep -c "Staging update" "$T/daemon-stage-job.log")
"$CTL" stage "$KERNEL" --initrd=/boot/initrd.img-big >"$T/stage.out" 2>"$T/stage.err" &
stage_pid=$!
check "the Stage job started again" wait_log stage-job "Staging update" $((jobs_before + 1))
sleep 0.2
t0=$(now_ms)
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID"
rc=$? ms=$(($(now_ms) - t0))
DAEMON_PID=
check "SIGTERM during the Stage: the daemon exits within $STOP_MAX_MS ms ($ms ms, exit $rc)" \
        test "$ms" -lt "$STOP_MAX_MS"
wait "$stage_pid"
check "the Stage call did not succeed" bash -c "! grep -q . '$T/stage.out'"
check "nothing staged: no new record" test "$(records)" -eq "$before"
check "nothing staged: nothing loaded" test "$(loaded)" -eq 0
check "the daemon starts again" start_daemon again
check "and nothing is active" test "$("$CTL" show -p State --value)" = idle
stop_daemon

echo "1..$n"
[ "$failures" -eq 0 ] || { echo "$failures of $n checks failed"; exit 1; }
