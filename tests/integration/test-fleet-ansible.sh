#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# contrib/ansible's rolling update (docs/fleet.md) driven by Debian's ansible-playbook across
# three real daemons per scenario, each "host" with its own --root, its own private
# dbus-daemon and the test-only record backend and trigger (this machine never kexecs). The
# inventory's hosts use ansible_connection=local; each host's upgradectl reaches its daemon
# through DBUS_SYSTEM_BUS_ADDRESS in upgraded_environment.
#
# The test plays the part of the machine: while ansible-playbook runs, a host whose record
# trigger fired (<root>/run/upgraded/kexec-requested.json) is "rebooted": its daemon stopped,
# BOOT_DELAY later started again as the new kernel (--running-kernel, a new --boot-id), which
# completes the update and writes its report, as fleet_update does. The role only polls the
# host's state; nothing in it knows about the harness.
#
# Each host runs five VMs of libvirt's test driver. Scenarios: (1) serial 1, h2's gate is tighter than its downtime: h1 done, h2 fails, h3 never
# commits; (2) serial 2, r2's policy refuses the commit: r1 of the same batch still finishes,
# r3 never commits; (3) serial 2 (batches 2+1), all pass, the summary's percentiles equal
# those of the gathered reports, check mode and a second run change nothing.
#
# usage: test-fleet-ansible.sh UPGRADED UPGRADECTL BUS_CONF_IN POLICY_CONF MAKE_BZIMAGE ANSIBLE_DIR
set -uo pipefail

UPGRADED=$1 CTL=$(realpath "$2") BUS_CONF_IN=$3 POLICY=$4 MAKE_BZIMAGE=$5 ANSIBLE_DIR=$6

. "$(dirname "$0")/lib.sh"
test_begin fleet-ansible "private dbus-daemon, root-owned images" dbus-daemon busctl python3 ansible-playbook
. "$(dirname "$0")/fleet-lib.sh"
BOOT_DELAY=1 # seconds "the new kernel" takes to come up: every VM's downtime exceeds it
VMS=5        # running VMs per host (libvirt's test driver): 10 in a batch of 2, p90 != max

# Every PID this test started, stopped at exit (services, then daemons, then buses).
all_pids() { cat "$T"/*/daemon.pid "$T"/*/bus.pid 2>/dev/null | tr '\n' ' '; }
trap 'fleet_cleanup "$APB_PID $(all_pids)" "$T"/*/daemon-*.log "$T"/ansible-*.log' EXIT
APB_PID=

# host_up NAME: a root, a bus and a daemon for host NAME under $T/NAME.
host_up() {
        local T=$T/$1 ROOT DBUS_PID DAEMON_PID DBUS_SYSTEM_BUS_ADDRESS
        ROOT=$T/root
        mkdir -p "$T" && fleet_root && start_bus "$BUS_CONF_IN" "$POLICY" || return 1
        echo "$DBUS_PID" >"$T/bus.pid"
        {
                echo "<node>"
                for i in $(seq "$VMS"); do
                        # A fixed UUID: each connection the daemon opens reads the file anew.
                        echo "<domain type='test'><name>vm$i</name><uuid>$(printf '00000000-0000-4000-8000-%012x' "$i")</uuid><memory>65536</memory><os><type>hvm</type></os></domain>"
                done
                echo "</node>"
        } >"$T/libvirt.xml"
        fleet_start_daemon start --libvirt-uri="test://$T/libvirt.xml"
        local rc=$?
        echo "$DAEMON_PID" >"$T/daemon.pid"
        return $rc
}

# host_ctl NAME ARGS...: upgradectl on host NAME's bus.
host_ctl() { DBUS_SYSTEM_BUS_ADDRESS="unix:path=$T/$1/bus" "$CTL" "${@:2}"; }

# host_reboot NAME: the record trigger fired on NAME: stop its daemon ("the old kernel" is
# gone), then start it as the new kernel.
host_reboot() {
        local T=$T/$1 ROOT DAEMON_PID DBUS_SYSTEM_BUS_ADDRESS
        ROOT=$T/root
        export DBUS_SYSTEM_BUS_ADDRESS="unix:path=$T/bus"
        mv "$ROOT/run/upgraded/kexec-requested.json" "$T/kexec-requested.json"
        stop_pid "$(cat "$T/daemon.pid")"
        sleep "$BOOT_DELAY"
        fleet_start_daemon "new-kernel-$(date +%s%N)" --libvirt-uri="test://$T/libvirt.xml" --running-kernel="$NEW" \
                --boot-id="$(tr -d '-' </proc/sys/kernel/random/uuid)"
        echo "$DAEMON_PID" >"$T/daemon.pid"
}

hosts_down() {
        local h
        for h in "$@"; do
                stop_pid "$(cat "$T/$h/daemon.pid")"
                stop_pid "$(cat "$T/$h/bus.pid")"
                rm -f "$T/$h/daemon.pid" "$T/$h/bus.pid"
        done
}

# inventory FILE HOST...: the hosts in group "upgraded", local connections, each on its bus.
inventory() {
        local f=$1 h
        shift
        {
                echo "upgraded:"
                echo "  hosts:"
                for h in "$@"; do
                        echo "    $h:"
                        echo "      upgraded_environment: {DBUS_SYSTEM_BUS_ADDRESS: \"unix:path=$T/$h/bus\"}"
                done
                cat <<EOF
  vars:
    ansible_connection: local
    ansible_python_interpreter: /usr/bin/python3
    # Already root; this machine has no sudo.
    ansible_become: false
    upgraded_upgradectl: $CTL
    upgraded_kernel: $KERNEL
    upgraded_poll_interval_s: 1
    upgraded_update_timeout_s: 120
EOF
        } >"$f"
}

# playbook NAME ARGS...: ansible-playbook rolling-update.yml in the background, while the
# hosts whose record trigger fires are "rebooted"; its output in $T/ansible-NAME.log, its
# exit status in APB_RC.
playbook() {
        local name=$1 f h
        shift
        env ANSIBLE_CONFIG="$ANSIBLE_DIR/ansible.cfg" ANSIBLE_HOME="$T/ansible-home" \
                ANSIBLE_LOCAL_TEMP="$T/ansible-tmp" ANSIBLE_REMOTE_TEMP="$T/ansible-tmp" \
                ANSIBLE_NOCOLOR=1 ANSIBLE_STDOUT_CALLBACK=default ANSIBLE_PIPELINING=1 \
                PYTHONDONTWRITEBYTECODE=1 \
                ansible-playbook "$ANSIBLE_DIR/rolling-update.yml" "$@" \
                >"$T/ansible-$name.log" 2>&1 &
        APB_PID=$!
        while kill -0 "$APB_PID" 2>/dev/null; do
                for f in "$T"/*/root/run/upgraded/kexec-requested.json; do
                        [ -e "$f" ] || continue
                        h=${f#"$T/"}
                        host_reboot "${h%%/*}"
                done
                sleep 0.2
        done
        wait "$APB_PID"
        APB_RC=$?
        APB_PID=
        sed "s/^/# $name: /" "$T/ansible-$name.log" | grep -E '^# [a-z0-9-]+: +("|- )?(upgraded rolling|batch|  |failed|not committed|result|PLAY RECAP|[a-z][0-9] +:)' || true
}

state_of() { host_ctl "$1" show -p State --value; }
is_idle() { [ "$(state_of "$1")" = idle ]; }
every() { # every PREDICATE NAME...: PREDICATE holds for each host
        local f=$1 h
        shift
        for h in "$@"; do "$f" "$h" || return 1; done
}
one_update_done() { # NAME: the host knows exactly one update, and it is done
        host_ctl "$1" describe --json |
                python3 -c 'import json,sys; u=json.load(sys.stdin)["updates"]; sys.exit(not (len(u) == 1 and u[0]["state"] == "done"))'
}
summary_has() { grep -qF -- "$2" "$1"; }
never_committed() { # NAME: its update is still staged and its trigger never fired
        [ "$(state_of "$1")" = staged ] && [ ! -e "$T/$1/kexec-requested.json" ]
}
done_on_new_kernel() { # NAME DIR: the update is done and its report was gathered on the controller
        local state report
        state=$(state_of "$1")
        report=$(host_ctl "$1" report 2>&1)
        [ "$state" = idle ] && grep -q "Result: success" <<<"$report" &&
                ls "$2/reports/$1-"*.json >/dev/null 2>&1 && return 0
        # Say which part failed: the daemon's state, its report, or the controller's copy.
        echo "# $1: state '$state'; controller's reports: $(ls "$2/reports" 2>&1 | tr '\n' ' ')"
        sed "s/^/# $1: report: /" <<<"$report" | head -20
        return 1
}

# ---- 1: serial 1; h2's worst VM downtime exceeds its gate ----
for h in h1 h2 h3; do check "$h: daemon on its own bus and root" host_up "$h"; done
inventory "$T/inventory-1.yml" h1 h2 h3
# A per-host gate in the inventory: h2's VMs may be down half a second at most.
sed -i "/^    h2:/a\\      upgraded_max_vm_downtime_s: 0.5" "$T/inventory-1.yml"
playbook 1 -i "$T/inventory-1.yml" -e upgraded_serial=1 -e upgraded_rollout_dir="$T/rollout-1"
S=$T/rollout-1/summary.txt
check "1: ansible-playbook fails" test "$APB_RC" -ne 0
check "1: h1 (batch 1) updated, its report on the controller" done_on_new_kernel h1 "$T/rollout-1"
check "1: h2 (batch 2) updated, its report on the controller" done_on_new_kernel h2 "$T/rollout-1"
check "1: h3 (batch 3) never committed: its update is still staged" never_committed h3
check "1: the summary names h2 and the gate" summary_has "$S" "failed: h2: worst VM downtime "
check "1: ... with the limit it exceeded" grep -qE "failed: h2: worst VM downtime [0-9.]+ s \(VM vm[0-9]+, libvirt-wallclock\) exceeds the gate of 0.500 s$" "$S"
check "1: the summary: batch 1 ok, batch 2 FAILED" \
        bash -c "grep -q '^batch 1: h1: ok;' '$S' && grep -q '^batch 2: h2: FAILED (h2);' '$S'"
check "1: the summary: h3 not committed, rollout stopped" grep -qx "not committed (rollout stopped): h3" "$S"
check "1: the summary is printed by the playbook" grep -qF "not committed (rollout stopped): h3" "$T/ansible-1.log"
check "1: the play failed h2 at the gate" grep -q "h2 failed the rollout: worst VM downtime" "$T/ansible-1.log"
hosts_down h1 h2 h3

# ---- 2: serial 2; r2's policy refuses the commit ----
mkdir -p "$T/r2/root/etc/upgraded"
printf '[Commit]\nMaxVMs=0\n' >"$T/r2/root/etc/upgraded/upgraded.conf"
for h in r1 r2 r3; do check "$h: daemon on its own bus and root" host_up "$h"; done
inventory "$T/inventory-2.yml" r1 r2 r3
playbook 2 -i "$T/inventory-2.yml" -e upgraded_serial=2 -e upgraded_rollout_dir="$T/rollout-2"
S=$T/rollout-2/summary.txt
check "2: ansible-playbook fails" test "$APB_RC" -ne 0
check "2: r1, in r2's batch, still finished its update" done_on_new_kernel r1 "$T/rollout-2"
check "2: r2's refused update is still staged (nothing changed)" never_committed r2
check "2: r3 (batch 2) never committed" never_committed r3
check "2: the summary names r2 and the refusal" \
        grep -qE "^failed: r2: commit refused \(upgradectl exit 9\): .*too-many-vms" "$S"
check "2: the summary: batch 1 FAILED, r3 not committed" \
        bash -c "grep -q '^batch 1: r1 r2: FAILED (r2);' '$S' && grep -qx 'not committed (rollout stopped): r3' '$S'"
hosts_down r1 r2 r3

# ---- 3: serial 2 (batches 2+1), every host passes ----
for h in p1 p2 p3; do check "$h: daemon on its own bus and root" host_up "$h"; done
inventory "$T/inventory-3.yml" p1 p2 p3
playbook 3-check --check -i "$T/inventory-3.yml" -e upgraded_serial=3 -e upgraded_rollout_dir="$T/rollout-3-check"
check "3: check mode succeeds" test "$APB_RC" -eq 0
check "3: ... and stages nothing" every is_idle p1 p2 p3
check "3: the check-mode summary says each host would stage and commit" \
        grep -qE "^  p3 +check mode: would stage and commit" "$T/rollout-3-check/summary.txt"
playbook 3 -i "$T/inventory-3.yml" -e upgraded_serial=2 -e upgraded_rollout_dir="$T/rollout-3"
S=$T/rollout-3/summary.txt
check "3: ansible-playbook succeeds" test "$APB_RC" -eq 0
for h in p1 p2 p3; do check "3: $h updated, its report on the controller" done_on_new_kernel "$h" "$T/rollout-3"; done
check "3: two batches, p1 p2 then p3, result ok" \
        bash -c "grep -q '^batch 1: p1 p2: ok;' '$S' && grep -q '^batch 2: p3: ok;' '$S' && grep -qx 'result: ok' '$S'"
# The percentiles, recomputed here from the reports the role gathered (nearest rank over
# every VM of the batch; each VM's one downtime in the report, schema 2).
check "3: each batch's p50/p90/max and worst host equal the reports'" python3 - "$T/rollout-3" <<'EOF'
import glob, json, math, os, re, sys
d = sys.argv[1]
def downtimes(r):
    assert r["schema"] == 2
    return [v["downtime"]["ns"] for v in r["vms"]]
def rank(vals, p):
    vals = sorted(vals)
    return vals[max(1, math.ceil(p / 100 * len(vals))) - 1]
per_host = {}
for f in glob.glob(os.path.join(d, "reports", "*.json")):
    host = os.path.basename(f).split("-")[0]
    per_host[host] = downtimes(json.load(open(f)))
summary = open(os.path.join(d, "summary.txt")).read()
ok = True
for batch in (["p1", "p2"], ["p3"]):
    vals = [x for h in batch for x in per_host[h]]
    worst_host = max(batch, key=lambda h: max(per_host[h]))
    want = "batch %d: %s: ok; worst VM downtime %.3f s on %s; VM downtime p50 %.3f s, p90 %.3f s, max %.3f s over %d VM(s)" % (
        1 if len(batch) == 2 else 2, " ".join(batch), max(vals) / 1e9, worst_host,
        rank(vals, 50) / 1e9, rank(vals, 90) / 1e9, max(vals) / 1e9, len(vals))
    if want not in summary.splitlines():
        print("# want: " + want)
        ok = False
    if len(vals) != 5 * len(batch):
        print("# %d VM downtimes in batch %s" % (len(vals), batch))
        ok = False
    if min(vals) < 1e9:
        print("# a downtime below the harness's BOOT_DELAY: %s" % vals)
        ok = False
sys.exit(0 if ok else 1)
EOF
sed 's/^/# summary: /' "$S"
playbook 3-again -i "$T/inventory-3.yml" -e upgraded_serial=3 -e upgraded_rollout_dir="$T/rollout-3-again"
check "3: a second run succeeds" test "$APB_RC" -eq 0
check "3: ... stages nothing: each host still knows one update, done" every one_update_done p1 p2 p3
check "3: ... and commits nothing (no new report)" bash -c "! ls '$T'/rollout-3-again/reports/*.json >/dev/null 2>&1"
check "3: ... and says the hosts are up to date" grep -qE "^  p1 +up to date" "$T/rollout-3-again/summary.txt"
hosts_down p1 p2 p3

echo "1..$n"
[ "$failures" -eq 0 ]
