# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=bash
#
# Sourced by the fleet tests (metrics, remote control, the HTML picture) after lib.sh: a host
# whose daemon finished one update, on a private bus, with the test-only record backend and
# trigger (this machine never kexecs), and loopback services started and stopped by PID.
#
#   fleet_root                    a --root tree with a staged-able kernel at $KERNEL and
#                                 node_exporter's textfile directory ($TEXTFILE_DIR)
#   fleet_start_daemon LOG ARGS   the daemon on $DBUS_SYSTEM_BUS_ADDRESS (libvirt's test
#                                 driver: one running domain "test"); DAEMON_PID
#   fleet_update                  stage, commit --wait, restart as "the new kernel": the
#                                 update $ID is done and its report written
#   free_port                     a free TCP port on 127.0.0.1
#   stop_pid PID                  SIGTERM and wait (only a PID this test started)
#   fleet_cleanup PIDS FILES...   the EXIT trap: stops PIDS (a word list: services, then the
#                                 daemon and the bus), prints the daemon logs and FILES when a
#                                 check failed, removes $T
#
# Needs T, ROOT, UPGRADED, CTL, MAKE_BZIMAGE set.

NEW=6.1.0-57-cloud-amd64
TEXTFILE_DIR=/var/lib/prometheus/node-exporter

fleet_root() {
        mkdir -p "$ROOT/boot" "$ROOT/proc" "$ROOT/dev" "$ROOT$TEXTFILE_DIR"
        python3 "$MAKE_BZIMAGE" "$ROOT/boot/vmlinuz-$NEW" "$NEW"
        chmod 0644 "$ROOT/boot/vmlinuz-$NEW"
        KERNEL=/boot/vmlinuz-$NEW
        ln -s /proc/cpuinfo "$ROOT/proc/cpuinfo" && ln -s /dev/kmsg "$ROOT/dev/kmsg"
        echo "BOOT_IMAGE=/boot/vmlinuz-old root=/dev/vda1 ro upgraded.stamps=0x99 console=ttyS0" >"$ROOT/proc/cmdline"
}

fleet_start_daemon() {
        local log=$1
        shift
        "$UPGRADED" --root="$ROOT" --libvirt-uri=test:///default --backend=record \
                --kexec-trigger=record "$@" >"$T/daemon-$log.log" 2>&1 &
        DAEMON_PID=$!
        wait_for_daemon
}

fleet_update() {
        ID=$("$CTL" stage "$KERNEL" --cmdline="root=/dev/vda1 ro") || return 1
        "$CTL" commit --wait >"$T/commit.out" 2>&1 || return 1
        stop_pid "$DAEMON_PID"
        DAEMON_PID=
        fleet_start_daemon new-kernel --running-kernel="$NEW" \
                --boot-id="$(tr -d '-' </proc/sys/kernel/random/uuid)" || return 1
        [ "$("$CTL" show "$ID" -p State --value)" = done ]
}

free_port() {
        python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

stop_pid() {
        [ -n "$1" ] || return 0
        kill "$1" 2>/dev/null
        wait "$1" 2>/dev/null
        return 0
}

fleet_cleanup() {
        local pid f
        for pid in $1; do stop_pid "$pid"; done
        shift
        if [ "$failures" -ne 0 ]; then
                for f in "$T"/daemon-*.log "$@"; do
                        [ -e "$f" ] && { echo "--- $f"; cat "$f"; }
                done
        fi
        rm -rf "$T"
}
