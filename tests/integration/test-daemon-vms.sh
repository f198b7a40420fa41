#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The real daemon on a private bus, managing two real TCG guests of a private libvirtd
# (run inside tests/integration/vm/private-libvirtd, which sets LIBVIRT_TEST_URI and stops
# libvirtd and QEMU by PID). The guests boot counter.s, which counts timer ticks in RAM:
#   1. commit --wait checkpoints both (record backend: the "kexec" is a file), a restart as
#      "the new kernel" restores them, each counter continues from where it was paused, the
#      report (validated) has both VMs with their downtime;
#   2. a save that fails (save directory full) rolls back: both running, counters continued,
#      no image left, the update failed naming the VM;
#   3. restore-vm: VMRunning for a running VM, and a VM saved by hand comes back.
# usage: test-daemon-vms.sh UPGRADED UPGRADECTL BUS_CONF_IN BUS_POLICY MAKE_BZIMAGE VALIDATE SCHEMA COUNTER_BIN
set -uo pipefail

UPGRADED=$1 CTL=$2 BUS_CONF_IN=$3 POLICY=$4 MAKE_BZIMAGE=$5 VALIDATE=$6 SCHEMA=$7 COUNTER=$8
NEW=6.1.0-57-cloud-amd64
COUNTER_ADDR=0x600
URI=${LIBVIRT_TEST_URI:?run me through private-libvirtd}
for p in dbus-daemon busctl virsh python3; do
        command -v "$p" >/dev/null || { echo "SKIP: $p missing"; exit 77; }
done

T=$(mktemp -d /tmp/upgraded-vms.XXXXXX)
ROOT=$T/root
DBUS_PID= DAEMON_PID=
failures=0 n=0
cleanup() {
        for pid in $DAEMON_PID $DBUS_PID; do
                kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
        done
        [ "$failures" -ne 0 ] && { echo "--- daemon logs"; cat "$T"/daemon-*.log 2>/dev/null; }
        rm -rf "$T"
}
trap cleanup EXIT
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else not_ok "$what"; fi; }
V() { virsh -q -c "$URI" "$@"; }
counter() { # counter DOMAIN -> the guest's tick count
        local out
        out=$(V qemu-monitor-command --hmp "$1" "xp /1wx $COUNTER_ADDR" 2>/dev/null |
                sed -n 's/.*: *0x\([0-9a-fA-F]*\).*/\1/p')
        [ -n "$out" ] && echo $((16#$out)) || echo -1
}
wait_counter() { # wait_counter DOMAIN MIN
        for _ in $(seq 150); do [ "$(counter "$1")" -ge "$2" ] && return 0; sleep 0.1; done
        return 1
}
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

# ---- the root, the bus, the guests ----
mkdir -p "$ROOT/boot" "$ROOT/etc/upgraded"
python3 "$MAKE_BZIMAGE" "$ROOT/boot/vmlinuz-$NEW" "$NEW" && chmod 0644 "$ROOT/boot/vmlinuz-$NEW"
# One save at a time, so that a full save directory fails the second one.
printf '[VM]\nSaveParallel=1\n' >"$ROOT/etc/upgraded/upgraded.conf"
sed -e "s|@SOCKET@|$T/bus|" -e "s|@POLICY@|$POLICY|" "$BUS_CONF_IN" >"$T/bus.conf"
dbus-daemon --config-file="$T/bus.conf" --nofork --print-address=3 3>"$T/address" 2>"$T/dbus.log" &
DBUS_PID=$!
for _ in $(seq 50); do [ -s "$T/address" ] && break; sleep 0.1; done
export DBUS_SYSTEM_BUS_ADDRESS=unix:path=$T/bus

start_daemon() { # start_daemon LOGNAME ARGS...
        local log=$1
        shift
        "$UPGRADED" --root="$ROOT" --libvirt-uri="$URI" --backend=record --kexec-trigger=record \
                "$@" >"$T/daemon-$log.log" 2>&1 &
        DAEMON_PID=$!
        for _ in $(seq 300); do
                busctl --address="$DBUS_SYSTEM_BUS_ADDRESS" status org.upgraded.Upgrade1 >/dev/null 2>&1 && return 0
                kill -0 "$DAEMON_PID" 2>/dev/null || return 1
                sleep 0.1
        done
        return 1
}
stop_daemon() { [ -n "$DAEMON_PID" ] && kill "$DAEMON_PID" && wait "$DAEMON_PID"; DAEMON_PID=; }

for vm in vm-a vm-b; do
        cp "$COUNTER" "$T/$vm.img"
        cat >"$T/$vm.xml" <<XML
<domain type='qemu'><name>$vm</name><memory unit='MiB'>16</memory><vcpu>1</vcpu>
<os><type arch='x86_64' machine='pc'>hvm</type><boot dev='hd'/></os>
<on_poweroff>destroy</on_poweroff><on_reboot>destroy</on_reboot><on_crash>destroy</on_crash>
<devices><emulator>/usr/bin/qemu-system-x86_64</emulator>
<disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='$T/$vm.img'/><target dev='hda' bus='ide'/></disk>
<controller type='usb' model='none'/><memballoon model='none'/></devices></domain>
XML
        V define "$T/$vm.xml" >/dev/null && V start "$vm" >/dev/null
done
check "both guests count" bash -c "$(declare -f V counter wait_counter); URI='$URI' COUNTER_ADDR=$COUNTER_ADDR; wait_counter vm-a 40 && wait_counter vm-b 40"

# ---- 1. commit, "new kernel", restore ----
check "daemon starts" start_daemon old
ID=$("$CTL" stage "/boot/vmlinuz-$NEW" --cmdline="root=/dev/vda1 ro")
"$CTL" commit --dry-run >"$T/dry.out" 2>&1
check "dry run: both VMs checkpoint, preconditions met" bash -c "grep -qE '^  vm-a +checkpoint +running' '$T/dry.out' && grep -qE '^  vm-b +checkpoint +running' '$T/dry.out' && grep -q 'Preconditions: met' '$T/dry.out'"
before_a=$(counter vm-a) before_b=$(counter vm-b)
t0=$(date +%s.%N)
"$CTL" commit --wait >"$T/commit.out" 2>&1
check "commit --wait exits 0" test $? -eq 0
sed 's/^/# /' "$T/commit.out"
check "commit --wait lists both VMs saved" bash -c "grep -qE '^vm-a +checkpoint +saved' '$T/commit.out' && grep -qE '^vm-b +checkpoint +saved' '$T/commit.out'"
check "both domains shut off with a managed save image" bash -c "[ \"\$(virsh -q -c '$URI' domstate vm-a)\" = 'shut off' ] && virsh -c '$URI' dominfo vm-b | grep -qE 'Managed save: +yes'"
stop_daemon
check "the new kernel's daemon restores" start_daemon new --running-kernel="$NEW" --boot-id="$(tr -d '-' </proc/sys/kernel/random/uuid)"
t1=$(date +%s.%N)
check "update done" test "$("$CTL" show "$ID" -p State --value)" = done
after_a=$(counter vm-a) after_b=$(counter vm-b)
echo "# counters: vm-a $before_a before commit -> $after_a after restore; vm-b $before_b -> $after_b"
# A fresh boot would start from 0; from the read to the pause at most a few ticks pass.
check "vm-a continued its count" test "$after_a" -ge "$before_a" -a "$after_a" -lt $((before_a + 60))
check "vm-b continued its count" test "$after_b" -ge "$before_b" -a "$after_b" -lt $((before_b + 60))
check "and keeps counting" bash -c "$(declare -f V counter wait_counter); URI='$URI' COUNTER_ADDR=$COUNTER_ADDR; wait_counter vm-a $((after_a + 5))"
"$CTL" report --json >"$T/report.json"
check "report validates against the schema" python3 "$VALIDATE" "$SCHEMA" "$T/report.json"
check "report: both VMs resumed with a downtime" test "$(json "$T/report.json" "sorted((v['name'], v['result'], v['downtime'] > 0) for v in d['vms'])")" = "[('vm-a', 'resumed', True), ('vm-b', 'resumed', True)]"
json "$T/report.json" "'\n'.join('# %s: saved %s bytes, save %.3f s, restore %.3f s, downtime %.3f s' % (v['name'], v['saved_bytes'], v['save_time']/1e6, v['restore_time']/1e6, v['downtime']/1e6) for v in d['vms'])"
echo "# commit start -> restored daemon up (external clock, includes the daemon restart): $(python3 -c "print('%.3f s' % ($t1 - $t0))")"
stop_daemon

# ---- 2. the save directory is full: rollback ----
check "daemon starts again" start_daemon old2
ID2=$("$CTL" stage "/boot/vmlinuz-$NEW" --cmdline="root=/dev/vda1 ro")
size=$(V dominfo vm-a >/dev/null; json "$T/report.json" "d['vms'][0]['saved_bytes']")
mount -o remount,size=$((size * 3 / 2)) /var/lib/libvirt/qemu/save
before_a=$(counter vm-a) before_b=$(counter vm-b)
"$CTL" commit --wait >"$T/commit2.out" 2>&1
check "commit --wait exits 1 when a save fails" test $? -eq 1
sed 's/^/# /' "$T/commit2.out"
mount -o remount,size=64m /var/lib/libvirt/qemu/save
check "the update failed naming the VM" bash -c "'$CTL' show '$ID2' -p Error --value | grep -q \"VM 'vm-\""
check "both running again" bash -c "[ \"\$(virsh -q -c '$URI' domstate vm-a)\" = running ] && [ \"\$(virsh -q -c '$URI' domstate vm-b)\" = running ]"
after_a=$(counter vm-a) after_b=$(counter vm-b)
echo "# counters: vm-a $before_a -> $after_a, vm-b $before_b -> $after_b"
check "counters continued after the rollback" test "$after_a" -ge "$before_a" -a "$after_a" -lt $((before_a + 80)) -a "$after_b" -ge "$before_b" -a "$after_b" -lt $((before_b + 80))
check "no managed save image left" bash -c "! virsh -c '$URI' dominfo vm-a | grep -qE 'Managed save: +yes' && ! virsh -c '$URI' dominfo vm-b | grep -qE 'Managed save: +yes'"
check "failure report validates" python3 "$VALIDATE" "$SCHEMA" "$ROOT/var/lib/upgraded/reports/$ID2.json"

# ---- 3. restore-vm ----
"$CTL" restore-vm vm-a >"$T/out" 2>"$T/err"
check "restore-vm of a running VM -> VMRunning (exit 6)" bash -c "[ $? -eq 6 ] && grep -q VMRunning '$T/err'"
c=$(counter vm-b)
V managedsave vm-b >/dev/null
check "restore-vm brings a saved VM back" "$CTL" restore-vm vm-b
after_b=$(counter vm-b)
echo "# vm-b: $c before the manual save, $after_b after restore-vm"
check "vm-b running with its count continued" test "$(V domstate vm-b)" = running -a "$after_b" -ge "$c" -a "$after_b" -lt $((c + 80))
stop_daemon

echo "1..$n"
[ "$failures" -eq 0 ]
