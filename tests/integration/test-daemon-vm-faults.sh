#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Faults during a commit and after the handoff, through the real daemon on a private bus with
# two real TCG counter guests of a private libvirtd (tests/integration/vm/private-libvirtd).
# Each case ends with every VM running, its counter continued (it was not booted again), or
# its saved state kept on disk and reported; never silently gone. The same two guests serve
# every case, one after the other:
#   1. a VM that refuses to pause: its QEMU is stopped (SIGSTOP), so libvirt's pause never
#      gets an answer; after PauseTimeoutSec= the commit fails naming the VM, the other VM is
#      resumed; once QEMU runs again the late pause is undone by the daemon;
#   2. libvirtd killed (SIGKILL) while the first managed save is being written, started again a
#      second later: the commit fails naming the VM, the rollback waits for libvirtd, both VMs
#      run with their counters continued, no image is left, and the daemon's next inventory
#      (a dry run) works through a connection it opened again;
#   3. a restore that fails on the new kernel (vm-a's saved image truncated): vm-b is resumed,
#      vm-a is reported failed with its image kept; `upgradectl restore-vm vm-a` fails again
#      and still keeps it; with the intact image back, restore-vm brings vm-a back, continued;
#   4. libvirtd killed while the new kernel's daemon restores the first VM, started again a
#      second later: the restarted libvirtd may or may not finish that restore by itself, and
#      the daemon settles the VM from what it finds once libvirtd is back. Either way the VM
#      ends running with its counter continued, or shut off with its saved state kept and
#      reported (then restore-vm brings it back); never paused, never reported restored
#      while it is not running.
# (The full checkpoint disk is test-daemon-vms.sh, case 2.)
# usage: test-daemon-vm-faults.sh UPGRADED UPGRADECTL BUS_CONF_IN BUS_POLICY MAKE_BZIMAGE VALIDATE SCHEMA COUNTER_BIN
set -uo pipefail

UPGRADED_CONF=$'[VM]\nSaveParallel=1\nPauseTimeoutSec=2\n'
. "$(dirname "$0")/daemon-vms-lib.sh"
: "${LIBVIRT_TEST_PIDFILE:?run me through private-libvirtd}" "${LIBVIRT_TEST_SOCKET:?}"
SAVE_DIR=/var/lib/libvirt/qemu/save
t_start=$SECONDS faults=0
vms_setup
# A guest booted again counts 18.2 ticks a second from 0: with 150 ticks on the counter before
# each commit, "counter after >= counter before" tells a continued guest from a rebooted one
# for the ~8 s a case takes.
check "both guests past 150 ticks" bash -c "$(declare -f V counter wait_counter); URI='$URI' COUNTER_ADDR=$COUNTER_ADDR; wait_counter vm-a 150 && wait_counter vm-b 150"
check "daemon starts" start_daemon old
state() { "$CTL" show "$1" -p State --value; }
# libvirtd killed (SIGKILL: no clean shutdown), started again a second later.
restart_libvirtd() {
        kill -KILL "$(cat "$LIBVIRT_TEST_PIDFILE")"
        sleep 1
        rm -f "$LIBVIRT_TEST_SOCKET"
        libvirtd -d --pid-file="$LIBVIRT_TEST_PIDFILE" --config=/etc/libvirt/libvirtd.conf
        for _ in $(seq 100); do [ -S "$LIBVIRT_TEST_SOCKET" ] && return 0; sleep 0.1; done
        return 1
}
error_of() { "$CTL" show "$1" -p Error --value; }
wait_finished() { # wait_finished ID: until the update is done or failed; prints its error
        for _ in $(seq 300); do
                case $(state "$1") in done | failed) break ;; esac
                sleep 0.1
        done
        error_of "$1" | sed 's/^/# error: /'
}
failed_with() { # failed_with ID PATTERN: the update failed, its error (one line) matches
        [ "$(state "$1")" = failed ] && error_of "$1" | tr '\n' ' ' | grep -q "$2"
}

# ---- 1. a VM that refuses to pause ----
ID=$("$CTL" stage "/boot/vmlinuz-$NEW" --cmdline="root=/dev/vda1 ro")
qemu_b=$(cat /run/libvirt/qemu/vm-b.pid)
before_a=$(counter vm-a) before_b=$(counter vm-b)
kill -STOP "$qemu_b"
faults=$((faults + 1))
t0=$SECONDS
"$CTL" commit --wait >"$T/commit1.out" 2>&1
rc=$?
took=$((SECONDS - t0))
sed 's/^/# /' "$T/commit1.out"
check "pause refused: commit --wait exits 1 (after ${took} s)" test "$rc" -eq 1
check "pause refused: the update failed naming vm-b and the timeout" failed_with "$ID" "VM 'vm-b': pause did not complete within 2.0 s"
check "pause refused: vm-a running again while vm-b's QEMU is still stopped" test "$(V domstate vm-a)" = running
kill -CONT "$qemu_b"
# The pause libvirt still had pending goes through now; the daemon undoes it at once.
for _ in $(seq 100); do V domstate --reason vm-b | grep -q unpaused && break; sleep 0.1; done
check "pause refused: the late pause of vm-b was undone (running, unpaused)" bash -c "virsh -q -c '$URI' domstate --reason vm-b | grep -q 'running (unpaused)'"
check "pause refused: both counters continued" continued "$before_a" "$before_b" 200
check "pause refused: no managed save image" no_image vm-a vm-b

# ---- 2. libvirtd killed during the saves, started again ----
ID2=$("$CTL" stage "/boot/vmlinuz-$NEW" --cmdline="root=/dev/vda1 ro")
before_a=$(counter vm-a) before_b=$(counter vm-b)
"$CTL" commit --wait >"$T/commit2.out" 2>&1 &
commit_pid=$!
saving=
for _ in $(seq 2000); do
        saving=$(cd "$SAVE_DIR" && ls -- *.save 2>/dev/null | head -n 1)
        [ -n "$saving" ] && break
        sleep 0.01
done
echo "# libvirtd killed while writing '$saving'"
restart_libvirtd
faults=$((faults + 1))
check "libvirtd: killed during a managed save and started again" test -n "$saving" -a -S "$LIBVIRT_TEST_SOCKET"
wait "$commit_pid"
rc=$?
sed 's/^/# /' "$T/commit2.out"
check "libvirtd restart: commit --wait exits 1" test "$rc" -eq 1
wait_finished "$ID2"
check "libvirtd restart: the update failed naming the VM whose save broke" failed_with "$ID2" "VM '${saving%.save}': managed save failed"
check "libvirtd restart: both running, counters continued" continued "$before_a" "$before_b" 200
check "libvirtd restart: no managed save image left" no_image vm-a vm-b
check "libvirtd restart: the save directory is empty" test -z "$(ls -A "$SAVE_DIR")"
check "libvirtd restart: the failure report validates" python3 "$VALIDATE" "$SCHEMA" "$ROOT/var/lib/upgraded/reports/$ID2.json"
check "libvirtd restart: the report has both VMs rolled back" test "$(json "$ROOT/var/lib/upgraded/reports/$ID2.json" "sorted((v['name'], v['result']) for v in d['vms'])")" = "[('vm-a', 'rolled-back'), ('vm-b', 'rolled-back')]"
ID3=$("$CTL" stage "/boot/vmlinuz-$NEW" --cmdline="root=/dev/vda1 ro")
"$CTL" commit --dry-run >"$T/dry.out" 2>&1
sed 's/^/# /' "$T/dry.out"
check "libvirtd restart: the daemon's connection was opened again (dry run lists both VMs)" bash -c "grep -qE '^  vm-a +checkpoint +running' '$T/dry.out' && grep -qE '^  vm-b +checkpoint +running' '$T/dry.out'"

# ---- 3. a restore that fails on the new kernel ----
before_a=$(counter vm-a) before_b=$(counter vm-b)
"$CTL" commit --wait >"$T/commit3.out" 2>&1
rc=$?
sed 's/^/# /' "$T/commit3.out"
check "restore fails: commit --wait exits 0" test "$rc" -eq 0
stop_daemon
cp "$SAVE_DIR/vm-a.save" "$T/vm-a.save.intact"
size=$(stat -c %s "$SAVE_DIR/vm-a.save")
truncate -s $((size * 6 / 10)) "$SAVE_DIR/vm-a.save"
faults=$((faults + 1))
check "restore fails: the new kernel's daemon starts" start_new_kernel_daemon new
wait_finished "$ID3"
check "restore fails: the update failed naming vm-a, the image kept" failed_with "$ID3" "VM 'vm-a': restore from the managed save image failed: .*the image is kept"
check "restore fails: vm-a shut off, its saved state kept" bash -c "[ \"\$(virsh -q -c '$URI' domstate vm-a)\" = 'shut off' ] && [ \"\$(stat -c %s '$SAVE_DIR/vm-a.save')\" = $((size * 6 / 10)) ]"
after_b=$(counter vm-b)
check "restore fails: vm-b resumed, counter continued ($before_b -> $after_b)" test "$(V domstate vm-b)" = running -a "$after_b" -ge "$before_b" -a "$after_b" -lt $((before_b + 200))
REPORT=$ROOT/var/lib/upgraded/reports/$ID3.json
check "restore fails: the report validates" python3 "$VALIDATE" "$SCHEMA" "$REPORT"
check "restore fails: the report says vm-a failed (image kept), vm-b resumed" test "$(json "$REPORT" "sorted((v['name'], v['result'], 'image is kept' in (v['error'] or '')) for v in d['vms'])")" = "[('vm-a', 'failed', True), ('vm-b', 'resumed', False)]"
"$CTL" restore-vm vm-a >"$T/out" 2>"$T/err"
rc=$?
sed 's/^/# restore-vm: /' "$T/err"
check "restore-vm with the image still corrupt: exit 1, VMFailed, image still kept" bash -c "[ $rc -eq 1 ] && grep -q VMFailed '$T/err' && [ -e '$SAVE_DIR/vm-a.save' ] && virsh -c '$URI' dominfo vm-a | grep -qE 'Managed save: +yes'"
cp "$T/vm-a.save.intact" "$SAVE_DIR/vm-a.save"
check "restore-vm with the intact image: exit 0" "$CTL" restore-vm vm-a
after_a=$(counter vm-a)
check "restore-vm: vm-a running, counter continued ($before_a -> $after_a)" test "$(V domstate vm-a)" = running -a "$after_a" -ge "$before_a" -a "$after_a" -lt $((before_a + 200))
check "restore-vm: no image left" no_image vm-a vm-b
stop_daemon

# ---- 4. libvirtd killed during the restore on the new kernel ----
check "restore interrupted: the old kernel's daemon starts" start_daemon old4
ID4=$("$CTL" stage "/boot/vmlinuz-$NEW" --cmdline="root=/dev/vda1 ro")
before_a=$(counter vm-a) before_b=$(counter vm-b)
"$CTL" commit --wait >"$T/commit4.out" 2>&1
check "restore interrupted: commit --wait exits 0" test $? -eq 0
stop_daemon
# The new kernel's daemon restores before it takes its bus name: start it by hand, and kill
# libvirtd as soon as the first restored VM's QEMU exists (one restore at a time).
"$UPGRADED" --root="$ROOT" --libvirt-uri="$URI" --backend=record --kexec-trigger=record \
        --running-kernel="$NEW" --boot-id="$(tr -d '-' </proc/sys/kernel/random/uuid)" \
        >"$T/daemon-new4.log" 2>&1 &
DAEMON_PID=$!
restoring=
for _ in $(seq 2000); do
        restoring=$(cd /run/libvirt/qemu && ls -- vm-*.pid 2>/dev/null | head -n 1)
        [ -n "$restoring" ] && break
        sleep 0.01
done
restoring=${restoring%.pid}
[ "$restoring" = vm-a ] && other=vm-b || other=vm-a
restart_libvirtd
faults=$((faults + 1))
check "restore interrupted: libvirtd killed while $restoring was being restored" test -n "$restoring"
for _ in $(seq 300); do
        busctl --address="$DBUS_SYSTEM_BUS_ADDRESS" status org.upgraded.Upgrade1 >/dev/null 2>&1 && break
        sleep 0.1
done
wait_finished "$ID4"
REPORT=$ROOT/var/lib/upgraded/reports/$ID4.json
result=$(json "$REPORT" "[v['result'] for v in d['vms'] if v['name'] == '$restoring'][0]")
state=$(V domstate "$restoring")
echo "# $restoring: reported '$result', libvirt says '$state'"
check "restore interrupted: $restoring never left paused" test "$state" != paused
if [ "$result" = resumed ]; then
        check "restore interrupted: $restoring reported resumed and running" test "$state" = running
        check "restore interrupted: the update is done" test "$(state "$ID4")" = done
else
        check "restore interrupted: $restoring reported failed with its image kept" failed_with "$ID4" "VM '$restoring': .*the image is kept"
        check "restore interrupted: $restoring shut off with its saved state" bash -c "[ \"\$(virsh -q -c '$URI' domstate $restoring)\" = 'shut off' ] && virsh -c '$URI' dominfo $restoring | grep -qE 'Managed save: +yes'"
        check "restore interrupted: restore-vm $restoring" "$CTL" restore-vm "$restoring"
fi
check "restore interrupted: $other restored once libvirtd was back" test "$(V domstate "$other")" = running
# Two restores in a row and a libvirtd restart: up to a minute of ticks on a loaded machine;
# a guest booted again would count from 0, below "before".
check "restore interrupted: both counters continued" continued "$before_a" "$before_b" 1100
check "restore interrupted: no image left" no_image vm-a vm-b
stop_daemon

echo "# faults injected: $faults; VM checks: both VMs after each case; $((SECONDS - t_start)) s"
echo "1..$n"
[ "$failures" -eq 0 ]
