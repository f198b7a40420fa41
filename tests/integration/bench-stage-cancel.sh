#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# `meson test -C build --benchmark bench-stage-cancel`: does the daemon's memory level off?
# BENCH_CYCLES (default 1000) Stage/Cancel cycles through `upgradectl` against ONE real daemon
# on a private bus (TEST-ONLY record backend, libvirt's test driver: no VM, no libvirtd), the
# daemon's VmRSS read from /proc after each cycle, and the heap it has in use (mallinfo2(),
# answered by the TEST-ONLY libheapstat.so preloaded into it: heapstat.c). Prints for both the
# least-squares slope over the last half of the cycles in KiB a cycle, with its standard error
# and the residuals' standard deviation (the noise), the values at the start and the end, and
# what malloc_trim(0) gives back at the end: a structure that grows shows in the heap in use,
# a fragmented heap only in VmRSS. A figure, not a pass/fail (docs/reliability.md, "Soak"); it
# fails only when a cycle fails.
# usage: bench-stage-cancel.sh UPGRADED UPGRADECTL BUS_CONF_IN POLICY_CONF MAKE_BZIMAGE
#        VALIDATE SCHEMA LIBHEAPSTAT
set -uo pipefail

UPGRADED=$1 CTL=$2 BUS_CONF_IN=$3 POLICY=$4 MAKE_BZIMAGE=$5 HEAPSTAT_SO=$8
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
# Only the daemon gets the preload (busctl and upgradectl must not answer on the FIFOs).
HS=$T/heapstat
mkdir "$HS" && mkfifo "$HS/req" "$HS/resp"
printf '#!/bin/sh\nLD_PRELOAD=%q HEAPSTAT_DIR=%q exec %q "$@"\n' "$HEAPSTAT_SO" "$HS" "$UPGRADED" >"$T/upgraded-heapstat"
chmod 755 "$T/upgraded-heapstat"
UPGRADED=$T/upgraded-heapstat
check "daemon starts" start_daemon bench
for _ in $(seq 100); do "$CTL" stage "/boot/vmlinuz-$NEW" >/dev/null 2>&1 && break; sleep 0.1; done # the recovery job ends
"$CTL" cancel >/dev/null 2>&1

rss_kib() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB$/\1/p' "/proc/$DAEMON_PID/status"; }
heapstat() { # heapstat s|t -> "INUSE FREE MMAPPED" (bytes), or "- - -" when it does not answer
        timeout 10 bash -c 'printf %s "$1" >"$2/req" && read -r l <"$2/resp" && echo "$l"' _ "$1" "$HS" ||
                echo "- - -"
}
bad=0 t0=$SECONDS
: >"$T/rss"
for i in $(seq "$CYCLES"); do
        kill -0 "$DAEMON_PID" 2>/dev/null || { not_ok "the daemon died before cycle $i"; break; }
        if ! "$CTL" stage "/boot/vmlinuz-$NEW" --cmdline="root=/dev/vda1 ro" >/dev/null 2>"$T/cycle.err" ||
                ! "$CTL" cancel >/dev/null 2>>"$T/cycle.err"; then
                bad=$((bad + 1))
                [ "$bad" -le 3 ] && sed "s/^/# cycle $i: /" "$T/cycle.err"
        fi
        echo "$i $(rss_kib) $(heapstat s)" >>"$T/rss"
done
rss_before=$(rss_kib) trimmed=$(heapstat t) rss_after=$(rss_kib)
check "the daemon answers mallinfo2() (libheapstat.so)" test "${trimmed%% *}" != -
check "$CYCLES Stage/Cancel cycles in $((SECONDS - t0)) s, none failed ($bad)" test "$bad" -eq 0
check "the daemon is still running" kill -0 "$DAEMON_PID"

[ "$(wc -l <"$T/rss")" -ge 10 ] && python3 - "$T/rss" "$rss_before" "$rss_after" "$trimmed" <<'PY'
import math, sys
rows = [l.split() for l in open(sys.argv[1])]
rows = [r for r in rows if len(r) == 5 and "-" not in r]


def fit(name, pts):
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
    print("# %s (KiB) every %d cycles: %s" % (name, step, " ".join(
        "%d:%.0f" % (x, y) for x, y in pts[step - 1::step])))
    print(f"# {name}: {pts[0][1]:.0f} KiB after cycle 1, {half[0][1]:.0f} KiB after cycle "
          f"{half[0][0]:.0f}, {pts[-1][1]:.0f} KiB after cycle {pts[-1][0]:.0f}")
    print(f"# {name} slope over the last {n} cycles: {slope:+.4f} KiB/cycle, standard error "
          f"{se:.4f} (95 %: {slope - 1.96 * se:+.4f} .. {slope + 1.96 * se:+.4f}); residuals' sd "
          f"{sd:.1f} KiB; total change over them {slope * (n - 1):+.1f} KiB")


if len(rows) >= 10:
    fit("VmRSS", [(float(r[0]), float(r[1])) for r in rows])
    fit("heap in use", [(float(r[0]), (float(r[2]) + float(r[4])) / 1024) for r in rows])
    fit("heap free, not returned", [(float(r[0]), float(r[3]) / 1024) for r in rows])
t = sys.argv[4].split()
if "-" not in t:
    print(f"# at the end: VmRSS {sys.argv[2]} KiB; malloc_trim(0) then left {sys.argv[3]} KiB, "
          f"heap in use {(int(t[0]) + int(t[2])) / 1024:.0f} KiB, free {int(t[1]) / 1024:.0f} KiB")
PY
stop_daemon
DAEMON_PID=

echo "1..$n"
[ "$failures" -eq 0 ]
