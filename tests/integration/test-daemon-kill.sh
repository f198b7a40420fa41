#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The daemon killed (SIGKILL) right after every persisted step of stage and commit, with two
# real TCG guests of a private libvirtd (run inside tests/integration/vm/private-libvirtd).
# The daemon is the test build upgraded-test-crash-points: it numbers every persisted step
# and kills itself after step N (UPGRADED_TEST_CRASH_AT=N). The machine has a crash kernel
# reservation, so staging also loads the crash image (one more step).
#
#   1. A run without a kill counts the steps of each daemon start: the old kernel's
#      (stage, commit up to the kexec request) and the new kernel's (restore, done).
#   2. For every step N of either start: kill there, start the daemon again (same boot, or
#      the new kernel once the kexec was requested) until the update is finished. After
#      the kill the record must parse and be in a legal state; at the end the update is
#      done (or failed with a reason and rolled back), its report validates, no step ran
#      twice (no repeated phase stamp or step mark, one kernel load, one crash image load,
#      at most one kexec request) and both guests run with their counters continued (a
#      lost save image would mean a fresh boot or a VM that stays off).
#   3. Kills inside the rollback itself: the commit killed after the guests were saved,
#      then the recovering daemon killed at each step of its rollback.
#
# usage: test-daemon-kill.sh UPGRADED UPGRADECTL BUS_CONF_IN BUS_POLICY MAKE_BZIMAGE VALIDATE
#                            SCHEMA COUNTER_BIN UPGRADED_CRASH_POINTS
# (the arguments of the other daemon tests; the daemon run is the last one, the test build)
set -uo pipefail

CTL=$2 BUS_CONF_IN=$3 POLICY=$4 MAKE_BZIMAGE=$5 VALIDATE=$6 SCHEMA=$7 COUNTER=$8 UPGRADED=$9
OLD=6.1.0-47-cloud-amd64 NEW=6.1.0-57-cloud-amd64
BOOT_A=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa BOOT_B=bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb
COUNTER_ADDR=0x600
GUESTS=${UPGRADED_KILL_GUESTS:-vm-a vm-b}
URI=${LIBVIRT_TEST_URI:?run me through private-libvirtd}
. "$(dirname "$0")/lib.sh"
test_begin kill "a private libvirtd" dbus-daemon busctl virsh python3
DBUS_PID= DAEMON_PID=
kills=0 waits=0
cleanup() {
        for pid in $DAEMON_PID $DBUS_PID; do
                kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
        done
        [ "$failures" -ne 0 ] && { echo "--- daemon logs of the last scenario"; tail -n 40 "$T"/last/*.log 2>/dev/null; }
        rm -rf "$T"
}
trap cleanup EXIT

# ---- the root (with a crash kernel reservation), the bus, the guests ----
mkdir -p "$ROOT/boot" "$ROOT/sys/kernel" "$ROOT/etc/upgraded"
python3 "$MAKE_BZIMAGE" "$ROOT/boot/vmlinuz-$NEW" "$NEW" && chmod 0644 "$ROOT/boot/vmlinuz-$NEW"
head -c 4096 /dev/urandom >"$ROOT/boot/initrd.img-$NEW" && chmod 0644 "$ROOT/boot/initrd.img-$NEW"
echo 268435456 >"$ROOT/sys/kernel/kexec_crash_size"
# The firmware's memory map, which stage saves for the panic path (no map, no crash image).
memmap_range() { # memmap_range N START END TYPE
        mkdir -p "$ROOT/sys/firmware/memmap/$1"
        echo "$2" >"$ROOT/sys/firmware/memmap/$1/start"
        echo "$3" >"$ROOT/sys/firmware/memmap/$1/end"
        echo "$4" >"$ROOT/sys/firmware/memmap/$1/type"
}
memmap_range 0 0x0 0x9fbff "System RAM"
memmap_range 1 0x100000 0x7fffffff "System RAM"
start_bus "$BUS_CONF_IN" "$POLICY"

for vm in $GUESTS; do define_guest "$vm"; done
for vm in $GUESTS; do check "$vm counts" wait_counter "$vm" 20; done

# ---- one daemon start ----
# start_daemon KILL_AT LOG BOOT_ID KERNEL: 0 when it serves, 1 when it died first.
start_daemon() {
        UPGRADED_TEST_CRASH_AT=$1 "$UPGRADED" --root="$ROOT" --libvirt-uri="$URI" \
                --backend=record --kexec-trigger=record --boot-id="$3" --running-kernel="$4" \
                >"$T/last/$2.log" 2>&1 &
        DAEMON_PID=$!
        wait_for_daemon || return 1
        # The bus name comes before the recovery (a job): wait for its end, or the daemon's
        # death at a crash point inside it.
        for _ in $(seq 1200); do
                grep -q 'Recovery done' "$T/last/$2.log" && return 0
                kill -0 "$DAEMON_PID" 2>/dev/null || return 1
                sleep 0.1
        done
        return 1
}
# reap_daemon: waits for a daemon that died or stops one that serves; HOW is "killed" when it
# died by SIGKILL, "stopped" after a clean SIGTERM exit, "exit N" otherwise.
reap_daemon() {
        local rc
        kill -0 "$DAEMON_PID" 2>/dev/null && kill "$DAEMON_PID"
        wait "$DAEMON_PID"
        rc=$?
        DAEMON_PID=
        case $rc in
        137) HOW=killed ;;
        0) HOW=stopped ;;
        *) HOW="exit $rc" ;;
        esac
}

# The update record: parses, and its state and phase go together (docs/state-machine.md).
record_legal() {
        python3 - "$ROOT/var/lib/upgraded/updates" <<'PY'
import json, os, sys
legal = {"staged": {"staged"}, "committing": {"pre-handoff", "handoff", "handoff-requested", "rollback"},
         "completing": {"post-boot"}, "done": {"done"}, "failed": {"failed"}, "cancelled": {"cancelled"}}
files = [f for f in os.listdir(sys.argv[1]) if f.endswith(".json")] if os.path.isdir(sys.argv[1]) else []
for f in files:
    d = json.load(open(os.path.join(sys.argv[1], f)))
    if d["id"] + ".json" != f or d["phase"] not in legal.get(d["state"], ()):
        sys.exit("%s: %s/%s" % (f, d["state"], d["phase"]))
sys.exit(0 if len(files) <= 1 else "%d records" % len(files))
PY
}
# state_of: "none" or "STATE/PHASE" of the one record.
state_of() {
        python3 -c 'import json,glob,sys; f=glob.glob(sys.argv[1]+"/*.json"); d=json.load(open(f[0])) if f else None; print(d["state"]+"/"+d["phase"] if d else "none")' \
                "$ROOT/var/lib/upgraded/updates"
}

# scenario NAME [START:STEP]...: one update from stage to its end, killed at STEP of the
# daemon's START-th start for each pair. Sets RESULT (done/failed/stuck) and LOADS.
scenario() {
        local name=$1 start=0 boot=$BOOT_A kernel=$OLD at spec st WAIT_RC
        shift
        rm -rf "$T/last" "$ROOT/var/lib/upgraded" "$ROOT/run/upgraded"
        mkdir -p "$T/last"
        RESULT=stuck
        for _ in $(seq 8); do
                start=$((start + 1))
                at=0 st=none WAIT_RC=0
                for spec in "$@"; do [ "${spec%%:*}" = "$start" ] && at=${spec#*:}; done
                if start_daemon "$at" "$start" "$boot" "$kernel"; then
                        st=$(state_of)
                        case $st in
                        none) "$CTL" stage "/boot/vmlinuz-$NEW" --initrd="/boot/initrd.img-$NEW" \
                                        --cmdline="root=/dev/vda1 ro" >/dev/null 2>&1 ;;
                        staged/*)
                                "$CTL" commit --wait >/dev/null 2>"$T/commit.err"
                                WAIT_RC=$? ;;
                        done/* | failed/*) RESULT=${st%%/*} ;;
                        esac
                fi
                reap_daemon
                if [ "$HOW" = killed ]; then
                        kills=$((kills + 1))
                        # Killed inside the commit (the job persists before Commit answers, so
                        # some kills come before the answer): --wait says so and exits 8.
                        if [ "$st" = staged/staged ] && [ "$at" -ge 2 ]; then
                                if [ "$WAIT_RC" -eq 8 ] && grep -qE 'upgraded stopped (while the update was in phase|before it answered Commit)' "$T/commit.err"; then
                                        waits=$((waits + 1))
                                else
                                        not_ok "$name: commit --wait exits 8 when the daemon dies (exit $WAIT_RC: $(cat "$T/commit.err"))"
                                fi
                        fi
                        record_legal >"$T/legal" 2>&1 || not_ok "$name: after the kill in start $start the record is legal: $(cat "$T/legal")"
                elif [ "$HOW" != stopped ]; then
                        not_ok "$name: daemon start $start ended with $HOW"
                        return
                fi
                [ "$RESULT" != stuck ] && break
                # systemd accepted the kexec: the next start is the new kernel's.
                if [ "$(state_of)" = committing/handoff-requested ] && [ "$boot" = "$BOOT_A" ]; then
                        boot=$BOOT_B kernel=$NEW
                fi
        done
        STARTS=$start
}

# steps_of LOG: how many steps that daemon start persisted.
steps_of() { grep -c 'Crash point [0-9]*: update' "$T/last/$1.log"; }

# The end of a scenario: everything the update did once, and the guests as they were.
verify() { # verify NAME (BEFORE: each guest's count before the scenario)
        local name=$1 id rec rc
        rec=$(ls "$ROOT"/var/lib/upgraded/updates/*.json 2>/dev/null | head -1)
        id=$(basename "$rec" .json)
        if [ "$RESULT" = stuck ] || [ -z "$rec" ]; then
                not_ok "$name: the update did not finish ($(state_of))"
                return
        fi
        python3 - "$rec" "$ROOT/run/upgraded/kexec-record.json" "$RESULT" <<'PY' >"$T/why" 2>&1
import json, sys
u = json.load(open(sys.argv[1])); rec = json.load(open(sys.argv[2]))
stamps = [p["name"] for p in u["phases"]]
loads = [r for r in rec["requests"] if r["op"] == "load"]
problems = []
if len(stamps) != len(set(stamps)): problems.append("a phase stamped twice: %s" % stamps)
if len(u["hooks_done"]) != len(set(u["hooks_done"])): problems.append("a step marked twice: %s" % u["hooks_done"])
if sum(not r["panic"] for r in loads) != 1: problems.append("%d kernel loads" % sum(not r["panic"] for r in loads))
if sum(r["panic"] for r in loads) != 1: problems.append("%d crash image loads" % sum(r["panic"] for r in loads))
if not u["crash_image_loaded"]: problems.append("crash_image_loaded is false")
if sys.argv[3] == "failed" and not u["error"]: problems.append("failed without a reason")
if sys.argv[3] == "failed" and (rec["loaded"] or rec["crash_loaded"]): problems.append("image left loaded after the rollback")
for v in u.get("vms") or []:
    if v["result"] not in ("resumed", "rolled-back", "ignored"): problems.append("VM %s ended %s" % (v["name"], v["result"]))
print(("(" + "; ".join(problems) + ")") if problems else "")
sys.exit(1 if problems else 0)
PY
        rc=$?
        check "$name: $RESULT, each step once $(cat "$T/why")" test "$rc" -eq 0
        check "$name: at most one kexec request" test "$(cat "$T"/last/*.log | grep -c 'requesting kexec into')" -le 1
        check "$name: the report validates" python3 "$VALIDATE" "$SCHEMA" "$ROOT/var/lib/upgraded/reports/$id.json"
        local vm c ok=1 seen=
        for vm in $GUESTS; do
                c=$(counter $vm)
                seen+=" $vm ${BEFORE[$vm]} -> $c"
                [ "$(V domstate $vm)" = running ] && [ "$c" -ge "${BEFORE[$vm]}" ] || ok=0
                ! virsh -c "$URI" dominfo $vm | grep -qE 'Managed save: +yes' || ok=0
        done
        check "$name: every guest runs, its count continued, no save image left ($seen)" test $ok = 1
        # Whatever went wrong, the next scenario starts with every guest running.
        for vm in $GUESTS; do [ "$(V domstate $vm)" = running ] || V start $vm >/dev/null 2>&1; done
}

declare -A BEFORE
run() { # run NAME [START:STEP]...
        local vm
        for vm in $GUESTS; do BEFORE[$vm]=$(counter $vm); done
        scenario "$@"
        verify "$1"
}

# ---- 1. without a kill: the steps of each start ----
run "no kill"
# Start 1 stages, start 2 (the same boot) commits, start 3 is the new kernel's.
S_STAGE=$(steps_of 1) S_COMMIT=$(steps_of 2) S_NEW=$(steps_of 3)
grep -h 'Crash point' "$T"/last/[123].log | sed 's/^/# /'
# The last step before the handoff record: the guests' save images are on disk.
S_SAVED=$(grep -c 'committing/pre-handoff' "$T/last/2.log")
check "the run without a kill took 3 daemon starts" test "$STARTS" -eq 3
check "stage persists 2 steps (record, crash image)" test "$S_STAGE" -eq 2
check "commit persists at least 6 steps" test "$S_COMMIT" -ge 6
check "the new kernel persists at least 3 steps" test "$S_NEW" -ge 3

# ---- 2. a kill after every step ----
for s in $(seq "$S_STAGE"); do run "stage, kill at step $s" "1:$s"; done
for s in $(seq "$S_COMMIT"); do run "commit, kill at step $s" "2:$s"; done
for s in $(seq "$S_NEW"); do run "new kernel, kill at step $s" "3:$s"; done

# ---- 3. the rollback killed: the commit dies once both guests are saved ----
run "commit killed with the guests saved" "2:$S_SAVED"
S_ROLL=$(steps_of 3)
grep -h 'Crash point' "$T/last/3.log" | sed 's/^/# rollback: /'
check "the rollback persists steps" test "$S_ROLL" -ge 2
for s in $(seq "$S_ROLL"); do run "rollback, kill at step $s" "2:$S_SAVED" "3:$s"; done

check "commit --wait noticed each daemon killed after Commit answered ($waits times)" test "$waits" -ge $((S_COMMIT - 1))
echo "# kill points exercised: $kills (stage $S_STAGE, commit $S_COMMIT, new kernel $S_NEW, rollback $S_ROLL)"
echo "1..$n"
[ "$failures" -eq 0 ]
