#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The real daemon on a private bus, managing two real TCG guests of a private libvirtd
# (run inside tests/integration/vm/private-libvirtd, which sets LIBVIRT_TEST_URI and stops
# libvirtd and QEMU by PID). The guests boot counter.s, which counts timer ticks in RAM:
#   1. commit --wait checkpoints both (record backend: the "kexec" is a file), a restart as
#      "the new kernel" restores them, each counter continues from where it was paused, the
#      report (validated) has both VMs with their downtime, and the vCPU probe's figures
#      of both "kernels" agree with libvirt's;
#   2. a save that fails (save directory full) rolls back: both running, counters continued,
#      no image left, the update failed naming the VM;
#   3. restore-vm: VMRunning for a running VM, and a VM saved by hand comes back.
# usage: test-daemon-vms.sh UPGRADED UPGRADECTL BUS_CONF_IN BUS_POLICY MAKE_BZIMAGE VALIDATE SCHEMA COUNTER_BIN
set -uo pipefail

# One save at a time, so that a full save directory fails the second one.
UPGRADED_CONF=$'[VM]\nSaveParallel=1\n'
. "$(dirname "$0")/daemon-vms-lib.sh"
vms_setup

# ---- 1. commit, "new kernel", restore ----
check "daemon starts" start_daemon old
ID=$("$CTL" stage "/boot/vmlinuz-$NEW" --cmdline="root=/dev/vda1 ro")
"$CTL" commit --dry-run >"$T/dry.out" 2>&1
check "dry run: both VMs checkpoint, preconditions met" bash -c "grep -qE '^  vm-a +checkpoint +running' '$T/dry.out' && grep -qE '^  vm-b +checkpoint +running' '$T/dry.out' && grep -q 'Preconditions: met' '$T/dry.out'"
before_a=$(counter vm-a) before_b=$(counter vm-b)
read_before=$(date +%s.%N)
t0=$(date +%s.%N)
"$CTL" commit --wait >"$T/commit.out" 2>&1
check "commit --wait exits 0" test $? -eq 0
sed 's/^/# /' "$T/commit.out"
check "commit --wait lists both VMs saved" bash -c "grep -qE '^vm-a +checkpoint +saved' '$T/commit.out' && grep -qE '^vm-b +checkpoint +saved' '$T/commit.out'"
check "both domains shut off with a managed save image" bash -c "[ \"\$(virsh -q -c '$URI' domstate vm-a)\" = 'shut off' ] && virsh -c '$URI' dominfo vm-b | grep -qE 'Managed save: +yes'"
stop_daemon
check "the new kernel's daemon restores" start_new_kernel_daemon new
t1=$(date +%s.%N)
# The name comes before the restore (a job behind it): wait for the update to end.
for _ in $(seq 1200); do
        case $("$CTL" show "$ID" -p State --value) in done | failed) break ;; esac
        sleep 0.1
done
check "update done" test "$("$CTL" show "$ID" -p State --value)" = done
after_a=$(counter vm-a) after_b=$(counter vm-b)
read_after=$(date +%s.%N)
echo "# counters: vm-a $before_a before commit -> $after_a after restore; vm-b $before_b -> $after_b"
# A fresh boot would start from 0. A VM that kept running would have counted through its
# downtime: between the two reads it may count only while it ran, (wall time - its
# downtime in the report) at 18.2065 Hz, plus a second's slack for the reads themselves.
# No bound on how fast the machine is: a loaded host only widens both sides.
"$CTL" report "$ID" --json >"$T/report-counters.json" 2>&1
continued() { # continued VM BEFORE AFTER
        python3 - "$T/report-counters.json" "$1" "$2" "$3" "$read_before" "$read_after" <<'PY'
import json, sys
rep, vm, before, after, t0, t1 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
down = [v for v in json.load(open(rep))["vms"] if v["name"] == vm][0]["downtime"]["ns"] / 1e9
ran = (t1 - t0) - down
limit = int(ran * 18.2065) + 19
print(f"# {vm}: +{after - before} ticks in {t1 - t0:.1f} s, down {down:.1f} s: at most {limit}")
sys.exit(0 if before <= after <= before + limit and down > 0 else 1)
PY
}
check "vm-a continued its count" continued vm-a "$before_a" "$after_a"
check "vm-b continued its count" continued vm-b "$before_b" "$after_b"
check "and keeps counting" bash -c "$(declare -f V counter wait_counter); URI='$URI' COUNTER_ADDR=$COUNTER_ADDR; wait_counter vm-a $((after_a + 5))"
"$CTL" report --json >"$T/report.json"
check "report validates against the schema" python3 "$VALIDATE" "$SCHEMA" "$T/report.json"
check "report: both VMs resumed with a downtime" test "$(json "$T/report.json" "sorted((v['name'], v['result'], v['downtime']['ns'] > 0) for v in d['vms'])")" = "[('vm-a', 'resumed', True), ('vm-b', 'resumed', True)]"
json "$T/report.json" "'\n'.join('# %s: saved %s bytes, save %.3f s, restore %.3f s, downtime %.3f s' % (v['name'], v['saved_bytes'], v['save_ns']/1e9, v['restore_ns']/1e9, v['downtime']['ns']/1e9) for v in d['vms'])"
echo "# commit start -> restored daemon up (external clock, includes the daemon restart): $(python3 -c "print('%.3f s' % ($t1 - $t0))")"
# The vCPU probe on both "kernels" (root, BTF): the restored QEMU's vCPU thread is
# tracked before the resume, and its first run is seen. Without a kexec both daemons
# share one CLOCK_MONOTONIC, so the probe's downtime (last vCPU run before the pause ->
# first after the resume) can be put next to libvirt's own (paused_at -> resumed_at,
# wall clock): they must agree within 250 ms (the probe's ends lie inside libvirt's,
# give or take the guest's 55 ms timer tick and the calls' own latency).
if [ -e /sys/kernel/btf/vmlinux ]; then
        check "probe: each VM's vCPU thread tracked on both kernels, first run after restore seen" \
                python3 - "$T/report.json" <<'PY'
import json, sys
from datetime import datetime
r = json.load(open(sys.argv[1]))
vms = {v['name']: v for v in r['vms']}
def at(s):  # schema 2's ISO 8601 UTC instant -> seconds
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
ok = True
for k in ('old', 'new'):
    if not (r['probe'][k] or {}).get('available'):
        print(f"# probe {k}: unavailable: {r['probe'][k]}")
        ok = False
for name in sorted(vms):
    old = next(v for v in r['probe']['old']['vms'] if v['name'] == name)
    new = next(v for v in r['probe']['new']['vms'] if v['name'] == name)
    last, first = old.get('vcpu_last_ran_ns'), new.get('vcpu_first_ran_ns')
    m = new['marks_ns']
    if old['threads'] < 1 or new['threads'] < 1 or not last or not first:
        print(f"# {name}: threads {old['threads']}/{new['threads']}, last {last}, first {first}")
        ok = False
        continue
    if not m['restore'] <= new['window_ns'] <= first <= m['resume'] + 10**9:
        print(f"# {name}: restore {m['restore']} window {new['window_ns']} first {first} resume {m['resume']}")
        ok = False
    probe_s = (first - last) / 1e9
    libvirt_s = at(vms[name]['resumed_at']) - at(vms[name]['paused_at'])
    print(f"# {name}: probe downtime {probe_s:.3f} s, libvirt {libvirt_s:.3f} s, "
          f"resume returned {(m['resume'] - first) / 1e6:+.1f} ms after the first vCPU run")
    ok = ok and abs(probe_s - libvirt_s) <= 0.25
sys.exit(0 if ok else 1)
PY
fi
stop_daemon

# ---- 2. the save directory is full: rollback ----
check "daemon starts again" start_daemon old2
ID2=$("$CTL" stage "/boot/vmlinuz-$NEW" --cmdline="root=/dev/vda1 ro")
size=$(V dominfo vm-a >/dev/null; json "$T/report.json" "d['vms'][0]['saved_bytes']")
mount -o remount,size=$((size * 3 / 2)) /var/lib/libvirt/qemu/save
t_before=$(date +%s.%N)
before_a=$(counter vm-a) before_b=$(counter vm-b)
"$CTL" commit --wait >"$T/commit2.out" 2>&1
check "commit --wait exits 1 when a save fails" test $? -eq 1
sed 's/^/# /' "$T/commit2.out"
mount -o remount,size=64m /var/lib/libvirt/qemu/save
check "the update failed naming the VM" bash -c "'$CTL' show '$ID2' -p Error --value | grep -q \"VM 'vm-\""
check "both running again" bash -c "[ \"\$(virsh -q -c '$URI' domstate vm-a)\" = running ] && [ \"\$(virsh -q -c '$URI' domstate vm-b)\" = running ]"
after_a=$(counter vm-a) after_b=$(counter vm-b)
t_after=$(date +%s.%N)
echo "# counters: vm-a $before_a -> $after_a, vm-b $before_b -> $after_b"
# Continued, not restarted (a fresh boot counts from 0), and no faster than the wall clock
# allows at 18.2065 Hz (plus a second's slack): a bound a loaded machine cannot break.
ticks_within() { # ticks_within BEFORE AFTER T0 T1
        python3 -c 'import sys; b, a, t0, t1 = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]); sys.exit(0 if b <= a <= b + int((t1 - t0) * 18.2065) + 19 else 1)' "$@"
}
check "counters continued after the rollback" bash -c "$(declare -f ticks_within); ticks_within $before_a $after_a $t_before $t_after && ticks_within $before_b $after_b $t_before $t_after"
check "no managed save image left" bash -c "! virsh -c '$URI' dominfo vm-a | grep -qE 'Managed save: +yes' && ! virsh -c '$URI' dominfo vm-b | grep -qE 'Managed save: +yes'"
check "failure report validates" python3 "$VALIDATE" "$SCHEMA" "$ROOT/var/lib/upgraded/reports/$ID2.json"

# ---- 3. restore-vm ----
"$CTL" restore-vm vm-a >"$T/out" 2>"$T/err"
check "restore-vm of a running VM -> VMRunning (exit 6)" bash -c "[ $? -eq 6 ] && grep -q VMRunning '$T/err'"
t_before=$(date +%s.%N)
c=$(counter vm-b)
V managedsave vm-b >/dev/null
check "restore-vm brings a saved VM back" "$CTL" restore-vm vm-b
after_b=$(counter vm-b)
t_after=$(date +%s.%N)
echo "# vm-b: $c before the manual save, $after_b after restore-vm"
check "vm-b running with its count continued" bash -c "[ \"\$(virsh -q -c '$URI' domstate vm-b)\" = running ] && $(declare -f ticks_within); ticks_within $c $after_b $t_before $t_after"
stop_daemon

# Every report this run produced, not only the ones looked at above.
reports=("$ROOT"/var/lib/upgraded/reports/*.json)
check "all ${#reports[@]} reports on disk validate against the schema" \
        bash -c '[ -e "$3" ] && exec python3 "$1" "$2" "${@:3}"' _ "$VALIDATE" "$SCHEMA" "${reports[@]}"

echo "1..$n"
[ "$failures" -eq 0 ]
