# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# Helpers for the integration scripts (sourced).
#
# TAP output: the caller sets n=0 and failures=0 and ends with
#   echo "1..$n"; [ "$failures" -eq 0 ]
#   ok TEXT / not_ok TEXT           one result
#   check DESCRIPTION COMMAND...    ok when the command succeeds
#
# A private system-like bus:
#   start_bus BUS_CONF_IN POLICY [XML]
#                                   dbus-daemon with bus.conf.in's policy, our policy file and
#                                   XML (more busconfig elements) at $T/bus; sets DBUS_PID and
#                                   exports DBUS_SYSTEM_BUS_ADDRESS
#
# The daemon under test, on that bus:
#   start_daemon LOGNAME ARGS...    runs $UPGRADED --root=$ROOT "${DAEMON_ARGS[@]}" ARGS...,
#                                   log in $T/daemon-LOGNAME.log, PID in DAEMON_PID; succeeds
#                                   once it serves org.upgraded.Upgrade1 (within
#                                   DAEMON_START_TIMEOUT seconds, default 10), fails when it
#                                   exits first
#   stop_daemon                     SIGTERM and wait

ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $*"; }
check() {
        local what=$1
        shift
        if "$@"; then ok "$what"; else not_ok "$what"; fi
}

start_bus() {
        local i
        sed -e "s|@SOCKET@|$T/bus|" -e "s|@POLICY@|$2|" -e "s|</busconfig>|${3:-}</busconfig>|" \
                "$1" >"$T/bus.conf"
        dbus-daemon --config-file="$T/bus.conf" --nofork --print-address=3 3>"$T/address" \
                2>"$T/dbus.log" &
        DBUS_PID=$!
        for ((i = 0; i < 50; i++)); do [ -s "$T/address" ] && break; sleep 0.1; done
        export DBUS_SYSTEM_BUS_ADDRESS="unix:path=$T/bus"
}

start_daemon() {
        local log=$1 i
        shift
        "$UPGRADED" --root="$ROOT" "${DAEMON_ARGS[@]}" "$@" >"$T/daemon-$log.log" 2>&1 &
        DAEMON_PID=$!
        for ((i = 0; i < ${DAEMON_START_TIMEOUT:-10} * 10; i++)); do
                busctl --address="$DBUS_SYSTEM_BUS_ADDRESS" status org.upgraded.Upgrade1 \
                        >/dev/null 2>&1 && return 0
                kill -0 "$DAEMON_PID" 2>/dev/null || return 1
                sleep 0.1
        done
        return 1
}
stop_daemon() {
        [ -n "$DAEMON_PID" ] && kill "$DAEMON_PID" && wait "$DAEMON_PID"
        DAEMON_PID=
}
