#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The configuration at run time and the way out of a stuck update, through the real daemon on
# a private bus (TEST-ONLY record backend and kexec trigger; libvirt's test driver, one running
# domain "test"):
#   1. `--check-config --show` names where each setting came from, and warns about a missing
#      configuration directory (exit 0) but fails on a missing --root;
#   2. Reload() at rest applies a changed setting (Describe() and the next commit's decision
#      show it); a configuration with errors is refused with InvalidConfig naming file:line,
#      and the previous policy stays in effect; bytes that are not UTF-8 are quoted as \xNN
#      in Reload()'s InvalidConfig and in --check-config, FILE:LINE kept;
#   3. a commit past its handoff record (recorded kexec request: phase handoff-requested):
#      Reload() is refused with Busy; Stage and Cancel both name `upgradectl cancel ID`;
#      while the kexec request stands, Cancel is refused and says what to stop first;
#   4. the daemon restarted with the systemd trigger, and no systemd job for the kexec (no
#      systemd on this bus): Cancel rolls the stuck update back: cancelled, the VM given
#      back, the image unloaded; a reload and a new stage work.
# usage: test-daemon-reload.sh UPGRADED UPGRADECTL BUS_CONF_IN POLICY_CONF MAKE_BZIMAGE ...
set -uo pipefail

UPGRADED=$1 CTL=$2 BUS_CONF_IN=$3 POLICY=$4 MAKE_BZIMAGE=$5
NEW=6.1.0-57-cloud-amd64

. "$(dirname "$0")/lib.sh"
test_begin reload "private dbus-daemon, root-owned images" dbus-daemon busctl python3
DBUS_PID= DAEMON_PID=
DAEMON_ARGS=(--backend=record --kexec-trigger=record --libvirt-uri=test:///default)

cleanup() {
        for pid in $DAEMON_PID $DBUS_PID; do
                kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
        done
        if [ "$failures" -ne 0 ]; then
                echo "--- daemon log"; cat "$T"/daemon*.log 2>/dev/null
        fi
        rm -rf "$T"
}
trap cleanup EXIT

json_get() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval('d'+sys.argv[1]))" "$1"; }
policy_get() { "$CTL" describe --json | json_get "['policy']$1"; }
CONF=$ROOT/etc/upgraded/upgraded.conf

# ---- the machine ----
mkdir -p "$ROOT/boot" "$ROOT/proc" "$ROOT/var/lib/upgraded/images"
python3 "$MAKE_BZIMAGE" "$ROOT/boot/vmlinuz-$NEW" "$NEW" && chmod 0644 "$ROOT/boot/vmlinuz-$NEW"
KERNEL=/boot/vmlinuz-$NEW
echo "BOOT_IMAGE=/boot/vmlinuz-old root=/dev/vda1 ro console=ttyS0" >"$ROOT/proc/cmdline"

# ---- 1. --check-config --show ----
expect_fail "--check-config: no configuration directory is a warning naming it" 0 \
        "warning: configuration directory $ROOT/etc/upgraded: No such file" \
        "$UPGRADED" --root="$ROOT" --check-config
expect_fail "--check-config: a --root that is not there fails, naming it" 1 "--root=$T/nonexistent is not a directory" \
        "$UPGRADED" --root="$T/nonexistent" --check-config
mkdir -p "$ROOT/etc/upgraded/upgraded.conf.d"
printf '[VM]\nSaveParallel=3\n' >"$CONF"
printf '[Handoff]\nMode=verified\n\n[VM]\nSaveParallel=4\n' >"$ROOT/etc/upgraded/upgraded.conf.d/50-site.conf"
"$UPGRADED" --root="$ROOT" --check-config --show --libvirt-timeout=7 >"$T/show.out" 2>"$T/show.err"
rc=$?
sed 's/^/# /' "$T/show.out"
check "--show exits 0 without a warning" test "$rc" -eq 0 -a ! -s "$T/show.err"
check "--show: SaveParallel from the drop-in, line 5" grep -qE "^SaveParallel=4 +# $ROOT/etc/upgraded/upgraded.conf.d/50-site.conf:5\$" "$T/show.out"
check "--show: Mode from the drop-in, line 2" grep -qE "^Mode=verified +# $ROOT/etc/upgraded/upgraded.conf.d/50-site.conf:2\$" "$T/show.out"
check "--show: AllowFast is the default" grep -qE '^AllowFast=no +# default$' "$T/show.out"
check "--show: the option --libvirt-timeout=7" grep -qE '^# --libvirt-timeout=7 +# --libvirt-timeout$' "$T/show.out"
rm "$ROOT/etc/upgraded/upgraded.conf.d/50-site.conf"

# ---- 2. Reload at rest ----
start_bus "$BUS_CONF_IN" "$POLICY"
BUSCTL=(busctl --address="$DBUS_SYSTEM_BUS_ADDRESS")
OBJ=(org.upgraded.Upgrade1 /org/upgraded/Upgrade1 org.upgraded.Upgrade1.Manager)
reload() { "${BUSCTL[@]}" call "${OBJ[@]}" Reload; }
check "daemon starts" start_daemon main
for _ in $(seq 100); do reload 2>/dev/null && break; sleep 0.1; done # the recovery job ends
check "SaveParallel=3 in effect" test "$(policy_get "['vm']['save_parallel']")" = 3
printf '[Handoff]\nMode=verified\n[VM]\nSaveParallel=5\n' >"$CONF"
check "Reload at rest succeeds" reload
check "Reload applied SaveParallel=5" test "$(policy_get "['vm']['save_parallel']")" = 5
check "Reload applied Mode=verified" test "$(policy_get "['handoff']['mode']")" = verified
printf '[Handoff]\nMode=verified\n[VM]\nSaveParallel=6\nBogus=1\n' >"$CONF"
expect_fail "Reload of a broken configuration -> InvalidConfig naming file:line" 1 \
        "upgraded.conf:5: Unknown key Bogus= in \[VM\]" reload
check "... and the previous policy stays (SaveParallel=5)" test "$(policy_get "['vm']['save_parallel']")" = 5
check "the refusal is logged" grep -q "Reload refused, the previous policy stays in effect" "$T/daemon-main.log"
# Bytes that are not UTF-8: the named error, FILE:LINE, the bytes quoted as \xNN.
printf '[VM]\nSaveParallel=6\nBog\377us=1\n' >"$CONF"
reload_named() {
        dbus-send --system --print-reply --dest=org.upgraded.Upgrade1 /org/upgraded/Upgrade1 \
                org.upgraded.Upgrade1.Manager.Reload
}
expect_fail "Reload of a file with a byte that is not UTF-8 -> InvalidConfig" 1 \
        "org.upgraded.Upgrade1.Error.InvalidConfig" reload_named
check "... naming file:line with the byte escaped" \
        grep -qF 'upgraded.conf:3: Unknown key Bog\xffus= in [VM]' "$T/err"
check "... and the previous policy stays (SaveParallel=5)" test "$(policy_get "['vm']['save_parallel']")" = 5
"$UPGRADED" --root="$ROOT" --check-config >"$T/check.out" 2>&1
rc=$?
check "--check-config of that file fails" test "$rc" -ne 0
check "... naming file:line with the byte escaped" \
        grep -qF 'upgraded.conf:3: Unknown key Bog\xffus= in [VM]' "$T/check.out"
check "... and never prints the raw byte" bash -c "! LC_ALL=C grep -q \$'\\xff' '$T/check.out'"
printf '[Handoff]\nMode=auto\n[VM]\nSaveParallel=5\n' >"$CONF"
check "Reload back to Mode=auto" reload

# ---- 3. A commit past its handoff record, stuck ----
ID=$("$CTL" stage "$KERNEL" --cmdline="root=/dev/vda1 ro")
printf '[Handoff]\nMode=verified\n[VM]\nSaveParallel=5\n' >"$CONF"
check "Reload with a staged update succeeds (the commit will use it)" reload
"$CTL" commit --wait >"$T/commit.out" 2>&1
check "commit reaches handoff-requested" test "$("$CTL" show "$ID" -p Phase --value)" = handoff-requested
check "the commit was decided under the reloaded policy (handoff verified)" \
        test "$("$CTL" show "$ID" -p Handoff --value)" = verified
printf '[VM]\nSaveParallel=2\n' >"$CONF"
expect_fail "Reload while the update is committing -> Busy, with the reason" 1 \
        "Update $ID is committing (phase handoff-requested): it keeps the policy" reload
check "... the policy in effect is unchanged" test "$(policy_get "['vm']['save_parallel']")" = 5
expect_fail "stage names the way out: upgradectl cancel ID" 6 "If it is stuck before the kexec, \`upgradectl cancel $ID\` rolls it back" \
        "$CTL" stage "$KERNEL"
expect_fail "cancel while the kexec request stands -> BadState: what to stop first" 6 \
        "past the point of no return.*remove /run/upgraded/kexec-requested.json first, then \`upgradectl cancel $ID\` rolls the update back" \
        "$CTL" cancel "$ID"
check "still committing" test "$("$CTL" show "$ID" -p State --value)" = committing

# ---- 4. The way out ----
# Restarted with the systemd trigger: Cancel asks systemd (ListJobs) whether a kexec, reboot
# or shutdown job is queued; this private bus has no systemd, so none is.
stop_daemon
check "restart in the same boot: still waiting for the kexec" start_daemon same-boot --kexec-trigger=systemd
check "still handoff-requested" test "$("$CTL" show "$ID" -p Phase --value)" = handoff-requested
"$CTL" cancel "$ID" >"$T/cancel.out" 2>&1
rc=$?
sed 's/^/# /' "$T/cancel.out"
check "cancel of the stuck update succeeds" test "$rc" -eq 0
check "the update is cancelled" test "$("$CTL" show "$ID" -p State --value)" = cancelled
check "its error says it was stuck" bash -c "'$CTL' show '$ID' -p Error --value | grep -q \"stuck in phase 'handoff-requested'\""
check "the image is unloaded" python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["loaded"])' "$ROOT/run/upgraded/kexec-record.json"
check "the rollback gave the VM back" test "$("${BUSCTL[@]}" get-property org.upgraded.Upgrade1 "/org/upgraded/Upgrade1/update/$ID" org.upgraded.Upgrade1.Update VMs)" = 'a(sss) 1 "test" "checkpoint" "rolled-back"'
check "State idle" test "$("$CTL" show -p State --value)" = idle
check "Reload at rest again" reload
check "... applied SaveParallel=2" test "$(policy_get "['vm']['save_parallel']")" = 2
ID2=$("$CTL" stage "$KERNEL")
check "a new stage works" grep -qE '^[0-9a-f]{16}$' <<<"$ID2"
check "cancel of a staged update still works" "$CTL" cancel "$ID2"
stop_daemon

echo "1..$n"
[ "$failures" -eq 0 ]
