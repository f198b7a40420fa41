#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Shared by the daemon + VM integration tests (sourced, inside private-libvirtd): a temporary
# root with a fake bzImage, a private bus, the real daemon (record backend), and two counter
# guests vm-a and vm-b of the private libvirtd. Their tick counter (guest RAM at COUNTER_ADDR)
# proves that a VM continued rather than booted again.
#
# Arguments of the sourcing script: UPGRADED UPGRADECTL BUS_CONF_IN BUS_POLICY MAKE_BZIMAGE
# VALIDATE SCHEMA COUNTER_BIN. Set UPGRADED_CONF (the daemon's configuration) and GUEST_MIB
# (the guests' RAM, default 16) before vms_setup. The EXIT trap stops the daemon and the bus by PID.

UPGRADED=$1 CTL=$2 BUS_CONF_IN=$3 POLICY=$4 MAKE_BZIMAGE=$5 VALIDATE=$6 SCHEMA=$7 COUNTER=$8
NEW=6.1.0-57-cloud-amd64
COUNTER_ADDR=0x600
URI=${LIBVIRT_TEST_URI:?run me through private-libvirtd}
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_begin vms "a private libvirtd" dbus-daemon busctl virsh python3
DBUS_PID= DAEMON_PID=
vms_cleanup() {
        for pid in $DAEMON_PID $DBUS_PID; do
                kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
        done
        [ "$failures" -ne 0 ] && { echo "--- daemon logs"; cat "$T"/daemon-*.log 2>/dev/null; }
        rm -rf "$T"
}
trap vms_cleanup EXIT
# Both guests running, each counter continued from its value before (a fresh boot starts
# from 0) within SLACK ticks, and still counting: continued BEFORE_A BEFORE_B SLACK
continued() {
        local a b
        a=$(counter vm-a) b=$(counter vm-b)
        echo "# counters: vm-a $1 -> $a, vm-b $2 -> $b"
        [ "$(V domstate vm-a)" = running ] && [ "$(V domstate vm-b)" = running ] &&
                [ "$a" -ge "$1" ] && [ "$a" -lt $(($1 + $3)) ] &&
                [ "$b" -ge "$2" ] && [ "$b" -lt $(($2 + $3)) ] &&
                wait_counter vm-a $((a + 3)) && wait_counter vm-b $((b + 3))
}
no_image() { # no_image DOMAIN...: no managed save image left
        local d
        for d in "$@"; do
                V dominfo "$d" | grep -qE 'Managed save: +yes' && return 1
        done
        return 0
}
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

DAEMON_ARGS=(--libvirt-uri="$URI" --backend=record --kexec-trigger=record)
DAEMON_START_TIMEOUT=30
# The daemon as the new kernel runs it after the handoff: restores the VMs.
start_new_kernel_daemon() { # start_new_kernel_daemon LOGNAME
        start_daemon "$1" --running-kernel="$NEW" --boot-id="$(tr -d '-' </proc/sys/kernel/random/uuid)"
}

vms_setup() {
        mkdir -p "$ROOT/boot" "$ROOT/etc/upgraded"
        python3 "$MAKE_BZIMAGE" "$ROOT/boot/vmlinuz-$NEW" "$NEW" && chmod 0644 "$ROOT/boot/vmlinuz-$NEW"
        printf '%s' "${UPGRADED_CONF:-}" >"$ROOT/etc/upgraded/upgraded.conf"
        start_bus "$BUS_CONF_IN" "$POLICY"

        define_guest vm-a "${GUEST_MIB:-16}"
        define_guest vm-b "${GUEST_MIB:-16}"
        check "both guests count" bash -c "$(declare -f V counter wait_counter); URI='$URI' COUNTER_ADDR=$COUNTER_ADDR WAIT_COUNTER_S=${WAIT_COUNTER_S:-15}; wait_counter vm-a 40 && wait_counter vm-b 40"
}
