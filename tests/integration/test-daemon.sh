#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Integration test of upgraded + upgradectl on a private system-like bus:
# the real daemon binary against a temporary --root, driven by the real CLI and
# busctl. Uses the TEST-ONLY "record" backend and kexec trigger (this machine
# has no kexec and must never reboot); the default kexec_file backend is
# checked for its named KexecUnavailable error.
#
# Every daemon start must end with exit 0 on SIGTERM. With UPGRADED_TEST_VALGRIND=SUPP each
# runs under valgrind's memcheck, and an error or a definite leak fails that exit (the
# meson test daemon-bus-valgrind); in an ASan+UBSan build a sanitizer report in its log fails
# it (tools/check, stage asan-integration).
#
# usage: test-daemon.sh UPGRADED UPGRADECTL BUS_CONF_IN POLICY_CONF MAKE_BZIMAGE VALIDATE SCHEMA
set -uo pipefail

UPGRADED=$1 CTL=$2 BUS_CONF_IN=$3 POLICY=$4 MAKE_BZIMAGE=$5 VALIDATE=$6 SCHEMA=$7
TEST_USER=upgraded-test
NEW=6.1.0-57-cloud-amd64

. "$(dirname "$0")/lib.sh"
test_begin it "private dbus-daemon, a system user, root-owned images" dbus-daemon busctl python3 setpriv sha256sum
WRAPPER= daemon_stops=0
if [ -n "${UPGRADED_TEST_VALGRIND:-}" ]; then # the suppressions file
        command -v valgrind >/dev/null || { echo "SKIP: valgrind missing"; exit 77; }
        WRAPPER="valgrind --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite --suppressions=$UPGRADED_TEST_VALGRIND --log-file=$T/valgrind-%p.log"
        # The daemon runs the commit steps in its event loop, some 30 times slower here:
        # the CLI's and busctl's calls wait longer than the usual 25 s.
        export SYSTEMD_BUS_TIMEOUT=300s
fi
ROOT=$T/root
DBUS_PID= DAEMON_PID= MON_PID= POLKIT_PID=
POLKIT_ACTION_FILE=/usr/share/polkit-1/actions/org.upgraded.Upgrade1.policy
POLKIT_RULES_FILE=/etc/polkit-1/rules.d/50-upgraded-integration-test.rules
created_action= created_user=

cleanup() {
        for pid in $MON_PID $DAEMON_PID $POLKIT_PID $DBUS_PID; do
                kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
        done
        rm -f "$POLKIT_RULES_FILE"
        [ -n "$created_action" ] && rm -f "$POLKIT_ACTION_FILE"
        [ -f "$T/polkit-action.orig" ] && cp "$T/polkit-action.orig" "$POLKIT_ACTION_FILE"
        [ -n "$created_user" ] && userdel "$TEST_USER"
        if [ "$failures" -ne 0 ]; then
                echo "--- daemon log"; cat "$T"/daemon*.log 2>/dev/null
                echo "--- valgrind"; cat "$T"/valgrind-*.log 2>/dev/null
        fi
        rm -rf "$T"
}
trap cleanup EXIT

# ---- the machine: a root tree, a private bus ----
mkdir -p "$ROOT/boot" "$ROOT/proc" "$ROOT/var/lib/upgraded/images"
kernel_src=
for k in /boot/vmlinuz-* /var/cache/upgraded-lab/*/boot/vmlinuz-* /var/cache/upgraded-lab/vmlinuz-*; do
        [ -f "$k" ] && [ ! -L "$k" ] && { kernel_src=$k; break; }
done
if [ -n "$kernel_src" ]; then
        NEW=${kernel_src##*/vmlinuz-}
        cp "$kernel_src" "$ROOT/boot/vmlinuz-$NEW"
        echo "# using real kernel $kernel_src"
else
        python3 "$MAKE_BZIMAGE" "$ROOT/boot/vmlinuz-$NEW" "$NEW"
        echo "# no kernel image on this machine: using a crafted bzImage header file"
fi
KERNEL=/boot/vmlinuz-$NEW
chmod 0644 "$ROOT$KERNEL"
head -c 4096 /dev/urandom >"$ROOT/boot/initrd.img-$NEW"
chmod 0644 "$ROOT/boot/initrd.img-$NEW"
# The measurement reads the CPU flags and the kernel log through --root.
mkdir -p "$ROOT/dev" && ln -s /proc/cpuinfo "$ROOT/proc/cpuinfo" && ln -s /dev/kmsg "$ROOT/dev/kmsg"
echo "BOOT_IMAGE=/boot/vmlinuz-old root=/dev/vda1 ro upgraded.stamps=0x99 console=ttyS0" >"$ROOT/proc/cmdline"
# Bad inputs.
python3 "$MAKE_BZIMAGE" "$ROOT/boot/vmlinuz-ww" 6.1 && chmod 0666 "$ROOT/boot/vmlinuz-ww"
python3 "$MAKE_BZIMAGE" "$ROOT/boot/vmlinuz-trunc" 6.1 --truncate && chmod 0644 "$ROOT/boot/vmlinuz-trunc"
echo "not a kernel" >"$ROOT/boot/notes.txt" && chmod 0644 "$ROOT/boot/notes.txt"
ln -s "vmlinuz-$NEW" "$ROOT/boot/vmlinuz"
cp "$ROOT$KERNEL" "$ROOT/boot/vmlinuz-user" && chmod 0644 "$ROOT/boot/vmlinuz-user"
if ! id "$TEST_USER" >/dev/null 2>&1; then
        useradd -r -M -s /usr/sbin/nologin "$TEST_USER" && created_user=1
fi
chown "$TEST_USER" "$ROOT/boot/vmlinuz-user"

# polkitd (as user polkitd) may own its name on this bus; everyone may ask it.
start_bus "$BUS_CONF_IN" "$POLICY" \
        -e 's|</busconfig>|<policy user="polkitd"><allow own="org.freedesktop.PolicyKit1"/></policy><policy context="default"><allow send_destination="org.freedesktop.PolicyKit1"/></policy></busconfig>|'
ADDR=$DBUS_SYSTEM_BUS_ADDRESS
BUSCTL=(busctl --address="$ADDR")
OBJ=(org.upgraded.Upgrade1 /org/upgraded/Upgrade1 org.upgraded.Upgrade1.Manager)

start_daemon() { # start_daemon LOGNAME ARGS...
        local log=$1
        shift
        # libvirt's test driver: an in-process host with one running 8 GiB domain "test",
        # fresh at every daemon start.
        $WRAPPER "$UPGRADED" --root="$ROOT" --libvirt-uri=test:///default "$@" >"$T/daemon-$log.log" 2>&1 &
        DAEMON_PID=$!
        DAEMON_LOG=$T/daemon-$log.log
        wait_for_daemon
}
# stop_daemon: SIGTERM; the daemon must exit 0 (under valgrind or the sanitizers: with no
# error and no definite leak reported).
stop_daemon() {
        local rc
        [ -n "$DAEMON_PID" ] || return 0
        kill "$DAEMON_PID"
        wait "$DAEMON_PID"
        rc=$?
        DAEMON_PID=
        [ "$rc" -eq 0 ] || { not_ok "the daemon exits cleanly on SIGTERM (exit $rc, $DAEMON_LOG)"; return 1; }
        # UBSan reports and goes on unless told to halt: its report fails the run too.
        if grep -qE 'runtime error:|ERROR: (AddressSanitizer|LeakSanitizer)' "$DAEMON_LOG"; then
                not_ok "no sanitizer report from the daemon ($DAEMON_LOG)"
                return 1
        fi
        daemon_stops=$((daemon_stops + 1))
}
describe() { "$CTL" describe --json; }
as_user() { setpriv --reuid="$TEST_USER" --regid="$TEST_USER" --clear-groups -- "$@"; }
json_get() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval('d'+sys.argv[1]))" "$1"; }

# ---- the binaries themselves ----
check "upgraded --version" "$UPGRADED" --version
check "upgraded --help names --root" bash -c "'$UPGRADED' --help | grep -q -- --root="
expect_fail "test backend refused without --root" 1 "need --root" "$UPGRADED" --backend=record
for r in // /./ /tmp/.. /proc/self/root; do
        expect_fail "test backend refused with --root=$r (the real root)" 1 "need --root" "$UPGRADED" --root="$r" --backend=record
done
for verb in stage commit cancel watch restore-vm status list report show describe; do
        check "upgradectl $verb --help is a man page" bash -c \
                "out=\$('$CTL' $verb --help) && for s in NAME SYNOPSIS DESCRIPTION OPTIONS 'EXIT STATUS' EXAMPLES; do grep -q \"^\$s\" <<<\"\$out\" || exit 1; done"
done
expect_fail "unknown verb is a usage error" 2 "Unknown verb" "$CTL" frobnicate
expect_fail "--check-config with a --root that is not there" 1 "is not a directory" "$UPGRADED" --root=/nonexistent --check-config
check "--help lists every verb, restore-vm too" bash -c "'$CTL' --help | grep -qE '^    restore-vm NAME '"
# A verb refuses what it does not take (issue: `commit --json` alone committed).
expect_fail "list --wait is a usage error" 2 "'list' does not take --wait" "$CTL" list --wait
expect_fail "show --json is a usage error" 2 "'show' does not take --json" "$CTL" show --json
expect_fail "status --dry-run is a usage error" 2 "'status' does not take --dry-run" "$CTL" status --dry-run
expect_fail "commit --json without --dry-run is a usage error" 2 "needs --dry-run" "$CTL" commit --json
expect_fail "--wait-timeout without --wait is a usage error" 2 "add --wait" "$CTL" commit --wait-timeout=5

# ---- configuration (policy library) ----
check "--check-config with no configuration is fine" "$UPGRADED" --root="$ROOT" --check-config
mkdir -p "$ROOT/etc/upgraded"
printf '[Handoff]\nMode=bogus\n' >"$ROOT/etc/upgraded/upgraded.conf"
expect_fail "--check-config names the bad line" 1 "upgraded.conf:2" bash -c "'$UPGRADED' --root='$ROOT' --check-config 1>&2"
expect_fail "the daemon refuses to start on a broken configuration" 1 "upgraded.conf:2" "$UPGRADED" --root="$ROOT" --backend=record
rm "$ROOT/etc/upgraded/upgraded.conf"

expect_fail "no daemon on the bus -> exit 8" 8 "org.upgraded.Upgrade1" "$CTL" status
expect_fail "no daemon: a hint what to look at" 8 "systemctl status upgraded.service" "$CTL" status
expect_fail "no verb is status (no daemon -> exit 8)" 8 "org.upgraded.Upgrade1" "$CTL"

# ---- default backend on a kernel without kexec: named error, nothing changes ----
# The default selection: kexec_load (our loader) first; the root has no
# /sys/kernel/kexec_loaded, i.e. a kernel without kexec, so it falls back to
# kexec_file, which cannot work either, and says both reasons.
check "daemon starts with the default backend selection" start_daemon default
D0=$(describe)
check "Describe names the fallback backend kexec_file" test "$(json_get "['backend']['name']" <<<"$D0")" = kexec_file
check "Describe says it is a fallback" test "$(json_get "['backend']['fallback']" <<<"$D0")" = True
R0=$(json_get "['backend']['reason']" <<<"$D0")
check "the reason names kexec_load and the missing kexec support" bash -c 'case "$1" in "kexec_load: "*"no kexec support"*) ;; *) exit 1 ;; esac' _ "$R0"
if [ "$(json_get "['backend']['usable']" <<<"$D0")" = False ]; then
        check "Describe says why kexec_file is unusable" test -n "$(json_get "['backend']['reason']" <<<"$D0")"
        expect_fail "stage without kexec -> KexecUnavailable" 7 KexecUnavailable "$CTL" stage "$KERNEL"
        check "nothing changed after KexecUnavailable" test "$(describe)" = "$D0"
else
        echo "# this kernel has kexec: skipping the KexecUnavailable check (never load a kernel here)"
fi
stop_daemon

# ---- the record backend ----
timeout 300 "${BUSCTL[@]}" monitor >"$T/monitor.txt" 2>&1 &
MON_PID=$!
check "daemon starts with the record backend" start_daemon record --backend=record --kexec-trigger=record
D0=$(describe)
check "State is idle" test "$("$CTL" show -p State --value)" = idle
check "Describe says TestOnly backend record" test "$(json_get "['backend']['test_only']" <<<"$D0")" = True
check "busctl sees the Manager interface" bash -c "'${BUSCTL[0]}' --address='$ADDR' introspect org.upgraded.Upgrade1 /org/upgraded/Upgrade1 | grep -q '^org.upgraded.Upgrade1.Manager'"
check "RunningKernel property" test "$("${BUSCTL[@]}" get-property "${OBJ[@]}" RunningKernel)" = "s \"$(uname -r)\""

expect_fail "relative kernel path -> InvalidPath" 3 InvalidPath "$CTL" stage boot/vmlinuz
expect_fail "'..' in path -> InvalidPath" 3 InvalidPath "$CTL" stage /boot/../boot/vmlinuz-ww
expect_fail "outside allowed roots -> NotAllowedPath" 3 NotAllowedPath "$CTL" stage /etc/passwd
expect_fail "symlink -> InvalidPath" 3 InvalidPath "$CTL" stage /boot/vmlinuz
expect_fail "world-writable -> UnsafeFile" 3 UnsafeFile "$CTL" stage /boot/vmlinuz-ww
expect_fail "not root-owned -> UnsafeFile" 3 UnsafeFile "$CTL" stage /boot/vmlinuz-user
expect_fail "truncated bzImage -> InvalidImage" 3 InvalidImage "$CTL" stage /boot/vmlinuz-trunc
expect_fail "text file -> InvalidImage" 3 InvalidImage "$CTL" stage /boot/notes.txt
expect_fail "missing initrd -> InvalidPath" 3 InvalidPath "$CTL" stage "$KERNEL" --initrd=/boot/nope
expect_fail "smuggled stamps -> InvalidCmdline" 3 InvalidCmdline "$CTL" stage "$KERNEL" --cmdline="quiet upgraded.stamps=1"
expect_fail "control character -> InvalidCmdline" 3 InvalidCmdline "$CTL" stage "$KERNEL" --cmdline=$'a\x01b'
expect_fail "too long -> InvalidCmdline" 3 InvalidCmdline "$CTL" stage "$KERNEL" --cmdline="$(head -c 3000 /dev/zero | tr '\0' a)"
# More paths, each refused with its named error before anything is read; a FIFO neither
# blocks the daemon nor is read (it is opened non-blocking and judged by fstat).
mkdir -p "$ROOT/boot/dir" "$ROOT/boot/real"
cp -p "$ROOT$KERNEL" "$ROOT/boot/real/vmlinuz-$NEW"
ln -s real "$ROOT/boot/sub"
cp -p "$ROOT$KERNEL" "$ROOT/boot/vmlinuz-gw" && chmod 0664 "$ROOT/boot/vmlinuz-gw"
mkfifo -m 0644 "$ROOT/boot/fifo"
mknod -m 0644 "$ROOT/boot/null" c 1 3
ln -s "initrd.img-$NEW" "$ROOT/boot/initrd.img"
expect_fail "symlinked directory on the way -> InvalidPath" 3 "contains a symbolic link" "$CTL" stage "/boot/sub/vmlinuz-$NEW"
expect_fail "group-writable -> UnsafeFile" 3 UnsafeFile "$CTL" stage /boot/vmlinuz-gw
expect_fail "FIFO -> InvalidPath, without blocking" 3 "not a regular file" timeout 20 "$CTL" stage /boot/fifo
expect_fail "character device -> InvalidPath" 3 InvalidPath "$CTL" stage /boot/null
expect_fail "directory -> InvalidPath" 3 "not a regular file" "$CTL" stage /boot/dir
expect_fail "an allowed directory itself -> InvalidPath" 3 "not a regular file" "$CTL" stage /boot
expect_fail "symlinked initrd -> InvalidPath" 3 "contains a symbolic link" "$CTL" stage "$KERNEL" --initrd=/boot/initrd.img
expect_fail "FIFO as initrd -> InvalidPath" 3 "not a regular file" timeout 20 "$CTL" stage "$KERNEL" --initrd=/boot/fifo
for p in /boot/../etc/passwd "/boot/./vmlinuz-$NEW" "//boot/vmlinuz-$NEW" "/boot/vmlinuz-$NEW/" \
        /var/lib/upgraded/images/../../../../etc/shadow "/boot/real/../vmlinuz-$NEW" /boot/..; do
        expect_fail "'$p' -> InvalidPath (not normalized)" 3 "is not normalized" "$CTL" stage "$p"
done
expect_fail "a sibling sharing the prefix (/bootx) -> NotAllowedPath" 3 NotAllowedPath "$CTL" stage /bootx/vmlinuz
expect_fail "the state directory -> NotAllowedPath" 3 NotAllowedPath "$CTL" stage /var/lib/upgraded/updates/x.json
expect_fail "smuggled panic mark -> InvalidCmdline" 3 InvalidCmdline "$CTL" stage "$KERNEL" --cmdline="quiet upgraded.panic=1"
expect_fail "stamps inside a quoted value -> InvalidCmdline" 3 InvalidCmdline "$CTL" stage "$KERNEL" --cmdline='foo="a upgraded.stamps=0" quiet'
expect_fail "quoted stamps word -> InvalidCmdline" 3 InvalidCmdline "$CTL" stage "$KERNEL" --cmdline='quiet "upgraded.stamps=1"'
expect_fail "newline -> InvalidCmdline" 3 InvalidCmdline "$CTL" stage "$KERNEL" --cmdline=$'root=/dev/vda1\nquiet'
expect_fail "DEL -> InvalidCmdline" 3 InvalidCmdline "$CTL" stage "$KERNEL" --cmdline=$'quiet\x7f'
expect_fail "unbalanced quote -> InvalidCmdline" 3 InvalidCmdline "$CTL" stage "$KERNEL" --cmdline='foo="bar'
# 2047 bytes minus what the loader appends (a boot CPU word, crash mark, stamps field): 1905.
expect_fail "1906 bytes -> InvalidCmdline naming the maximum" 3 "maximum is 1905" "$CTL" stage "$KERNEL" --cmdline="$(head -c 1906 /dev/zero | tr '\0' a)"
# busctl prints only the message; the error name is checked in the monitor log below.
expect_fail "unknown option is refused" 1 "Unknown option 'bogus'" "${BUSCTL[@]}" call "${OBJ[@]}" Stage 'sssa{sv}' "$KERNEL" "" "" 1 bogus b true
expect_fail "commit with nothing staged -> NoSuchUpdate" 5 NoSuchUpdate "$CTL" commit
expect_fail "cancel of a bad id -> InvalidId" 3 InvalidId "$CTL" cancel ../../etc
expect_fail "report of an unknown id -> NoSuchUpdate" 5 NoSuchUpdate "$CTL" report 0123456789abcdef
expect_fail "report with none finished -> NoSuchReport" 5 NoSuchReport "$CTL" report
check "nothing changed after bad input (Describe equal)" test "$(describe)" = "$D0"
check "no kexec request was recorded" test ! -e "$ROOT/run/upgraded/kexec-record.json"

# ---- authorization: read-only open, mutating refused without root/polkit ----
check "non-root may Describe" bash -c "$(declare -f as_user); TEST_USER=$TEST_USER; as_user '$CTL' describe --json >/dev/null"
check "non-root may ListUpdates" as_user "$CTL" list
check "non-root may read properties" test "$(as_user "${BUSCTL[@]}" get-property "${OBJ[@]}" State)" = 's "idle"'
# Each method asks for its own action (units/org.upgraded.Upgrade1.policy).
denied() { echo "action org.upgraded.Upgrade1.$1\b.*PermissionDenied"; }
expect_fail "non-root stage -> PermissionDenied naming its action" 4 "$(denied stage)" as_user "$CTL" --no-ask-password stage "$KERNEL"
expect_fail "non-root commit -> PermissionDenied naming its action" 4 "$(denied commit)" as_user "$CTL" commit
expect_fail "non-root cancel -> PermissionDenied naming its action" 4 "$(denied cancel)" as_user "$CTL" cancel
expect_fail "non-root Reload -> PermissionDenied naming its action" 1 "action org.upgraded.Upgrade1.reload\b" as_user "${BUSCTL[@]}" call "${OBJ[@]}" Reload
check "nothing changed after refusals" test "$(describe)" = "$D0"

# ---- stage, cancel ----
ID=$("$CTL" stage "$KERNEL" --initrd="/boot/initrd.img-$NEW" --reuse-cmdline)
check "stage prints an id" grep -qE '^[0-9a-f]{16}$' <<<"$ID"
check "State is staged" test "$("$CTL" show -p State --value)" = staged
check "StagedKernel is the kernel" test "$("$CTL" show -p StagedKernel --value)" = "$KERNEL"
check "update object has the kernel version" test "$("$CTL" show "$ID" -p KernelVersion --value)" = "$NEW"
SHA=$(sha256sum "$ROOT$KERNEL" | cut -d' ' -f1)
check "recorded digest equals sha256sum" test "$("$CTL" show "$ID" -p KernelSha256 --value)" = "$SHA"
check "backend got the validated kernel fd" bash -c "python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))[\"requests\"][-1]; sys.exit(not (r[\"kernel_sha256\"]==sys.argv[2] and r[\"cmdline\"]==\"root=/dev/vda1 ro console=ttyS0\" and r[\"initrd\"]))' '$ROOT/run/upgraded/kexec-record.json' '$SHA'"
check "record persisted" test -s "$ROOT/var/lib/upgraded/updates/$ID.json"
expect_fail "second stage -> AlreadyStaged" 6 AlreadyStaged "$CTL" stage "$KERNEL"
check "list shows the update" bash -c "'$CTL' list | grep -q '^$ID  staged'"
check "status is a table" bash -c "'$CTL' status | grep -q 'State: staged'"
check "cancel" "$CTL" cancel "$ID"
check "cancelled update state" test "$("$CTL" show "$ID" -p State --value)" = cancelled
check "State back to idle" test "$("$CTL" show -p State --value)" = idle
expect_fail "cancel twice -> BadState" 6 BadState "$CTL" cancel "$ID"

# ---- the policy decides: dry run, a refused commit, restore-vm errors ----
ID=$("$CTL" stage "$KERNEL" --initrd="/boot/initrd.img-$NEW" --cmdline="root=/dev/vda1 ro")
"$CTL" commit --dry-run >"$T/dry.out" 2>&1
check "commit --dry-run exits 0 when the commit may proceed" test $? -eq 0
sed 's/^/# /' "$T/dry.out"
check "dry run names the handoff, the VM and its strategy" bash -c "grep -q '^Handoff: verified' '$T/dry.out' && grep -qE '^  test +checkpoint +running' '$T/dry.out' && grep -q 'Preconditions: met' '$T/dry.out'"
"$CTL" commit --dry-run --json >"$T/dry.json"
check "dry run --json is PlanCommit's JSON" bash -c "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(not (d[\"allowed\"] and d[\"decisions\"][\"vms\"][0][\"name\"]==\"test\"))' '$T/dry.json'"
check "dry run changed nothing" test "$("$CTL" show "$ID" -p State --value)" = staged
check "list shows the kernel, no commit time before a commit" bash -c "'$CTL' list | grep -qE '^$ID +staged +- +$NEW\$'"
expect_fail "commit --json alone is refused" 2 "needs --dry-run" "$CTL" commit --json
check "... and commits nothing" test "$("$CTL" show "$ID" -p State --value)" = staged
check "no verb prints the status" bash -c "'$CTL' | grep -q 'Update $ID'"
stop_daemon
printf '[Commit]\nMaxVMs=0\n' >"$ROOT/etc/upgraded/upgraded.conf"
check "daemon with MaxVMs=0" start_daemon refused --backend=record --kexec-trigger=record
D1=$(describe)
pol=$(json_get "['policy']['commit']['max_vms']" <<<"$D1")/$(json_get "['policy']['reports']['keep']" <<<"$D1")
check "Describe shows the settings in effect (MaxVMs=0; Keep= its default)" test "$pol" = 0/100
expect_fail "dry run says the commit would be refused" 9 "too-many-vms" bash -c "'$CTL' commit --dry-run 1>&2"
expect_fail "commit refused by the policy -> PolicyRefused with the reason" 9 "MaxVMs=0" "$CTL" commit
check "the refused commit changed nothing" test "$(describe)" = "$D1"
check "status names the staged update" bash -c "'$CTL' status | grep -q 'Update $ID'"
expect_fail "restore-vm of an unknown VM -> NoSuchVM" 5 NoSuchVM "$CTL" restore-vm nope
expect_fail "restore-vm of a running VM -> VMRunning" 6 VMRunning "$CTL" restore-vm test
expect_fail "non-root restore-vm -> PermissionDenied naming its action" 4 "$(denied restore-vm)" as_user "$CTL" restore-vm test
check "non-root may plan the commit (dry run)" bash -c "$(declare -f as_user); TEST_USER=$TEST_USER; as_user '$CTL' commit --dry-run --json >/dev/null; [ \$? -eq 9 ]"
check "cancel the refused update" "$CTL" cancel "$ID"
stop_daemon
rm "$ROOT/etc/upgraded/upgraded.conf"

# ---- [Paths] AllowedRoots= replaces the default directories (an empty one clears them) ----
mkdir -p "$ROOT/srv/kernels" && cp -p "$ROOT$KERNEL" "$ROOT/srv/kernels/vmlinuz-$NEW"
printf '[Paths]\nAllowedRoots=\nAllowedRoots=/srv/kernels\n' >"$ROOT/etc/upgraded/upgraded.conf"
check "daemon with AllowedRoots=/srv/kernels" start_daemon roots --backend=record --kexec-trigger=record
check "Describe lists the configured root only" test "$(describe | json_get "['allowed_roots']")" = "['/srv/kernels']"
expect_fail "/boot is no longer allowed -> NotAllowedPath" 3 NotAllowedPath "$CTL" stage "$KERNEL"
ID=$("$CTL" stage "/srv/kernels/vmlinuz-$NEW")
check "a kernel below the configured root stages" grep -qE '^[0-9a-f]{16}$' <<<"$ID"
check "and cancels" "$CTL" cancel "$ID"
stop_daemon
# Shutdown=fast asked for, on a machine without journald: the journal cannot be flushed, so
# the handoff stays orderly and the report says why.
printf '[Handoff]\nShutdown=fast\n' >"$ROOT/etc/upgraded/upgraded.conf"
check "daemon back without the limit, Shutdown=fast" start_daemon record2 --backend=record --kexec-trigger=record

# ---- the staged kernel changed between stage and commit: refused, nothing changes ----
# What commit checks: the file at the staged path (no symlink anywhere) is the inode that
# was hashed, with its size, mtime and ctime. A rewrite that sets the mtime back still
# moves the ctime. (What boots is what stage read: the commit path reads no file.)
cp -p "$ROOT$KERNEL" "$T/kernel.orig"
staged_change() { # staged_change NAME COMMAND...: stage, change the file, commit refused
        local what=$1 id rec before
        shift
        id=$("$CTL" stage "$KERNEL" --initrd="/boot/initrd.img-$NEW")
        rec=$ROOT/var/lib/upgraded/updates/$id.json
        before=$(describe; sha256sum "$rec" "$ROOT/run/upgraded/kexec-record.json")
        "$@"
        expect_fail "$what between stage and commit -> PolicyRefused staged-changed" 9 \
                "replaced, truncated or rewritten since stage time" "$CTL" commit
        expect_fail "$what: the dry run says so too" 9 "staged-changed" bash -c "'$CTL' commit --dry-run 1>&2"
        check "$what: nothing changed (Describe, record, no kexec request)" \
                test "$(describe; sha256sum "$rec" "$ROOT/run/upgraded/kexec-record.json")" = "$before"
        check "$what: still staged, cancel works" "$CTL" cancel "$id"
        rm -f "$ROOT$KERNEL" "$ROOT$KERNEL.real" && cp -p "$T/kernel.orig" "$ROOT$KERNEL"
}
renamed_over() { cp -p "$ROOT$KERNEL" "$ROOT$KERNEL.new" && mv "$ROOT$KERNEL.new" "$ROOT$KERNEL"; }
truncated() { truncate -s -1 "$ROOT$KERNEL"; }
rewritten() { # same size, one byte changed, the mtime set back
        local mtime
        mtime=$(stat -c %y "$ROOT$KERNEL")
        sleep 0.01
        printf 'X' | dd of="$ROOT$KERNEL" bs=1 seek=$(($(stat -c %s "$ROOT$KERNEL") - 1)) conv=notrunc status=none
        touch -d "$mtime" "$ROOT$KERNEL"
}
symlinked() { mv "$ROOT$KERNEL" "$ROOT$KERNEL.real" && ln -s "vmlinuz-$NEW.real" "$ROOT$KERNEL"; }
staged_change "renamed over by an identical copy" renamed_over
staged_change "truncated" truncated
staged_change "rewritten in place, mtime set back" rewritten
check "the rewrite kept size and mtime (only the ctime tells)" test "$(stat -c %s-%Y "$ROOT$KERNEL")" = "$(stat -c %s-%Y "$T/kernel.orig")"
staged_change "replaced by a symlink to the same bytes" symlinked

# ---- commit through the point of no return (recorded), then "the new kernel" ----
ID=$("$CTL" stage "$KERNEL" --initrd="/boot/initrd.img-$NEW" --cmdline="root=/dev/vda1 ro")
"$CTL" commit --wait >"$T/commit.out" 2>&1
check "commit --wait exits 0" test $? -eq 0
sed 's/^/# /' "$T/commit.out"
check "commit --wait printed each phase in order" test "$(grep '%' "$T/commit.out" | awk '{print $2}' | head -3 | tr '\n' ' ')" = "pre-handoff handoff handoff-requested "
check "commit --wait printed the VM's progress" bash -c "grep -q '^      VM test (checkpoint): paused' '$T/commit.out' && grep -q '^      VM test (checkpoint): saved' '$T/commit.out'"
check "kexec.target requested for this update" grep -q "\"id\":\"$ID\"" "$ROOT/run/upgraded/kexec-requested.json"
check "... in order: no journald here to flush, so no fast shutdown" grep -q '"unit":"kexec.target","mode":"replace-irreversibly","shutdown":"orderly"' "$ROOT/run/upgraded/kexec-requested.json"
check "handoff record carries the clock samples and the old kernel's probe" python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["measure"]; sys.exit(not (m["reboot_sample"]["tsc"] > 0 and m["request_sample"]["monotonic_ns"] >= m["reboot_sample"]["monotonic_ns"] and m["old_probe"]["available"]))' "$ROOT/var/lib/upgraded/updates/$ID.json"
check "State is committing" test "$("$CTL" show -p State --value)" = committing
"$CTL" status >"$T/status.out"
sed 's/^/# /' "$T/status.out"
check "status shows the handoff reasons and the VM saved" bash -c "grep -q '^  Handoff: verified' '$T/status.out' && grep -q 'fast-not-allowed' '$T/status.out' && grep -qE '^    test +checkpoint +saved' '$T/status.out'"
check "VMs property on the update object" test "$("${BUSCTL[@]}" get-property org.upgraded.Upgrade1 "/org/upgraded/Upgrade1/update/$ID" org.upgraded.Upgrade1.Update VMs)" = 'a(sss) 1 "test" "checkpoint" "saved"'
check "PropertiesChanged carried the VMs" grep -q '"saved"' "$T/monitor.txt"
expect_fail "commit again -> BadState" 6 BadState "$CTL" commit "$ID"
expect_fail "cancel while committing -> BadState" 6 BadState "$CTL" cancel

stop_daemon
check "restart in the same boot keeps waiting for the kexec" start_daemon same-boot --backend=record --kexec-trigger=record
check "still committing" test "$("$CTL" show "$ID" -p Phase --value)" = handoff-requested
stop_daemon

NEWBOOT=$(tr -d '-' </proc/sys/kernel/random/uuid)
check "start on the new kernel" start_daemon new-kernel --backend=record --kexec-trigger=record --running-kernel="$NEW" --boot-id="$NEWBOOT"
wait_update_ended "$ID"
check "update completed" test "$("$CTL" show "$ID" -p State --value)" = done
check "State idle again" test "$("$CTL" show -p State --value)" = idle
check "LastReport names the update" test "$("$CTL" show -p LastReport --value)" = "$ID"
"$CTL" report --json >"$T/report.json"
check "report --json validates against the schema" python3 "$VALIDATE" "$SCHEMA" "$T/report.json"
check "report --json is GetReport's document on one line" bash -c "[ \$(wc -l <'$T/report.json') -eq 1 ] && diff <('${BUSCTL[0]}' --address='$ADDR' --json=short call ${OBJ[*]} GetReport s '' | python3 -c 'import json,sys; print(json.dumps(json.loads(json.load(sys.stdin)[\"data\"][0]), sort_keys=True))') <(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1])), sort_keys=True))' '$T/report.json')"
check "report names old and new kernel" bash -c "python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(not (r[\"old_kernel\"][\"version\"]==sys.argv[2] and r[\"new_kernel\"][\"version\"]==sys.argv[3] and r[\"result\"]==\"success\" and r[\"backend\"][\"name\"]==\"record\"))' '$T/report.json' '$(uname -r)' '$NEW'"
check "report file on disk" python3 "$VALIDATE" "$SCHEMA" "$ROOT/var/lib/upgraded/reports/$ID.json"
check "report: schema 2 with the host's identity, the daemon's version and ISO 8601 UTC times" python3 -c 'import json,re,sys; r=json.load(open(sys.argv[1])); iso=re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$"); sys.exit(not (r["schema"]==2 and "machine_id" in r["host"] and r["daemon"]["version"] and iso.match(r["started_at"]) and iso.match(r["finished_at"]) and r["started_at"]<=r["finished_at"] and "vm_downtime" not in r and all(set(x)=={"code","severity","text"} for x in r["handoff"]["reasons"])))' "$T/report.json"
check "report carries the VM and the policy's decisions" bash -c "python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); v=r[\"vms\"][0]; d=r[\"decisions\"]; sys.exit(not (v[\"name\"]==\"test\" and v[\"strategy\"]==\"checkpoint\" and d[\"verdict\"][\"allowed\"] and d[\"vms\"][0][\"reasons\"]))' '$T/report.json'"
check "human report" bash -c "'$CTL' report '$ID' | grep -q 'Result: success'"
check "list shows when the commit was requested" bash -c "'$CTL' list | grep -qE '^$ID +done +[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8} +$NEW\$'"
# The measurement: the probe really ran on this kernel in both daemon runs (root, BTF).
"$CTL" report "$ID" >"$T/report.txt"
sed 's/^/# /' "$T/report.txt"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("# timebase:", json.dumps(r["timebase"])[:400]); print("# totals:", r["totals"]); print("# missing:", r["missing"])' "$T/report.json"
PROBE_BOTH='import json,sys; p=json.load(open(sys.argv[1]))["probe"]; sys.exit(not (p["old"]["available"] and p["new"]["available"] and "reboot-request" in p["old"]["marks_ns"] and "daemon-start" in p["new"]["marks_ns"]))'
if [ -n "${UPGRADED_TEST_VALGRIND:-}" ] && ! python3 -c "$PROBE_BOTH" "$T/report.json" &&
        grep -q "The vCPU probe did not open within" "$T"/daemon*.log; then
        # Under valgrind, libbpf's load of the probe (BTF parsing, the verifier's log) can
        # outlast the daemon's bound on a loaded machine. This run is about memory: the
        # bounded open's degradation must then be named in the report, and the run
        # without valgrind (daemon-bus) holds the probe's attachment itself.
        check "report: the probe's bounded open gave up under valgrind, named in missing" \
                python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(not any(m["figure"].startswith("probe_") and m["reason"]=="the probe was not opened" for m in r["missing"]))' "$T/report.json"
else
        check "report: probe attached on the old kernel (commit) and the new one (daemon start)" python3 -c "$PROBE_BOTH" "$T/report.json"
fi
check "report: the reboot-request sample travelled in the handoff record" python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(r["timebase"] is None or "realtime_gap_ns" not in r["timebase"])' "$T/report.json"
check "report: boot analysis of this machine's kmsg" python3 -c 'import json,sys; b=json.load(open(sys.argv[1]))["boot"]; sys.exit(not (b and b["messages"] > 0))' "$T/report.json"
check "report: no VM tracked by the probe, so each VM's one downtime is libvirt's wall clock, and so are the totals" python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); t=r["totals"]; d=[v["downtime"] for v in r["vms"]]; sys.exit(not (d and all(x["source"]=="libvirt-wallclock" and x["ns"] > 0 and x["uncertainty_ns"] is None for x in d) and t["max_vm_downtime_ns"]==max(x["ns"] for x in d) and t["vm_downtime_sources"]==["libvirt-wallclock"] and not any(m["figure"]=="vm_downtime_totals" for m in r["missing"])))' "$T/report.json"
check "report: fast shutdown asked for, orderly taken, the journal named as the reason" python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["handoff"]["shutdown"]; sys.exit(not (s["requested"]=="fast" and s["mode"]=="orderly" and "journal could not be flushed" in s["reasons"][0]["text"]))' "$T/report.json"
check "report: no critical path without systemd, each side's reason in missing" python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); m={x["figure"]: x["reason"] for x in r["missing"]}; c=r["critical_path"]; sys.exit(not (c["new_kernel"] is None and c["old_kernel"] is None and m["critical_path_new"] and m["critical_path_old"]))' "$T/report.json"
for line in "Result: success" "Mode: " "Shutdown: orderly, asked: fast" "Timebase: " "Host blackout: " "Max VM downtime: " "Missing: " "Timeline"; do
        check "human report has '$line'" grep -q "$line" "$T/report.txt"
done
stop_daemon
rm "$ROOT/etc/upgraded/upgraded.conf"

# ---- systemd refuses the kexec (no systemd on this bus): rollback, failed ----
check "daemon with the systemd trigger" start_daemon systemd --backend=record
ID2=$("$CTL" stage "$KERNEL")
"$CTL" commit --wait >"$T/commit2.out" 2>&1
check "commit --wait exits 1 when systemd is unreachable" test $? -eq 1
check "update failed with the reason" bash -c "'$CTL' show '$ID2' -p Error --value | grep -q 'kexec reboot'"
check "image unloaded after the rollback" bash -c "python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))[\"loaded\"])' '$ROOT/run/upgraded/kexec-record.json'"
check "failure report validates" python3 "$VALIDATE" "$SCHEMA" "$ROOT/var/lib/upgraded/reports/$ID2.json"
check "list shows the nine updates staged so far" test "$("$CTL" list --json | json_get '.__len__()')" = 9
stop_daemon

# ---- a real polkit: a rule grants the test user the action, nobody else ----
if [ -x /usr/lib/polkit-1/polkitd ] && id polkitd >/dev/null 2>&1; then
        check "daemon for the polkit checks" start_daemon polkit --backend=record --kexec-trigger=record
        if [ ! -e "$POLKIT_ACTION_FILE" ]; then
                cp "$(dirname "$POLICY")/org.upgraded.Upgrade1.policy" "$POLKIT_ACTION_FILE"
                created_action=1
        elif ! cmp -s "$(dirname "$POLICY")/org.upgraded.Upgrade1.policy" "$POLKIT_ACTION_FILE"; then
                # an installed file of another version: ours for the test, theirs after
                cp "$POLKIT_ACTION_FILE" "$T/polkit-action.orig"
                cp "$(dirname "$POLICY")/org.upgraded.Upgrade1.policy" "$POLKIT_ACTION_FILE"
        fi
        cat >"$POLKIT_RULES_FILE" <<RULES
polkit.addRule(function(action, subject) {
        if ((action.id == "org.upgraded.Upgrade1.stage" || action.id == "org.upgraded.Upgrade1.cancel") &&
            subject.user == "$TEST_USER")
                return polkit.Result.YES;
});
RULES
        /usr/lib/polkit-1/polkitd --no-debug >"$T/polkit.log" 2>&1 &
        POLKIT_PID=$!
        for _ in $(seq 50); do
                "${BUSCTL[@]}" status org.freedesktop.PolicyKit1 >/dev/null 2>&1 && break
                sleep 0.1
        done
        D1=$(describe)
        expect_fail "polkit: nobody without a password -> PermissionDenied" 4 "needs interactive authentication" \
                setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$CTL" --no-ask-password stage "$KERNEL"
        expect_fail "polkit: nobody, no agent -> PermissionDenied" 4 "Not authorized" \
                setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$CTL" stage "$KERNEL"
        ID4=$("$CTL" stage "$KERNEL")
        D1=$(describe)
        as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@"; }
        expect_fail "polkit: nobody commit -> PermissionDenied naming its action" 4 "Not authorized for action org.upgraded.Upgrade1.commit\\b" as_nobody "$CTL" commit "$ID4"
        expect_fail "polkit: nobody cancel -> PermissionDenied naming its action" 4 "Not authorized for action org.upgraded.Upgrade1.cancel\\b" as_nobody "$CTL" cancel "$ID4"
        expect_fail "polkit: nobody restore-vm -> PermissionDenied naming its action" 4 "Not authorized for action org.upgraded.Upgrade1.restore-vm\\b" as_nobody "$CTL" restore-vm test
        check "polkit: nobody reads Describe, ListUpdates, the update's properties and the last report" \
                bash -c "$(declare -f as_nobody); as_nobody '$CTL' describe --json >/dev/null && as_nobody '$CTL' list >/dev/null && [ \"\$(as_nobody '$CTL' show '$ID4' -p State --value)\" = staged ] && as_nobody '$CTL' report --json >/dev/null"
        check "polkit: refusals changed nothing" test "$(describe)" = "$D1"
        "$CTL" cancel "$ID4"
        ID3=$(as_user "$CTL" --no-ask-password stage "$KERNEL")
        check "polkit: authorized user stages" grep -qE '^[0-9a-f]{16}$' <<<"$ID3"
        expect_fail "polkit: stage and cancel granted, commit is not (a separate action)" 4 \
                "Action org.upgraded.Upgrade1.commit needs interactive authentication" as_user "$CTL" --no-ask-password commit "$ID3"
        check "polkit: authorized user cancels" as_user "$CTL" --no-ask-password cancel "$ID3"
        kill "$POLKIT_PID"; wait "$POLKIT_PID" 2>/dev/null; POLKIT_PID=
        stop_daemon
else
        echo "# polkitd not installed: real polkit checks skipped"
fi

# ---- signals seen on the bus ----
kill "$MON_PID" 2>/dev/null; wait "$MON_PID" 2>/dev/null; MON_PID=
check "unknown option answered with InvalidOption" grep -q "ErrorName=org.upgraded.Upgrade1.Error.InvalidOption" "$T/monitor.txt"
check "Finished signal emitted" grep -q "Member=Finished" "$T/monitor.txt"
check "ReportReady signal emitted on the Manager" bash -c "grep -A3 'Member=ReportReady' '$T/monitor.txt' | grep -q 'Path=/org/upgraded/Upgrade1$' || grep 'Member=ReportReady' '$T/monitor.txt' | grep -q 'Path=/org/upgraded/Upgrade1 '"
check "PropertiesChanged on an update object" bash -c "grep 'Member=PropertiesChanged' '$T/monitor.txt' | grep -q 'Path=/org/upgraded/Upgrade1/update/'"

# Every report this run produced, not only the ones looked at above.
reports=("$ROOT"/var/lib/upgraded/reports/*.json)
check "all ${#reports[@]} reports on disk validate against the schema" \
        bash -c '[ -e "$3" ] && exec python3 "$1" "$2" "${@:3}"' _ "$VALIDATE" "$SCHEMA" "${reports[@]}"

echo "# daemon starts that exited cleanly${WRAPPER:+ under valgrind}: $daemon_stops"
echo "1..$n"
[ "$failures" -eq 0 ] || { echo "$failures of $n checks failed"; exit 1; }
