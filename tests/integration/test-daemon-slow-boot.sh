#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The daemon on the new kernel takes its bus name even when the post-boot
# steps (restoring the VMs) take longer than dbus-daemon lets a connection
# sit before its Hello: dbus-daemon drops such "incomplete" connections after
# auth_timeout (30 s on the system bus), and on a host with many VMs, or a
# loaded one, the restore takes longer than that.
#
# The private bus here has auth_timeout=1000 ms; on the "new kernel" the
# daemon's libvirt is a socket that accepts and stays silent for 4 s, so the
# restore step blocks that long; after that the socket takes connections and
# never answers, and the restore, which waits for libvirt to answer
# (--libvirt-wait=6 here, each attempt bounded at 3 s), fails. The daemon must serve its name before the
# restore ends (the restore is a job behind it), report the failed restore,
# and keep running.
#
# usage: test-daemon-slow-boot.sh UPGRADED UPGRADECTL BUS_CONF_IN POLICY_CONF MAKE_BZIMAGE
set -uo pipefail

UPGRADED=$1 CTL=$2 BUS_CONF_IN=$3 POLICY=$4 MAKE_BZIMAGE=$5
NEW=6.1.0-57-cloud-amd64
HOLD_S=4

. "$(dirname "$0")/lib.sh"
test_begin slow "private dbus-daemon, root-owned images" dbus-daemon busctl python3
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

start_bus "$BUS_CONF_IN" "$POLICY" -e 's|</busconfig>|<limit name="auth_timeout">1000</limit></busconfig>|'

DAEMON_ARGS=(--backend=record --kexec-trigger=record)
DAEMON_START_TIMEOUT=30
# ---- the old kernel: checkpoint the test driver's VM, hand off ----
check "daemon starts" start_daemon old --libvirt-uri=test:///default
ID=$("$CTL" stage "/boot/vmlinuz-$NEW")
check "stage prints an id" grep -qE '^[0-9a-f]{16}$' <<<"$ID"
"$CTL" commit --wait >"$T/commit.out" 2>&1
check "commit --wait exits 0" test $? -eq 0
check "the VM was checkpointed" grep -q 'VM test (checkpoint): saved' "$T/commit.out"
stop_daemon

# ---- the new kernel: libvirt answers nothing for HOLD_S seconds ----
# A libvirt socket that accepts and answers nothing: every connection is held
# until HOLD_S seconds after the first one, then closed.
python3 - "$T/libvirt.sock" "$HOLD_S" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen(8)
held = [s.accept()[0]]
end = time.monotonic() + float(sys.argv[2])
while (left := end - time.monotonic()) > 0:
    s.settimeout(left)
    try:
        held.append(s.accept()[0])
    except socket.timeout:
        break
for c in held:
    c.close()
time.sleep(60)
PY
FAKE_PID=$!
for _ in $(seq 50); do [ -S "$T/libvirt.sock" ] && break; sleep 0.1; done

NEWBOOT=$(tr -d '-' </proc/sys/kernel/random/uuid)
t0=$SECONDS
check "the daemon takes its name after a restore step longer than auth_timeout" \
        start_daemon new --running-kernel="$NEW" --boot-id="$NEWBOOT" \
        --libvirt-uri="qemu+unix:///system?socket=$T/libvirt.sock" --libvirt-wait=6 \
        --libvirt-timeout=3
echo "# on the bus after $((SECONDS - t0)) s (libvirt silent for $HOLD_S s)"
# The name comes first, the restore runs as a job behind it: watchers see it.
check "on the bus while the restore still runs (state completing)" \
        test "$("$CTL" show "$ID" -p State --value)" = completing
for _ in $(seq 300); do
        [ "$("$CTL" show "$ID" -p State --value)" = failed ] && break
        sleep 0.1
done
check "the restore step really blocked longer than auth_timeout" test $((SECONDS - t0)) -ge 2
check "the daemon is still running" kill -0 "$DAEMON_PID"
"$CTL" report "$ID" --json >"$T/report.json" 2>&1
check "the update failed on the restore and says libvirt did not answer" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(not (r["result"] == "failed" and "vm-restore" in r["reason"] and "libvirt" in r["reason"]
              and "waited" in r["reason"]))' "$T/report.json"
check "State is idle" test "$("$CTL" show -p State --value)" = idle
stop_daemon

echo "1..$n"
[ "$failures" -eq 0 ]
