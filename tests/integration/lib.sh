# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Sourced by the integration scripts: TAP checks, the private bus, the daemon's start,
# and the counter guests of a private libvirtd. The script sets T (its temporary
# directory) and DAEMON_PID; the guest helpers need URI, COUNTER and COUNTER_ADDR.

failures=0 n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $*"; }
check() { # check DESCRIPTION COMMAND...
        local what=$1
        shift
        if "$@"; then ok "$what"; else not_ok "$what"; fi
}

# start_bus BUS_CONF_IN POLICY [SED_ARGS...]: a private system-like dbus-daemon listening on
# $T/bus (the SED_ARGS edit its configuration further); sets DBUS_PID and exports
# DBUS_SYSTEM_BUS_ADDRESS.
start_bus() {
        local in=$1 policy=$2
        shift 2
        sed -e "s|@SOCKET@|$T/bus|" -e "s|@POLICY@|$policy|" "$@" "$in" >"$T/bus.conf"
        dbus-daemon --config-file="$T/bus.conf" --nofork --print-address=3 3>"$T/address" 2>"$T/dbus.log" &
        DBUS_PID=$!
        for _ in $(seq 50); do [ -s "$T/address" ] && break; sleep 0.1; done
        export DBUS_SYSTEM_BUS_ADDRESS=unix:path=$T/bus
}

# wait_for_daemon: 0 once org.upgraded.Upgrade1 is on the bus, 1 when DAEMON_PID died
# first or after 30 s.
wait_for_daemon() {
        for _ in $(seq 300); do
                busctl --address="$DBUS_SYSTEM_BUS_ADDRESS" status org.upgraded.Upgrade1 >/dev/null 2>&1 && return 0
                kill -0 "$DAEMON_PID" 2>/dev/null || return 1
                sleep 0.1
        done
        return 1
}

V() { virsh -q -c "$URI" "$@"; }
counter() { # counter DOMAIN -> the guest's tick count, -1 when it cannot be read
        local out
        out=$(V qemu-monitor-command --hmp "$1" "xp /1wx $COUNTER_ADDR" 2>/dev/null |
                sed -n 's/.*: *0x\([0-9a-fA-F]*\).*/\1/p')
        [ -n "$out" ] && echo $((16#$out)) || echo -1
}
wait_counter() { # wait_counter DOMAIN MIN
        for _ in $(seq 150); do [ "$(counter "$1")" -ge "$2" ] && return 0; sleep 0.1; done
        return 1
}
# define_guest NAME: defines and starts a 16 MiB TCG guest booting a copy of $COUNTER.
define_guest() {
        cp "$COUNTER" "$T/$1.img"
        cat >"$T/$1.xml" <<XML
<domain type='qemu'><name>$1</name><memory unit='MiB'>16</memory><vcpu>1</vcpu>
<os><type arch='x86_64' machine='pc'>hvm</type><boot dev='hd'/></os>
<on_poweroff>destroy</on_poweroff><on_reboot>destroy</on_reboot><on_crash>destroy</on_crash>
<devices><emulator>/usr/bin/qemu-system-x86_64</emulator>
<disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='$T/$1.img'/><target dev='hda' bus='ide'/></disk>
<controller type='usb' model='none'/><memballoon model='none'/></devices></domain>
XML
        V define "$T/$1.xml" >/dev/null && V start "$1" >/dev/null
}
