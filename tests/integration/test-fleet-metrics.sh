#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The node_exporter textfile (docs/fleet.md) end to end: the real daemon on a private bus
# writes <root>/var/lib/prometheus/node-exporter/upgraded.prom at start, after a stage and
# after the update finished; Debian's prometheus-node-exporter, started here on loopback with
# its textfile collector on that directory, serves our series; `promtool check metrics`
# (Debian's prometheus) accepts the file and the scrape. Both are stopped by PID.
#
# usage: test-fleet-metrics.sh UPGRADED UPGRADECTL BUS_CONF_IN POLICY_CONF MAKE_BZIMAGE
set -uo pipefail

UPGRADED=$1 CTL=$2 BUS_CONF_IN=$3 POLICY=$4 MAKE_BZIMAGE=$5

. "$(dirname "$0")/lib.sh"
test_begin fleet-metrics "private dbus-daemon, root-owned images" dbus-daemon busctl python3 curl prometheus-node-exporter promtool
DBUS_PID= DAEMON_PID= NE_PID=
. "$(dirname "$0")/fleet-lib.sh"
PROM=$ROOT$TEXTFILE_DIR/upgraded.prom

trap 'fleet_cleanup "$NE_PID $DAEMON_PID $DBUS_PID" "$T/node-exporter.log" "$PROM"' EXIT

# has_line REGEX: a line of the textfile matches (whole line).
has_line() { grep -qxE -- "$1" "$PROM"; }

fleet_root
start_bus "$BUS_CONF_IN" "$POLICY"

check "the daemon starts" fleet_start_daemon start
check "at start: the textfile exists, idle, no update finished" \
        bash -c "grep -qx 'upgraded_state{state=\"idle\"} 1' '$PROM' && ! grep -q upgraded_last_update '$PROM'"
check "at start: upgraded_info names the running kernel and the backend" \
        has_line "upgraded_info\{version=\"[^\"]+\",running_kernel=\"$(uname -r)\",backend=\"record\",architecture=\"$(uname -m | sed 's/aarch64/arm64/')\"\} 1"
check "node_exporter reads only *.prom: no temporary file left" \
        test "$(ls "$ROOT$TEXTFILE_DIR")" = upgraded.prom

ID=$("$CTL" stage "$KERNEL" --cmdline="root=/dev/vda1 ro")
check "after the stage: state staged" has_line 'upgraded_state\{state="staged"\} 1'
check "after the stage: the staged kernel as labels of an info metric" \
        has_line "upgraded_staged_kernel_info\{id=\"$ID\",version=\"$NEW\",path=\"$KERNEL\"\} 1"
check "after the stage: its timestamp" has_line 'upgraded_staged_timestamp_seconds [0-9]{10}(\.[0-9]+)?'
"$CTL" cancel "$ID" >/dev/null
check "after a cancel: idle, a cancelled record, nothing staged" \
        bash -c "grep -qx 'upgraded_state{state=\"idle\"} 1' '$PROM' && grep -qx 'upgraded_update_records{state=\"cancelled\"} 1' '$PROM' && ! grep -q staged_kernel_info '$PROM'"

check "an update through the recorded kexec and 'the new kernel'" fleet_update
"$CTL" report --json >"$T/report.json"
check "after the update: success, its id and modes as labels" \
        has_line "upgraded_last_update_info\{id=\"$ID\",result=\"success\",old_kernel=\"$(uname -r)\",new_kernel=\"$NEW\",handoff_mode=\"verified\",backend=\"record\",timebase=\"[a-z]*\"\} 1"
check "after the update: upgraded_last_update_success 1" has_line 'upgraded_last_update_success 1'
check "after the update: start and finish timestamps (Unix seconds)" \
        bash -c "grep -qE '^upgraded_last_update_start_timestamp_seconds [0-9]{10}' '$PROM' && grep -qE '^upgraded_last_update_finish_timestamp_seconds [0-9]{10}' '$PROM'"
# The figures equal the report's, ns -> s; a null figure has no sample. On this machine "the
# new kernel" is the same boot, so the cross-kexec figures are null (no timebase): their
# absence is what is checked here; test-metrics formats a lab report's real figures.
check "every figure equals the report's (ns -> s), nulls left out" python3 - "$T/report.json" "$PROM" <<'EOF'
import json, re, sys
r = json.load(open(sys.argv[1]))
prom = {}
for line in open(sys.argv[2]):
    if not line.startswith("#"):
        k, v = line.rsplit(" ", 1)
        prom[k] = float(v)
want = {
    "upgraded_last_update_host_blackout_seconds": r["totals"]["host_blackout_ns"],
    "upgraded_last_update_max_vm_downtime_seconds": r["totals"]["max_vm_downtime_ns"],
    "upgraded_last_update_median_vm_downtime_seconds": r["totals"]["median_vm_downtime_ns"],
    "upgraded_last_update_uncertainty_seconds": r["totals"]["uncertainty_ns"],
    "upgraded_last_update_purgatory_verify_seconds": r["purgatory"]["verify_ns"],
}
for v in r["vms"]:
    d = v["downtime"]
    if d["ns"] is not None:
        want['upgraded_last_update_vm_downtime_seconds{vm="%s",source="%s"}' % (v["name"], d["source"])] = d["ns"]
bad = []
for k, ns in want.items():
    if ns is None:
        if k in prom: bad.append("%s present for a null figure" % k)
    elif k not in prom or abs(prom[k] - ns / 1e9) > 1e-9:
        bad.append("%s: %s != %s" % (k, prom.get(k), ns / 1e9))
print("# compared:", ", ".join("%s=%s" % (k.split("upgraded_last_update_")[1], prom.get(k)) for k in want))
sys.exit("\n".join(bad) if bad else 0)
EOF
check "promtool check metrics accepts the textfile" bash -c "promtool check metrics <'$PROM' >'$T/promtool.out' 2>&1"
sed 's/^/# promtool: /' "$T/promtool.out"

# ---- the real node_exporter on loopback ----
PORT=$(free_port)
prometheus-node-exporter --web.listen-address="127.0.0.1:$PORT" --collector.disable-defaults \
        --collector.textfile --collector.textfile.directory="$ROOT$TEXTFILE_DIR" \
        >"$T/node-exporter.log" 2>&1 &
NE_PID=$!
for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$PORT/metrics" >"$T/scrape.txt" 2>/dev/null && break
        sleep 0.1
done
check "node_exporter serves our series" \
        bash -c "grep -qx 'upgraded_last_update_success 1' '$T/scrape.txt' && grep -q '^upgraded_last_update_info{' '$T/scrape.txt' && grep -q '^upgraded_state{state=\"idle\"} 1' '$T/scrape.txt'"
check "node_exporter parsed the file without error" grep -qx 'node_textfile_scrape_error 0' "$T/scrape.txt"
check "node_exporter saw the file's mtime" grep -q '^node_textfile_mtime_seconds{file=".*upgraded.prom"}' "$T/scrape.txt"
check "promtool check metrics accepts the whole scrape" bash -c "promtool check metrics <'$T/scrape.txt' >'$T/promtool-scrape.out' 2>&1"
sed 's/^/# scrape: /' <(grep '^upgraded_' "$T/scrape.txt")
stop_pid "$NE_PID"
NE_PID=
check "node_exporter stopped" bash -c "! curl -sf 'http://127.0.0.1:$PORT/metrics' >/dev/null"

# ---- a missing directory: no metrics, no error, the update unaffected ----
stop_pid "$DAEMON_PID"
DAEMON_PID=
rm -rf "${ROOT:?}$TEXTFILE_DIR"
check "without node_exporter's directory the daemon starts" fleet_start_daemon no-dir
check "... and does not create it" test ! -e "$ROOT$TEXTFILE_DIR"
mkdir -p "$ROOT/etc/upgraded" "$ROOT/srv/metrics"
printf '[Metrics]\nTextfileDirectory=/srv/metrics\n' >"$ROOT/etc/upgraded/upgraded.conf"
stop_pid "$DAEMON_PID"
DAEMON_PID=
check "the daemon starts with [Metrics] TextfileDirectory=/srv/metrics" fleet_start_daemon conf
check "... and writes the file there (under --root)" \
        grep -qx 'upgraded_last_update_success 1' "$ROOT/srv/metrics/upgraded.prom"

echo "1..$n"
[ "$failures" -eq 0 ]
