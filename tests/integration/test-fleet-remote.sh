#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# `upgradectl -H [USER@]HOST[:PORT]` (docs/fleet.md) against a real sshd that this test starts
# on loopback: its own host key, a client key in its own authorized_keys, a high port. The
# CLI's transport is sd_bus_open_system_remote(), which runs `ssh -xT -p PORT HOST
# systemd-stdio-bridge`; the client side gets the test's ssh_config through an `ssh` first in
# PATH (an operator's ~/.ssh/config plays that part), and the key's forced command on the
# server runs the real systemd-stdio-bridge on the test's private bus (--bus-path: the bridge
# ignores DBUS_SYSTEM_BUS_ADDRESS) after checking that the client asked for exactly that.
# sshd, the bus and the daemon are stopped by PID.
#
# usage: test-fleet-remote.sh UPGRADED UPGRADECTL BUS_CONF_IN POLICY_CONF MAKE_BZIMAGE
set -uo pipefail

UPGRADED=$1 CTL=$2 BUS_CONF_IN=$3 POLICY=$4 MAKE_BZIMAGE=$5

[ -x /usr/sbin/sshd ] || { echo "SKIP: /usr/sbin/sshd missing (tools/install-deps)"; exit 77; }
. "$(dirname "$0")/lib.sh"
test_begin fleet-remote "private dbus-daemon, sshd, root-owned images" dbus-daemon busctl python3 ssh ssh-keygen systemd-stdio-bridge
DBUS_PID= DAEMON_PID= SSHD_PID=
. "$(dirname "$0")/fleet-lib.sh"

trap 'fleet_cleanup "$SSHD_PID $DAEMON_PID $DBUS_PID" "$T/sshd.log" "$T/ssh-argv"' EXIT

fleet_root
start_bus "$BUS_CONF_IN" "$POLICY"
LOCAL_BUS=$DBUS_SYSTEM_BUS_ADDRESS
check "the daemon starts on the private bus" fleet_start_daemon start

# ---- sshd on loopback ----
PORT=$(free_port)
ssh-keygen -q -t ed25519 -N '' -C upgraded-test-host -f "$T/host_key"
ssh-keygen -q -t ed25519 -N '' -C upgraded-test-client -f "$T/client_key"
# The key's forced command: only the D-Bus bridge, to the test's bus.
cat >"$T/bridge" <<EOF
#!/bin/sh
printf '%s\n' "\$SSH_ORIGINAL_COMMAND" >>"$T/remote-commands"
[ "\$SSH_ORIGINAL_COMMAND" = systemd-stdio-bridge ] || { echo "only systemd-stdio-bridge" >&2; exit 1; }
exec systemd-stdio-bridge --bus-path="$LOCAL_BUS"
EOF
chmod 755 "$T/bridge"
echo "command=\"$T/bridge\",restrict $(cat "$T/client_key.pub")" >"$T/authorized_keys"
cat >"$T/sshd_config" <<EOF
ListenAddress 127.0.0.1
Port $PORT
HostKey $T/host_key
PidFile $T/sshd.pid
AuthorizedKeysFile $T/authorized_keys
AuthenticationMethods publickey
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin prohibit-password
AllowUsers root
StrictModes no
Subsystem sftp /bin/false
EOF
mkdir -p /run/sshd # privilege separation directory (Debian's unit creates it)
/usr/sbin/sshd -D -e -f "$T/sshd_config" >"$T/sshd.log" 2>&1 &
SSHD_PID=$!
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
check "sshd listens on 127.0.0.1:$PORT" bash -c "(exec 3<>/dev/tcp/127.0.0.1/$PORT)"

# ---- the client: the test's keys and known_hosts, nothing from ~/.ssh ----
echo "[127.0.0.1]:$PORT $(cut -d' ' -f1,2 "$T/host_key.pub")" >"$T/known_hosts"
cat >"$T/ssh_config" <<EOF
Host *
        IdentityFile $T/client_key
        IdentitiesOnly yes
        UserKnownHostsFile $T/known_hosts
        GlobalKnownHostsFile /dev/null
        StrictHostKeyChecking yes
        BatchMode yes
        ConnectTimeout 10
EOF
mkdir "$T/bin"
cat >"$T/bin/ssh" <<EOF
#!/bin/sh
printf '%s\n' "\$*" >>"$T/ssh-argv"
exec /usr/bin/ssh -F "$T/ssh_config" "\$@"
EOF
chmod 755 "$T/bin/ssh"
# remote ARGS...: upgradectl -H through ssh; the local bus address is not in its environment.
remote() { env -u DBUS_SYSTEM_BUS_ADDRESS PATH="$T/bin:$PATH" "$CTL" -H "root@127.0.0.1:$PORT" "$@"; }
local_ctl() { "$CTL" "$@"; }

remote_state_is() { [ "$(remote show -p State --value)" = "$1" ]; }
remote_report_says() { remote report "$ID" | grep -q "$1"; }
check "remote show: the daemon is idle" remote_state_is idle
check "the client ran 'ssh -xT -p PORT ... root@127.0.0.1 systemd-stdio-bridge'" \
        grep -qE -- "^-xT -p $PORT (-- )?root@127.0.0.1 systemd-stdio-bridge$" "$T/ssh-argv"
sed -n '1s/^/# ssh /p' "$T/ssh-argv"
check "sshd ran the bridge for exactly 'systemd-stdio-bridge'" grep -qx systemd-stdio-bridge "$T/remote-commands"
remote describe --json >"$T/remote-describe.json"
local_ctl describe --json >"$T/local-describe.json"
check "remote describe --json is the local one" cmp -s "$T/remote-describe.json" "$T/local-describe.json"

ID=$(remote stage "$KERNEL" --cmdline="root=/dev/vda1 ro")
check "remote stage returns an id" test -n "$ID"
check "the host's daemon has it staged" test "$(local_ctl show "$ID" -p State --value)" = staged
remote commit --wait >"$T/commit.out" 2>&1
check "remote commit --wait follows the progress signals to the kexec request" \
        bash -c "grep -q handoff-requested '$T/commit.out' && grep -q '\"id\":\"$ID\"' '$ROOT/run/upgraded/kexec-requested.json'"
sed 's/^/# remote commit: /' "$T/commit.out"
stop_pid "$DAEMON_PID"
DAEMON_PID=
check "'the new kernel' finishes the update" fleet_start_daemon new-kernel --running-kernel="$NEW" \
        --boot-id="$(tr -d '-' </proc/sys/kernel/random/uuid)"
remote report --json >"$T/remote-report.json"
local_ctl report --json >"$T/local-report.json"
check "remote report --json is the host's report" \
        bash -c "[ -s '$T/remote-report.json' ] && cmp -s '$T/remote-report.json' '$T/local-report.json'"
check "remote report (text) says success" remote_report_says "Result: success"
check "one SSH session per command" test "$(wc -l <"$T/remote-commands")" -eq "$(wc -l <"$T/ssh-argv")"

# ---- failures say what went wrong ----
expect() { # expect DESCRIPTION EXIT_CODE TEXT COMMAND...
        local what=$1 code=$2 text=$3 rc
        shift 3
        "$@" >"$T/out" 2>"$T/err"
        rc=$?
        if [ "$rc" -eq "$code" ] && grep -q -- "$text" "$T/err"; then ok "$what"; else not_ok "$what (exit $rc): $(cat "$T/err")"; fi
}
expect "-H with an option-like host is refused (exit 2)" 2 "Invalid host" "$CTL" -H "-oProxyCommand=sh" status
expect "-H with a path is refused (exit 2)" 2 "Invalid host" "$CTL" -H "root@host/machine" status
DEAD=$(free_port)
expect "-H to a port nobody listens on: exit 8, says so" 8 "Cannot reach the system bus of 'root@127.0.0.1:$DEAD'" \
        env PATH="$T/bin:$PATH" "$CTL" -H "root@127.0.0.1:$DEAD" status
ssh-keygen -q -t ed25519 -N '' -f "$T/other_key"
echo "[127.0.0.1]:$PORT $(cut -d' ' -f1,2 "$T/other_key.pub")" >"$T/known_hosts"
expect "-H to a host whose key changed: refused by ssh, exit 8" 8 "Cannot reach" \
        env PATH="$T/bin:$PATH" "$CTL" -H "root@127.0.0.1:$PORT" status
check "... and no bridge ran for it" test "$(grep -c . "$T/remote-commands")" -eq "$(($(grep -c . "$T/ssh-argv") - 2))"

stop_pid "$SSHD_PID"
SSHD_PID=
check "sshd stopped" bash -c "! (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null"

echo "1..$n"
[ "$failures" -eq 0 ]
