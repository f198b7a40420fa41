#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Bad bytes, everywhere: every string argument of every bus method of the real daemon, on a
# private system-like bus, driven with empty strings, over-long strings, control characters,
# non-ASCII bytes and multi-byte UTF-8 characters placed across every length where a message
# could cut the caller's input, as root and as an unprivileged user. Each call must be
# answered within CALL_DEADLINE seconds, with a success or an org.upgraded.Upgrade1.Error.*
# (a generic error or no answer fails): a reply that sd-bus refuses to send (a cut inside a
# UTF-8 character) leaves the caller waiting for its timeout.
#
# The error name comes from sd-bus's own debug log of the received reply (busctl with
# SYSTEMD_LOG_LEVEL=debug prints "Got message type=error ... error-name=...").
#
# usage: test-daemon-bad-bytes.sh UPGRADED UPGRADECTL BUS_CONF_IN POLICY_CONF MAKE_BZIMAGE ...
set -uo pipefail

UPGRADED=$1 BUS_CONF_IN=$3 POLICY=$4 MAKE_BZIMAGE=$5
CALL_DEADLINE=3
TEST_USER=nobody

. "$(dirname "$0")/lib.sh"
test_begin bytes "private dbus-daemon, setpriv, root-owned images" dbus-daemon busctl python3 setpriv
DBUS_PID= DAEMON_PID=
cleanup() {
        for pid in $DAEMON_PID $DBUS_PID; do
                kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
        done
        [ "$failures" -ne 0 ] && { echo "--- daemon log"; cat "$T"/daemon-*.log; }
        rm -rf "$T"
}
trap cleanup EXIT

mkdir -p "$ROOT/boot" "$ROOT/proc" "$ROOT/var/lib/upgraded/images"
python3 "$MAKE_BZIMAGE" "$ROOT/boot/vmlinuz-6.1.0-57-cloud-amd64" 6.1.0-57-cloud-amd64
chmod 0644 "$ROOT/boot/vmlinuz-6.1.0-57-cloud-amd64"
KERNEL=/boot/vmlinuz-6.1.0-57-cloud-amd64
echo "root=/dev/vda1 ro console=ttyS0" >"$ROOT/proc/cmdline"
start_bus "$BUS_CONF_IN" "$POLICY"
DAEMON_ARGS=(--backend=record --kexec-trigger=record --libvirt-uri=test:///default)
check "daemon starts" start_daemon bytes
OBJ=(org.upgraded.Upgrade1 /org/upgraded/Upgrade1 org.upgraded.Upgrade1.Manager)

# The inputs: empty, long, control characters, non-ASCII spaces, and a 2-, 3- and 4-byte
# character right after every length a message might cut at.
rep() { head -c "$1" /dev/zero | tr '\0' "${2:-a}"; }
inputs=("" "$(rep 300)" "$(rep 5000)" "$(rep 100000)" $'a\x01b' $'\n' $'\x1b[31m' $'del\x7f'
        $'\t' $'ro\u00a0upgraded.foo=1' $'\u00a0' $'\u2028' "/boot/$(rep 300)"
        "upgraded.$(rep 60)é")
for k in 15 16 30 31 32 33 62 63 64 65 255; do
        inputs+=("$(rep "$k")é" "$(rep "$k")€" "$(rep "$k")😀")
done

calls=0 slowest=0
# call USER DESCRIPTION SIGNATURE ARGS...: one call of METHOD (the first of ARGS) as USER;
# it must answer in time with a success or a named error of ours.
call() {
        local user=$1 what=$2 t0 t1 ms rc name
        shift 2
        local -a run=()
        [ "$user" = root ] || run=(setpriv --reuid="$TEST_USER" --regid=nogroup --clear-groups --)
        t0=$(date +%s%N)
        SYSTEMD_LOG_LEVEL=debug timeout 20 "${run[@]}" busctl --address="$DBUS_SYSTEM_BUS_ADDRESS" \
                --timeout="$CALL_DEADLINE" call "${OBJ[@]}" "$@" >"$T/out" 2>"$T/err"
        rc=$?
        t1=$(date +%s%N)
        ms=$(((t1 - t0) / 1000000))
        calls=$((calls + 1))
        [ "$ms" -gt "$slowest" ] && slowest=$ms
        name=$(sed -n 's/.*Got message type=error .*error-name=\([^ ]*\).*/\1/p' "$T/err" | tail -1)
        if [ "$rc" -eq 0 ]; then
                last_ok=1
                return 0
        fi
        last_ok=0
        case "$name" in
        org.upgraded.Upgrade1.Error.*) return 0 ;;
        esac
        not_ok "$user $what: $1 answered '${name:-nothing}' in $ms ms (exit $rc): $(grep -v '^Got message\|^Sent message\|^Bus \|^Registering\|^Failed to read\|^SELinux\|^Assuming\|^Connecting' "$T/err" | tail -2 | cut -c1-200)"
        return 1
}
# Cancels what a successful Stage staged, so the next Stage starts from idle.
unstage() {
        [ "$last_ok" = 1 ] && busctl --address="$DBUS_SYSTEM_BUS_ADDRESS" call "${OBJ[@]}" Cancel s "" >/dev/null 2>&1
        return 0
}

# ---- the two inputs an audit found that left the caller waiting ----
check "nobody: GetReport of 31 'a' and an 'é' -> InvalidId in time" \
        call nobody "31a+é" GetReport s "$(rep 31)é"
grep -q 'error-name=org.upgraded.Upgrade1.Error.InvalidId' "$T/err" || not_ok "the GetReport error is InvalidId: $(tail -3 "$T/err")"
check "nobody: an option key whose 64th byte starts an 'é' -> InvalidOption in time" \
        call nobody "65-byte key" Stage 'sssa{sv}' "$KERNEL" "" "" 1 "$(rep 63)é" b true
grep -q 'error-name=org.upgraded.Upgrade1.Error.InvalidOption' "$T/err" || not_ok "the option error is InvalidOption: $(tail -3 "$T/err")"

# ---- every method, every string argument, every input ----
for user in root nobody; do
        before=$failures
        for i in "${!inputs[@]}"; do
                s=${inputs[$i]}
                w="input $i (${#s} chars)"
                call "$user" "$w kernel" Stage 'sssa{sv}' "$s" "" "" 0; unstage
                call "$user" "$w initrd" Stage 'sssa{sv}' "$KERNEL" "$s" "" 0; unstage
                call "$user" "$w cmdline" Stage 'sssa{sv}' "$KERNEL" "" "$s" 0; unstage
                call "$user" "$w option key" Stage 'sssa{sv}' "$KERNEL" "" "" 1 "$s" b true; unstage
                call "$user" "$w id" Commit 'sa{sv}' "$s" 0
                call "$user" "$w option key" Commit 'sa{sv}' "" 1 "$s" b true
                call "$user" "$w id" Cancel s "$s"
                call "$user" "$w id" GetReport s "$s"
                call "$user" "$w id" PlanCommit s "$s"
                call "$user" "$w name" RestoreVM s "$s"
        done
        [ "$failures" -eq "$before" ] && ok "$user: every method answered every input within ${CALL_DEADLINE} s with a success or a named error"
done
echo "# $calls calls, the slowest answered in $slowest ms"
check "the daemon is still there" kill -0 "$DAEMON_PID"
check "the daemon still answers" busctl --address="$DBUS_SYSTEM_BUS_ADDRESS" --timeout=3 call "${OBJ[@]}" Describe
stop_daemon
check "the daemon exits cleanly" test $? -eq 0

echo "1..$n"
[ "$failures" -eq 0 ] || { echo "$failures of $n checks failed"; exit 1; }
