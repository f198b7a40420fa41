# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# Sourced by the integration scripts: TAP checks, the private bus, the daemon's start, and
# the counter guests of a private libvirtd. The script sets T (its temporary directory),
# ROOT and UPGRADED; the guest helpers need URI, COUNTER and COUNTER_ADDR.
#
# The start of every script (after sourcing this file):
#   test_begin NAME WHY PROGRAM...  exits 77 (skip) unless root (WHY: what needs it) and every
#                                   PROGRAM is on PATH; then T=/tmp/upgraded-NAME.XXXXXX (mode
#                                   755: the daemon's system user reads it) and ROOT=$T/root
#
# TAP output: the script ends with
#   echo "1..$n"; [ "$failures" -eq 0 ]
#   ok TEXT / not_ok TEXT           one result
#   check DESCRIPTION COMMAND...    ok when the command succeeds
#   expect_fail DESCRIPTION EXIT_CODE PATTERN COMMAND...
#                                   ok when the command exits EXIT_CODE with PATTERN (grep)
#                                   on stderr; needs T
#
# A private system-like bus:
#   start_bus BUS_CONF_IN POLICY [SED_ARGS...]
#                                   dbus-daemon with bus.conf.in's policy and our policy file
#                                   at $T/bus (SED_ARGS edit its configuration further); sets
#                                   DBUS_PID and exports DBUS_SYSTEM_BUS_ADDRESS
#
# The daemon under test, on that bus:
#   start_daemon LOGNAME ARGS...    runs $UPGRADED --root=$ROOT "${DAEMON_ARGS[@]}" ARGS...,
#                                   log in $T/daemon-LOGNAME.log, PID in DAEMON_PID, then
#                                   wait_for_daemon
#   wait_for_daemon                 0 once org.upgraded.Upgrade1 is on the bus (within
#                                   DAEMON_START_TIMEOUT seconds, default 30), 1 when
#                                   DAEMON_PID exits first or on timeout
#   wait_update_ended ID [SECS]    0 once update ID is done, failed or cancelled (the recovery
#                                   runs as a job after the bus name is taken), needs CTL
#   stop_daemon                     SIGTERM and wait
#
# Counter guests (16 MiB TCG guests booting $COUNTER, which counts timer ticks in RAM):
#   define_guest NAME [MIB], V VIRSH-ARGS..., counter NAME, wait_counter NAME MIN

failures=0 n=0

test_begin() {
        local name=$1 why=$2 p
        shift 2
        if [ "$(id -u)" -ne 0 ]; then
                echo "SKIP: needs root ($why)"
                exit 77
        fi
        for p in "$@"; do
                command -v "$p" >/dev/null || { echo "SKIP: $p missing (tools/install-deps)"; exit 77; }
        done
        T=$(mktemp -d "/tmp/upgraded-$name.XXXXXX") && chmod 755 "$T" || exit 1
        ROOT=$T/root
}

ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $*"; }
check() {
        local what=$1
        shift
        if "$@"; then ok "$what"; else not_ok "$what"; fi
}

expect_fail() {
        local what=$1 code=$2 name=$3 rc
        shift 3
        "$@" >"$T/out" 2>"$T/err"
        rc=$?
        if [ "$rc" -eq "$code" ] && grep -q -- "$name" "$T/err"; then
                ok "$what"
        else
                not_ok "$what (exit $rc, want $code and '$name'): $(cat "$T/err")"
        fi
}

start_bus() {
        local in=$1 policy=$2
        shift 2
        sed -e "s|@SOCKET@|$T/bus|" -e "s|@POLICY@|$policy|" "$@" "$in" >"$T/bus.conf"
        dbus-daemon --config-file="$T/bus.conf" --nofork --print-address=3 3>"$T/address" \
                2>"$T/dbus.log" &
        DBUS_PID=$!
        for _ in $(seq 50); do [ -s "$T/address" ] && break; sleep 0.1; done
        export DBUS_SYSTEM_BUS_ADDRESS="unix:path=$T/bus"
}

# wait_update_ended ID [SECONDS]: the daemon takes its bus name before its recovery (a job
# behind it) completes or fails the update left by "the last kernel": wait for that end
# (default 60 s) before looking at the update.
wait_update_ended() {
        local i
        for ((i = 0; i < ${2:-60} * 10; i++)); do
                case $("$CTL" show "$1" -p State --value 2>/dev/null) in
                done | failed | cancelled) return 0 ;;
                esac
                sleep 0.1
        done
        return 1
}

wait_for_daemon() {
        local i
        for ((i = 0; i < ${DAEMON_START_TIMEOUT:-30} * 10; i++)); do
                busctl --address="$DBUS_SYSTEM_BUS_ADDRESS" status org.upgraded.Upgrade1 \
                        >/dev/null 2>&1 && return 0
                kill -0 "$DAEMON_PID" 2>/dev/null || return 1
                sleep 0.1
        done
        return 1
}
start_daemon() {
        local log=$1
        shift
        "$UPGRADED" --root="$ROOT" "${DAEMON_ARGS[@]}" "$@" >"$T/daemon-$log.log" 2>&1 &
        DAEMON_PID=$!
        wait_for_daemon
}
stop_daemon() {
        [ -n "$DAEMON_PID" ] && kill "$DAEMON_PID" && wait "$DAEMON_PID"
        DAEMON_PID=
}

V() { virsh -q -c "$URI" "$@"; }
counter() { # counter DOMAIN -> the guest's tick count, -1 when it cannot be read
        local out
        out=$(V qemu-monitor-command --hmp "$1" "xp /1wx $COUNTER_ADDR" 2>/dev/null |
                sed -n 's/.*: *0x\([0-9a-fA-F]*\).*/\1/p')
        [ -n "$out" ] && echo $((16#$out)) || echo -1
}
wait_counter() { # wait_counter DOMAIN MIN (within WAIT_COUNTER_S seconds, default 15)
        for _ in $(seq $((${WAIT_COUNTER_S:-15} * 10))); do [ "$(counter "$1")" -ge "$2" ] && return 0; sleep 0.1; done
        return 1
}
define_guest() { # define_guest NAME [MIB]: MIB of RAM, default 16
        cp "$COUNTER" "$T/$1.img"
        cat >"$T/$1.xml" <<XML
<domain type='qemu'><name>$1</name><memory unit='MiB'>${2:-16}</memory><vcpu>1</vcpu>
<os><type arch='x86_64' machine='pc'>hvm</type><boot dev='hd'/></os>
<on_poweroff>destroy</on_poweroff><on_reboot>destroy</on_reboot><on_crash>destroy</on_crash>
<devices><emulator>/usr/bin/qemu-system-x86_64</emulator>
<disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='$T/$1.img'/><target dev='hda' bus='ide'/></disk>
<controller type='usb' model='none'/><memballoon model='none'/></devices></domain>
XML
        V define "$T/$1.xml" >/dev/null && V start "$1" >/dev/null
}
