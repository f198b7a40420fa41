#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# A libvirtd that accepts connections and never answers (fake-libvirtd.py): the daemon must
# stay responsive and fail each libvirt step with a named error within its deadline.
#   - PlanCommit (`commit --dry-run`, open to every user) fails with LibvirtTimeout within
#     the deadline (--libvirt-timeout=3: connect 3 s, plus slack);
#   - Describe answers meanwhile, every time within a second (latency figures: make bench);
#   - Commit fails with LibvirtTimeout, the update is still staged (nothing was changed);
#   - SIGTERM during a hung PlanCommit ends the daemon within a few seconds.
#
# usage: test-daemon-libvirt-hang.sh UPGRADED UPGRADECTL BUS_CONF_IN POLICY_CONF MAKE_BZIMAGE
set -uo pipefail

UPGRADED=$1 CTL=$2 BUS_CONF_IN=$3 POLICY=$4 MAKE_BZIMAGE=$5
FAKE=$(dirname "$0")/fake-libvirtd.py
NEW=6.1.0-57-cloud-amd64
TIMEOUT_S=3

. "$(dirname "$0")/lib.sh"
test_begin hang "private dbus-daemon, root-owned images" dbus-daemon busctl python3
DBUS_PID= DAEMON_PID= FAKE_PID=
failures=0 n=0

cleanup() {
        for pid in $DAEMON_PID $FAKE_PID $DBUS_PID; do
                kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
        done
        if [ "$failures" -ne 0 ]; then
                echo "--- daemon logs"; cat "$T"/daemon-*.log 2>/dev/null
        fi
        rm -rf "$T"
}
trap cleanup EXIT


mkdir -p "$ROOT/boot" "$ROOT/proc" "$ROOT/var/lib/upgraded/images"
python3 "$MAKE_BZIMAGE" "$ROOT/boot/vmlinuz-$NEW" "$NEW"
chmod 0644 "$ROOT/boot/vmlinuz-$NEW"
echo "root=/dev/vda1 ro console=ttyS0" >"$ROOT/proc/cmdline"
start_bus "$BUS_CONF_IN" "$POLICY"

python3 "$FAKE" "$T/libvirt.sock" &
FAKE_PID=$!
for _ in $(seq 50); do [ -S "$T/libvirt.sock" ] && break; sleep 0.1; done

DAEMON_ARGS=(--backend=record --kexec-trigger=record --libvirt-timeout=$TIMEOUT_S
        "--libvirt-uri=qemu+unix:///system?socket=$T/libvirt.sock")
check "daemon starts with a libvirtd that never answers" start_daemon hang
ID=$("$CTL" stage "/boot/vmlinuz-$NEW")
check "stage prints an id" grep -qE '^[0-9a-f]{16}$' <<<"$ID"

now_ms() { date +%s%3N; }
reload() { busctl call org.upgraded.Upgrade1 /org/upgraded/Upgrade1 org.upgraded.Upgrade1.Manager Reload; }
# Describe every 200 ms while a command runs; prints the slowest answer in ms.
describe_while() { # describe_while PID
        local worst=0 t0 dt
        while kill -0 "$1" 2>/dev/null; do
                t0=$(now_ms)
                busctl --timeout=5 call org.upgraded.Upgrade1 /org/upgraded/Upgrade1 \
                        org.upgraded.Upgrade1.Manager Describe >/dev/null || { echo 99999; return; }
                dt=$(($(now_ms) - t0))
                [ "$dt" -gt "$worst" ] && worst=$dt
                sleep 0.2
        done
        echo "$worst"
}

# ---- PlanCommit ----
t0=$(now_ms)
"$CTL" commit --dry-run >"$T/plan.out" 2>&1 &
plan_pid=$!
sleep 1
reload >"$T/reload.out" 2>&1
check "Reload while PlanCommit's job reads the policy -> Busy" grep -q "job(s) running (the recovery, Stage, PlanCommit or RestoreVM) read the policy" "$T/reload.out"
worst=$(describe_while "$plan_pid")
wait "$plan_pid"
rc=$? took=$(($(now_ms) - t0))
sed 's/^/# /' "$T/plan.out"
check "PlanCommit fails with LibvirtTimeout (exit $rc after $took ms)" grep -q 'LibvirtTimeout' "$T/plan.out"
check "PlanCommit fails within its deadline ($took ms <= $((2 * TIMEOUT_S + 5)) s)" test "$took" -le $(((2 * TIMEOUT_S + 5) * 1000))
check "Describe answered meanwhile, slowest $worst ms (< 1000)" test "$worst" -lt 1000

# ---- Commit ----
t0=$(now_ms)
"$CTL" commit >"$T/commit.out" 2>&1 &
commit_pid=$!
sleep 1
reload >"$T/reload.out" 2>&1
sed 's/^/# reload: /' "$T/reload.out"
check "Reload while the commit job runs -> Busy naming the update" grep -q "A commit is running (update $ID): it keeps the policy it began with" "$T/reload.out"
worst=$(describe_while "$commit_pid")
wait "$commit_pid"
rc=$? took=$(($(now_ms) - t0))
sed 's/^/# /' "$T/commit.out"
check "Commit fails with LibvirtTimeout (exit $rc after $took ms)" grep -q 'LibvirtTimeout' "$T/commit.out"
check "Commit fails within its deadline ($took ms)" test "$took" -le $(((2 * TIMEOUT_S + 5) * 1000))
check "Describe answered meanwhile, slowest $worst ms (< 1000)" test "$worst" -lt 1000
check "the update is still staged" test "$("$CTL" show "$ID" -p State --value)" = staged

# ---- SIGTERM while PlanCommit hangs ----
"$CTL" commit --dry-run >/dev/null 2>&1 &
plan_pid=$!
sleep 1
t0=$(now_ms)
kill -TERM "$DAEMON_PID"
for _ in $(seq 100); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.1; done
took=$(($(now_ms) - t0))
if kill -0 "$DAEMON_PID" 2>/dev/null; then
        not_ok "SIGTERM ends the daemon (still running after $took ms)"
        kill -KILL "$DAEMON_PID"
else
        ok "SIGTERM ends the daemon within $took ms"
fi
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=
wait "$plan_pid" 2>/dev/null
check "the update is still staged after the restart" bash -c "grep -q '\"state\":\"staged\"' '$ROOT/var/lib/upgraded/updates/$ID.json' || grep -q '\"state\": \"staged\"' '$ROOT/var/lib/upgraded/updates/$ID.json'"

echo "1..$n"
[ "$failures" -eq 0 ]
