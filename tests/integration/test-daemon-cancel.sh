#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Cancel and the point of no return, through the real daemon on a private bus with two real
# TCG guests of a private libvirtd, big enough (512 MiB, RAM filled by counter-fill.s) that
# their managed saves take seconds:
#   1. Cancel while the saves run: the call returns at once, the running save is aborted,
#      both VMs resume with their counters continued, no saved image is left, the update
#      ends "cancelled"; `commit --wait` showed the bytes saved and ends with exit 1;
#   2. past the point of no return (the test trigger records the kexec request instead of
#      rebooting: phase handoff-requested): Cancel and RestoreVM are refused with BadState,
#      both images are kept; `commit --wait --wait-timeout=1` stops waiting with exit 10
#      and `watch` attaches to the same commit;
#   3. the "new kernel": the daemon takes its bus name before restoring, `watch` follows
#      the restore to the end, both VMs continue.
# usage: test-daemon-cancel.sh UPGRADED UPGRADECTL BUS_CONF_IN BUS_POLICY MAKE_BZIMAGE VALIDATE SCHEMA COUNTER_FILL_BIN
set -uo pipefail

UPGRADED_CONF=$'[VM]\nSaveParallel=1\n'
GUEST_MIB=512 WAIT_COUNTER_S=90
. "$(dirname "$0")/daemon-vms-lib.sh"
SAVE_DIR=/var/lib/libvirt/qemu/save
# Two 512 MiB images (the tmpfs of private-libvirtd is 64 MiB by default).
mount -o remount,size=1200m "$SAVE_DIR" || { echo "cannot grow $SAVE_DIR"; exit 1; }
vms_setup
check "daemon starts" start_daemon old
state() { "$CTL" show "$1" -p State --value; }
phase() { "$CTL" show "$1" -p Phase --value; }
images() { ls "$SAVE_DIR" | tr '\n' ' '; }
# (virsh's output captured first: with pipefail, grep -q closing the pipe early fails virsh.)
both_images_kept() {
        local d info ok=0
        for d in vm-a vm-b; do
                info=$(V dominfo "$d")
                echo "# $d: $(V domstate "$d"), $(grep -E 'Managed save' <<<"$info"), image $(stat -c %s "$SAVE_DIR/$d.save" 2>&1)"
                [ "$(V domstate "$d")" = "shut off" ] && [ -s "$SAVE_DIR/$d.save" ] &&
                        grep -qE 'Managed save: +yes' <<<"$info" || ok=1
        done
        return $ok
}
now_ms() { date +%s%3N; }

# ---- 1. Cancel while the saves run ----
ID=$("$CTL" stage "/boot/vmlinuz-$NEW" --cmdline="root=/dev/vda1 ro")
before_a=$(counter vm-a) before_b=$(counter vm-b)
"$CTL" commit --wait >"$T/commit1.out" 2>&1 &
commit_pid=$!
saving=
for _ in $(seq 6000); do
        saving=$(cd "$SAVE_DIR" && ls -- *.save 2>/dev/null | head -n 1)
        [ -n "$saving" ] && break
        sleep 0.01
done
sleep 0.5 # well into the first save
t0=$(now_ms)
"$CTL" cancel "$ID" >"$T/cancel1.out" 2>&1
rc=$? took=$(($(now_ms) - t0))
echo "# cancel while saving '$saving' (images: $(images)): exit $rc after $took ms"
check "cancel during the saves: accepted at once (exit $rc, $took ms)" test "$rc" -eq 0 -a "$took" -lt 5000
wait "$commit_pid"
rc=$?
sed 's/^/# /' "$T/commit1.out"
check "cancel: commit --wait exits 1" test "$rc" -eq 1
check "cancel: commit --wait showed the bytes being saved" grep -qE 'VM vm-[ab] save: [0-9.]+ MiB of' "$T/commit1.out"
check "cancel: the update is cancelled" test "$(state "$ID")" = cancelled
check "cancel: both running, counters continued" continued "$before_a" "$before_b" 400
check "cancel: no managed save image left" no_image vm-a vm-b
check "cancel: the save directory is empty ($(images))" test -z "$(ls -A "$SAVE_DIR")"

# ---- 2. Past the point of no return ----
ID2=$("$CTL" stage "/boot/vmlinuz-$NEW" --cmdline="root=/dev/vda1 ro")
before_a=$(counter vm-a) before_b=$(counter vm-b)
t0=$(now_ms)
"$CTL" commit --wait --wait-timeout=1 >"$T/commit2.out" 2>&1
rc=$? took=$(($(now_ms) - t0))
sed 's/^/# /' "$T/commit2.out"
check "--wait-timeout=1: exit 10 after $took ms" test "$rc" -eq 10 -a "$took" -lt 4000
"$CTL" watch >"$T/watch2.out" 2>&1
rc=$?
sed 's/^/# watch: /' "$T/watch2.out"
check "watch attaches to the commit and ends at the handoff (exit $rc)" test "$rc" -eq 0
check "watch: the kexec was requested" grep -q 'kexec requested' "$T/watch2.out"
check "the update is in handoff-requested" test "$(phase "$ID2")" = handoff-requested
"$CTL" cancel "$ID2" >"$T/out" 2>"$T/err"
rc=$?
sed 's/^/# cancel: /' "$T/err"
check "cancel after the point of no return: BadState, exit 6" bash -c "[ $rc -eq 6 ] && grep -q BadState '$T/err'"
"$CTL" restore-vm vm-a >"$T/out" 2>"$T/err"
rc=$?
sed 's/^/# restore-vm: /' "$T/err"
check "restore-vm after the point of no return: BadState, exit 6" bash -c "[ $rc -eq 6 ] && grep -q BadState '$T/err'"
check "both images kept, both VMs shut off" both_images_kept
check "still handoff-requested" test "$(phase "$ID2")" = handoff-requested
stop_daemon

# ---- 3. The new kernel: the name first, then the restore, watched ----
"$UPGRADED" --root="$ROOT" "${DAEMON_ARGS[@]}" --running-kernel="$NEW" \
        --boot-id="$(tr -d '-' </proc/sys/kernel/random/uuid)" >"$T/daemon-new.log" 2>&1 &
DAEMON_PID=$!
check "the new kernel's daemon takes its name" wait_for_daemon
"$CTL" watch "$ID2" >"$T/watch3.out" 2>&1
rc=$?
sed 's/^/# watch: /' "$T/watch3.out"
check "watch follows the restore to the end (exit $rc)" test "$rc" -eq 0
check "watch saw the restore phase" grep -q 'post-boot' "$T/watch3.out"
check "the update is done" test "$(state "$ID2")" = done
check "restored: both running, counters continued" continued "$before_a" "$before_b" 2000
check "restored: no image left" no_image vm-a vm-b
stop_daemon

echo "1..$n"
[ "$failures" -eq 0 ]
