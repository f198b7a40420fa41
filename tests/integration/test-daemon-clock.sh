#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Guest clocks after the restore, through the real daemon and a private real libvirtd (run
# inside tests/integration/vm/private-libvirtd). vm-ga is a small Linux guest running the real
# qemu-ga (tests/integration/vm/agent-guest); vm-a and vm-b are counter guests without an agent.
# Two updates, each: commit --wait (record backend), WAIT_S seconds saved, a restart as "the
# new kernel" restores the VMs:
#   1. [VM] SyncGuestClock=no: vm-ga's clock (guest-get-time, through its agent) is behind the
#      host's by at least the wait, the report says not synced, naming the setting;
#   2. the default: vm-ga's clock is within 1 s of the host's (measured 0.12 s), the report
#      says synced (when, how long the calls took, how far behind the guest was); vm-a is not
#      synced, "no guest agent channel configured".
# usage: test-daemon-clock.sh UPGRADED UPGRADECTL BUS_CONF_IN BUS_POLICY MAKE_BZIMAGE VALIDATE SCHEMA COUNTER_BIN AGENT_GUEST
set -uo pipefail

AGENT_GUEST=${9:?usage: see the header}
WAIT_S=6
UPGRADED_CONF=$'[VM]\nSyncGuestClock=no\n'
. "$(dirname "$0")/daemon-vms-lib.sh"
"$AGENT_GUEST" "$T/ga" || exit $?
vms_setup

# vm-ga: direct kernel boot, the agent's virtio-serial channel, the console in a file. With ACPI:
# without it the kernel finds no HPET, cannot calibrate its TSC under TCG and keeps time with
# jiffies, whose lost ticks on a loaded host made its clock drift by seconds.
cat >"$T/vm-ga.xml" <<XML
<domain type='qemu'><name>vm-ga</name><memory unit='MiB'>160</memory><vcpu>1</vcpu>
<os><type arch='x86_64' machine='pc'>hvm</type><kernel>$T/ga/vmlinuz</kernel>
<initrd>$T/ga/initramfs.gz</initrd><cmdline>console=ttyS0 quiet panic=-1</cmdline></os>
<features><acpi/></features><clock offset='utc'/><on_poweroff>destroy</on_poweroff><on_reboot>destroy</on_reboot>
<on_crash>destroy</on_crash><devices><emulator>/usr/bin/qemu-system-x86_64</emulator>
<serial type='file'><source path='$T/vm-ga.console'/><target port='0'/></serial>
<channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/></channel>
<controller type='usb' model='none'/><memballoon model='none'/></devices></domain>
XML
t0=$(date +%s.%N)
V define "$T/vm-ga.xml" >/dev/null && V start vm-ga >/dev/null
for _ in $(seq 1800); do
        V domtime vm-ga >/dev/null 2>&1 && break
        sleep 0.1
done
check "vm-ga boots and its agent answers" V domtime vm-ga >/dev/null
echo "# vm-ga: start -> agent answers in $(python3 -c "import time; print('%.1f s' % (time.time() - $t0))")"
sed 's/^/# console: /' "$T/vm-ga.console" | tr -d '\r' | grep -v '^# console: *$' | tail -n 3

# How far the guest's clock is behind the host's, in seconds (negative: ahead): the agent's
# guest-get-time (nanoseconds) against the host's clock read halfway through the call.
lag() {
        local g h0 h1
        h0=$(date +%s%N)
        g=$(V qemu-agent-command vm-ga '{"execute":"guest-get-time"}') || { echo "no-agent"; return 1; }
        h1=$(date +%s%N)
        python3 -c "import json; print('%.3f' % ((($h0 + $h1) / 2 - json.loads('$g')['return']) / 1e9))"
}
# The RTC (whole seconds) sets it at boot, then the guest keeps its own time (TSC or HPET):
# its offset from the host's is whatever it is, only its change across an update matters.
start_lag=$(lag)
check "vm-ga's clock is read through its agent" test "$start_lag" != no-agent
echo "# vm-ga's clock at boot: $start_lag s behind the host's"

# One update: commit, WAIT_S seconds "across the handoff", restore by the new kernel's daemon.
update() { # update NAME: the report in $T/NAME.json
        local id
        check "$1: daemon starts" start_daemon "$1-old"
        id=$("$CTL" stage "/boot/vmlinuz-$NEW" --cmdline="root=/dev/vda1 ro")
        "$CTL" commit --wait >"$T/$1-commit.out" 2>&1
        check "$1: commit --wait exits 0" test $? -eq 0
        check "$1: vm-ga saved" test "$(V domstate vm-ga)" = "shut off"
        stop_daemon
        sleep "$WAIT_S"
        check "$1: the new kernel's daemon restores" start_new_kernel_daemon "$1-new"
        for _ in $(seq 1200); do
                case $("$CTL" show "$id" -p State --value) in done | failed) break ;; esac
                sleep 0.1
        done
        check "$1: update done" test "$("$CTL" show "$id" -p State --value)" = done
        LAG=$(lag) # right away: the guest's clock, like any, drifts a little afterwards
        "$CTL" report "$id" --json >"$T/$1.json"
        "$CTL" report "$id" >"$T/$1.txt"
        check "$1: report validates against the schema" python3 "$VALIDATE" "$SCHEMA" "$T/$1.json"
        json "$T/$1.json" "'\n'.join('# %s: downtime %.3f s, clock_sync %s' % (v['name'], v['downtime']['ns']/1e9, v.get('clock_sync')) for v in d['vms'])"
        stop_daemon
}
clock() { # clock REPORT VM KEY
        json "$1" "[v for v in d['vms'] if v['name'] == '$2'][0]['clock_sync']['$3']"
}

# ---- 1. SyncGuestClock=no: the lag is real ----
update nosync
behind=$LAG
down=$(json "$T/nosync.json" "[v for v in d['vms'] if v['name'] == 'vm-ga'][0]['downtime']['ns'] / 1e9")
echo "# without the sync: vm-ga's clock $behind s behind the host's, downtime $down s"
check "nosync: vm-ga's clock fell behind by at least the wait ($WAIT_S s)" \
        python3 -c "import sys; sys.exit(0 if $behind - $start_lag >= $WAIT_S - 0.5 else 1)"
reason=$(clock "$T/nosync.json" vm-ga reason)
check "nosync: report says not synced, naming the setting" \
        bash -c "[ '$(clock "$T/nosync.json" vm-ga synced)' = False ] && [[ '$reason' == *SyncGuestClock=no* ]]"

# ---- 2. the default: synced ----
printf '' >"$ROOT/etc/upgraded/upgraded.conf"
update sync
after=$LAG
echo "# with the sync: vm-ga's clock $after s behind the host's right after the update"
# Within 1 s: the time handed over is the host's right before the command, which reaches the
# guest one agent round trip later (a busy TCG guest: up to a few hundred ms).
check "sync: vm-ga's clock within 1 s of the host's" \
        python3 -c "import sys; sys.exit(0 if abs($after) < 1 else 1)"
check "sync: report says synced, with when and how long" \
        test "$(json "$T/sync.json" "[(v['clock_sync']['synced'], v['clock_sync']['synced_at'] >= v['resumed_at'], v['clock_sync']['sync_ns'] > 0) for v in d['vms'] if v['name'] == 'vm-ga'][0]")" = "(True, True, True)"
echo "# vm-ga: agent call took $(clock "$T/sync.json" vm-ga sync_ns) ns"
before=$(json "$T/sync.json" "[v for v in d['vms'] if v['name'] == 'vm-ga'][0]['clock_sync']['behind_ns'] / 1e9")
echo "# with the sync: the daemon read vm-ga's clock $before s behind before setting it"
check "sync: the report says how far behind the guest was (it fell behind by at least the wait)" \
        python3 -c "import sys; sys.exit(0 if $before - $behind >= $WAIT_S - 0.5 else 1)"
check "sync: vm-a (no agent) not synced, with the reason" \
        test "$(clock "$T/sync.json" vm-a synced)/$(clock "$T/sync.json" vm-a reason)" = "False/no guest agent channel configured"
sed 's/^/# /' "$T/sync.txt"
check "sync: upgradectl report shows each VM's clock" \
        bash -c "grep -qE 'vm-ga .*synced' '$T/sync.txt' && grep -qE 'vm-a .*no guest agent channel configured' '$T/sync.txt'"

echo "1..$n"
[ "$failures" -eq 0 ]
