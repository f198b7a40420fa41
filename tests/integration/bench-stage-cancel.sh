#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# `meson test -C build --benchmark bench-stage-cancel`: does the daemon's memory level off?
# BENCH_CYCLES (default 1000) Stage/Cancel cycles through `upgradectl` against ONE real daemon
# on a private bus (TEST-ONLY record backend, libvirt's test driver: no VM, no libvirtd), the
# daemon's VmRSS read from /proc after each cycle. Prints the least-squares slope of VmRSS
# over the last half of the cycles in KiB a cycle, with its standard error and the residuals'
# standard deviation (the noise), and the RSS at the start and the end. A figure, not a
# pass/fail (docs/reliability.md, "Soak"); it fails only when a cycle fails.
# usage: bench-stage-cancel.sh UPGRADED UPGRADECTL BUS_CONF_IN POLICY_CONF MAKE_BZIMAGE ...
set -uo pipefail

UPGRADED=$1 CTL=$2 BUS_CONF_IN=$3 POLICY=$4 MAKE_BZIMAGE=$5
CYCLES=${BENCH_CYCLES:-1000}
NEW=6.1.0-57-cloud-amd64

. "$(dirname "$0")/lib.sh"
test_begin stage-cancel "private dbus-daemon, root-owned images" dbus-daemon busctl python3
DBUS_PID= DAEMON_PID=
DAEMON_ARGS=(--backend=record --kexec-trigger=record --libvirt-uri=test:///default)

cleanup() {
        for pid in $DAEMON_PID $DBUS_PID; do
                kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
        done
        if [ "$failures" -ne 0 ]; then
                echo "--- daemon log"; tail -50 "$T"/daemon*.log 2>/dev/null
        fi
        rm -rf "$T"
}
trap cleanup EXIT

mkdir -p "$ROOT/boot" "$ROOT/proc" "$ROOT/var/lib/upgraded/images"
python3 "$MAKE_BZIMAGE" "$ROOT/boot/vmlinuz-$NEW" "$NEW" && chmod 0644 "$ROOT/boot/vmlinuz-$NEW"
echo "root=/dev/vda1 ro console=ttyS0" >"$ROOT/proc/cmdline"
start_bus "$BUS_CONF_IN" "$POLICY"
check "daemon starts" start_daemon bench
for _ in $(seq 100); do "$CTL" stage "/boot/vmlinuz-$NEW" >/dev/null 2>&1 && break; sleep 0.1; done # the recovery job ends
"$CTL" cancel >/dev/null 2>&1

rss_kib() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB$/\1/p' "/proc/$DAEMON_PID/status"; }
bad=0 t0=$SECONDS
: >"$T/rss"
for i in $(seq "$CYCLES"); do
        kill -0 "$DAEMON_PID" 2>/dev/null || { not_ok "the daemon died before cycle $i"; break; }
        if ! "$CTL" stage "/boot/vmlinuz-$NEW" --cmdline="root=/dev/vda1 ro" >/dev/null 2>"$T/cycle.err" ||
                ! "$CTL" cancel >/dev/null 2>>"$T/cycle.err"; then
                bad=$((bad + 1))
                [ "$bad" -le 3 ] && sed "s/^/# cycle $i: /" "$T/cycle.err"
        fi
        echo "$i $(rss_kib)" >>"$T/rss"
done
check "$CYCLES Stage/Cancel cycles in $((SECONDS - t0)) s, none failed ($bad)" test "$bad" -eq 0
check "the daemon is still running" kill -0 "$DAEMON_PID"

[ "$(wc -l <"$T/rss")" -ge 10 ] && python3 - "$T/rss" <<'PY'
import math, sys
pts = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if len(l.split()) == 2]
half = pts[len(pts) // 2:]
n = len(half)
mx = sum(x for x, _ in half) / n
my = sum(y for _, y in half) / n
sxx = sum((x - mx) ** 2 for x, _ in half)
slope = sum((x - mx) * (y - my) for x, y in half) / sxx
res = [y - (my + slope * (x - mx)) for x, y in half]
sd = math.sqrt(sum(r * r for r in res) / (n - 2))
se = sd / math.sqrt(sxx)
step = max(len(pts) // 10, 1)
print("# VmRSS (KiB) every %d cycles: %s" % (step, " ".join(
    "%d:%.0f" % (x, y) for x, y in pts[step - 1::step])))
print(f"# VmRSS: {pts[0][1]:.0f} KiB after cycle 1, {half[0][1]:.0f} KiB after cycle "
      f"{half[0][0]:.0f}, {pts[-1][1]:.0f} KiB after cycle {pts[-1][0]:.0f}")
print(f"# slope over the last {n} cycles: {slope:+.4f} KiB/cycle, standard error {se:.4f} "
      f"(95 %: {slope - 1.96 * se:+.4f} .. {slope + 1.96 * se:+.4f}); residuals' sd {sd:.1f} KiB; "
      f"total change over them {slope * (n - 1):+.1f} KiB")
PY
stop_daemon
DAEMON_PID=

echo "1..$n"
[ "$failures" -eq 0 ]
