#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# upgradectl's conventions (issue 18, "CLI conventions") against the real daemon on a private
# system-like bus (record backend and trigger, libvirt's test driver):
#   - every wrong use of every verb (an option it does not take, --json=bogus, a wrong
#     number of arguments, a refused combination) exits 2, and a monitor of the bus sees
#     no call to the daemon;
#   - --json=short is one line, --json=pretty is indented, plain --json is short; every JSON
#     upgradectl prints has snake_case keys at every depth;
#   - --no-legend drops the table headers and footers;
#   - colour: SYSTEMD_COLORS=1 gives escapes (red error line, green/yellow states), a pipe
#     and NO_COLOR none;
#   - the pager runs on a terminal ($PAGER, through script(1)'s pty) and not with --no-pager
#     or into a pipe.
#
# usage: test-cli.sh UPGRADED UPGRADECTL BUS_CONF_IN POLICY_CONF MAKE_BZIMAGE VALIDATE SCHEMA
set -uo pipefail

UPGRADED=$1 CTL=$2 BUS_CONF_IN=$3 POLICY=$4 MAKE_BZIMAGE=$5
NEW=6.1.0-57-cloud-amd64

. "$(dirname "$0")/lib.sh"
test_begin cli "private dbus-daemon, root-owned images" dbus-daemon busctl python3 script
DBUS_PID= DAEMON_PID= MON_PID=
DAEMON_ARGS=(--backend=record --kexec-trigger=record --libvirt-uri=test:///default)

cleanup() {
        for pid in $MON_PID $DAEMON_PID $DBUS_PID; do
                kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
        done
        if [ "$failures" -ne 0 ]; then
                echo "--- daemon log"; cat "$T"/daemon*.log 2>/dev/null
        fi
        rm -rf "$T"
}
trap cleanup EXIT

# ---- a root tree, a private bus, the daemon, a monitor of every call to it ----
mkdir -p "$ROOT/boot" "$ROOT/proc" "$ROOT/var/lib/upgraded/images"
python3 "$MAKE_BZIMAGE" "$ROOT/boot/vmlinuz-$NEW" "$NEW"
chmod 0644 "$ROOT/boot/vmlinuz-$NEW"
KERNEL=/boot/vmlinuz-$NEW
echo "root=/dev/vda1 ro console=ttyS0" >"$ROOT/proc/cmdline"
start_bus "$BUS_CONF_IN" "$POLICY"
BUSCTL=(busctl --address="$DBUS_SYSTEM_BUS_ADDRESS")
OBJ=(org.upgraded.Upgrade1 /org/upgraded/Upgrade1 org.upgraded.Upgrade1.Manager)
"${BUSCTL[@]}" monitor --json=short >"$T/monitor.json" 2>"$T/monitor.err" &
MON_PID=$!
check "daemon starts (record backend)" start_daemon first

# calls_between A B: the method calls to the daemon between the marker calls GetReport(A)
# and GetReport(B) (ids nobody has; the monitor is waited for until it saw B).
mark() { "${BUSCTL[@]}" call "${OBJ[@]}" GetReport s "$1" >/dev/null 2>&1; }
calls_between() {
        for _ in $(seq 50); do grep -q "$2" "$T/monitor.json" && break; sleep 0.1; done
        python3 - "$T/monitor.json" "$1" "$2" <<'PY'
import json, sys
inside, n = False, 0
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("type") != "method_call" or m.get("destination") != "org.upgraded.Upgrade1":
        continue
    data = (m.get("payload") or {}).get("data") or []
    if data == [sys.argv[2]]:
        inside = True
    elif data == [sys.argv[3]]:
        break
    elif inside:
        n += 1
        print("# call:", m.get("member"), data, file=sys.stderr)
print(n)
PY
}

# ---- every wrong use of every verb: exit 2, nothing sent ----
# expect_usage DESCRIPTION MESSAGE ARGS...: upgradectl ARGS exits 2 and says MESSAGE.
expect_usage() {
        local what=$1 msg=$2 rc
        shift 2
        "$CTL" "$@" >"$T/out" 2>"$T/err"
        rc=$?
        if [ "$rc" -eq 2 ] && grep -qF -- "$msg" "$T/err"; then
                ok "$what"
        else
                not_ok "$what (exit $rc, want 2 and '$msg'): $(cat "$T/err")"
        fi
}
VERBS=(stage commit cancel watch restore-vm status list report show describe)
# The options a verb takes are those its --help lists under OPTIONS.
verb_takes() { # verb_takes VERB OPTION
        "$CTL" "$1" --help | sed -n '/^OPTIONS/,/^EXIT STATUS/p' | grep -qE -- "^ +(-., )?$2([=[ ]|$)"
}
verb_args() { # the arguments that make a verb's command line complete
        case $1 in
        stage) echo "$KERNEL" ;;
        restore-vm) echo test ;;
        esac
}
mark aaaaaaaaaaaaaaa0
usage_checks=0
for verb in "${VERBS[@]}"; do
        for opt in --json --wait --value --property=State --initrd=/boot/i --cmdline=quiet \
                --reuse-cmdline --dry-run --wait-timeout=5 --html --output=/dev/null --no-legend; do
                name=${opt%%=*}
                verb_takes "$verb" "$name" && continue
                # shellcheck disable=SC2046
                expect_usage "$verb $opt is a usage error" "'$verb' does not take $name" \
                        "$verb" $(verb_args "$verb") "$opt"
                usage_checks=$((usage_checks + 1))
        done
done
check "the table of wrong options covered each verb ($usage_checks uses)" test "$usage_checks" -ge 60
for verb in commit status list report describe; do
        extra=()
        [ "$verb" = commit ] && extra=(--dry-run)
        expect_usage "$verb --json=bogus is a usage error" "--json= takes short or pretty, not 'bogus'" "$verb" "${extra[@]}" --json=bogus
        expect_usage "$verb --json= (empty) is a usage error" "--json= takes short or pretty" "$verb" "${extra[@]}" --json=
done
expect_usage "--json=bogus before the verb too" "not 'bogus'" --json=bogus list
expect_usage "--json=bogus with no verb" "not 'bogus'" --json=bogus
expect_usage "stage without a kernel" "takes 1 to 1 argument" stage
expect_usage "restore-vm without a name" "takes 1 to 1 argument" restore-vm
for verb in status list describe; do
        expect_usage "$verb with an argument" "takes 0 to 0 argument" "$verb" 0123456789abcdef
done
for verb in commit cancel watch report show; do
        expect_usage "$verb with two ids" "takes 0 to 1 argument" "$verb" 0123456789abcdef 0123456789abcdef
done
expect_usage "commit --json without --dry-run" "needs --dry-run" commit --json=pretty
expect_usage "commit --dry-run --wait" "nothing to --wait for" commit --dry-run --wait
expect_usage "--wait-timeout without --wait" "add --wait" stage "$KERNEL" --wait-timeout=5
expect_usage "report -o without --html" "report --html only" report -o /dev/null
expect_usage "an unknown verb" "Unknown verb" frobnicate --no-pager
mark bbbbbbbbbbbbbbb0
check "the daemon saw no call from the wrong uses" test "$(calls_between aaaaaaaaaaaaaaa0 bbbbbbbbbbbbbbb0)" = 0
# The monitor counts: a right use between markers is seen.
mark ccccccccccccccc0
"$CTL" list --no-pager >/dev/null
mark ddddddddddddddd0
check "... and the count sees a right use (list: ListUpdates)" test "$(calls_between ccccccccccccccc0 ddddddddddddddd0)" -ge 1

# ---- an update of each kind: cancelled, done (with its report), staged ----
ID1=$("$CTL" stage "$KERNEL") && "$CTL" cancel "$ID1"
ID2=$("$CTL" stage "$KERNEL" --cmdline="root=/dev/vda1 ro")
"$CTL" commit --wait >"$T/commit.out" 2>&1
check "commit --wait of the second update" test $? -eq 0
stop_daemon
check "the daemon on \"the new kernel\"" start_daemon new-kernel --running-kernel="$NEW" \
        --boot-id="$(tr -d '-' </proc/sys/kernel/random/uuid)"
check "the committed update ends done" wait_update_ended "$ID2"
ID3=$("$CTL" stage "$KERNEL")
check "three updates: cancelled, done, staged" test "$("$CTL" show "$ID1" -p State --value)/$("$CTL" show "$ID2" -p State --value)/$("$CTL" show "$ID3" -p State --value)" = cancelled/done/staged

# ---- JSON: one line or indented, and snake_case keys at every depth ----
# json_shape FILE: "lines=N indented=B keys=ok|BAD-KEY..." of a JSON document. Every key is
# snake_case, but for the keys of marks_ns: the names of the probe's marks (reboot-request,
# save-complete: docs/report.md), lower case too.
json_shape() {
        python3 - "$1" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
doc = json.loads(text)
bad = []
def walk(v, path):
    if isinstance(v, dict):
        names = path.endswith(".marks_ns")
        for k, x in v.items():
            if not re.fullmatch(r"[a-z0-9]+([-_][a-z0-9]+)*" if names else r"[a-z0-9]+(_[a-z0-9]+)*", k):
                bad.append(path + "." + k)
            walk(x, path + "." + k)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            walk(x, "%s[%d]" % (path, i))
walk(doc, "")
print("lines=%d indented=%s keys=%s" % (text.count("\n"), any(l.startswith(" ") for l in text.splitlines()),
                                         "ok" if not bad else " ".join(bad[:5])))
PY
}
json_cmds=("status --json" "describe" "describe --json" "list --json" "report --json"
        "report $ID2 --json" "commit --dry-run --json" "--json status")
for cmd in "${json_cmds[@]}" "${json_cmds[@]/--json/--json=short}" "${json_cmds[@]/--json/--json=pretty}"; do
        # shellcheck disable=SC2086
        "$CTL" $cmd >"$T/j.json" 2>"$T/j.err"
        shape=$(json_shape "$T/j.json" 2>&1)
        case $cmd in
        *pretty* | describe) want="lines=[1-9][0-9]+ indented=True keys=ok" ;;
        *) want="lines=1 indented=False keys=ok" ;;
        esac
        if [[ $shape =~ ^$want$ ]]; then ok "upgradectl $cmd: $shape"; else not_ok "upgradectl $cmd: $shape (want $want) $(head -c 300 "$T/j.err")"; fi
done
"$CTL" describe --json >"$T/d.json"
check "describe --json names the daemon's properties in snake_case" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(not (d["state"] == "staged" and d["running_kernel"] == sys.argv[2] and d["backend"]["name"] == "record"
              and d["backend"]["test_only"] is True and "crash_kernel_reserved" in d["backend"]
              and isinstance(d["allowed_roots"], list) and len(d["updates"]) == 3 and d["last_report"] == sys.argv[3]))' \
        "$T/d.json" "$NEW" "$ID2"
check "report --json is GetReport's document (same JSON, keys untouched)" bash -c "diff <('${BUSCTL[0]}' --address='$DBUS_SYSTEM_BUS_ADDRESS' --json=short call ${OBJ[*]} GetReport s '' | python3 -c 'import json,sys; print(json.dumps(json.loads(json.load(sys.stdin)[\"data\"][0]), sort_keys=True))') <('$CTL' report --json | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin), sort_keys=True))')"

# ---- --no-legend ----
"$CTL" list >"$T/list.out"
"$CTL" list --no-legend >"$T/list-nl.out"
check "list has a header and a count" bash -c "head -1 '$T/list.out' | grep -q '^ID  *STATE  *COMMITTED  *KERNEL' && tail -1 '$T/list.out' | grep -q '^3 update(s).'"
check "list --no-legend: the three rows only" bash -c "[ \$(wc -l <'$T/list-nl.out') -eq 3 ] && ! grep -qE '^ID |update\\(s\\)' '$T/list-nl.out' && grep -q '^$ID2  done' '$T/list-nl.out'"
check "status --no-legend: no header over the updates" bash -c "'$CTL' status | grep -q '^ID  *STATE  *PHASE' && ! '$CTL' status --no-legend | grep -q '^ID  *STATE' && '$CTL' status --no-legend | grep -q '^$ID1  cancelled'"
check "watch --no-legend: the VM results without their header" bash -c "'$CTL' watch '$ID2' | grep -q '^VM  *STRATEGY  *RESULT' && out=\$('$CTL' watch '$ID2' --no-legend) && ! grep -q '^VM  *STRATEGY' <<<\"\$out\" && grep -qE '^test +checkpoint +resumed' <<<\"\$out\""

# ---- colour: forced on, off in a pipe, NO_COLOR ----
ESC=$'\e['
colour_of() { # colour_of ENV... -- ARGS...: upgradectl's stdout and stderr, together
        local env=()
        while [ "$1" != -- ]; do env+=("$1"); shift; done
        shift
        env "${env[@]}" "$CTL" "$@" 2>&1
}
check "SYSTEMD_COLORS=1: done green and cancelled yellow in list" bash -c "out=\$(SYSTEMD_COLORS=1 '$CTL' list) && grep -qF \$'\\e[0;1;32mdone' <<<\"\$out\" && grep -qF \$'\\e[0;1;33mcancelled' <<<\"\$out\""
check "SYSTEMD_COLORS=1: the report's result in green" bash -c "SYSTEMD_COLORS=1 '$CTL' report '$ID2' | grep -qF \$'Result: \\e[0;1;32msuccess'"
check "SYSTEMD_COLORS=1: preconditions met in green" bash -c "SYSTEMD_COLORS=1 '$CTL' commit --dry-run | grep -qF \$'Preconditions: \\e[0;1;32mmet'"
check "SYSTEMD_COLORS=1: an error line in red on stderr" bash -c "SYSTEMD_COLORS=1 '$CTL' report 0123456789abcdef 2>&1 >/dev/null | grep -qF \$'\\e[0;1;31mGetReport failed'"
for cmd in list status "report $ID2" "commit --dry-run" "report 0123456789abcdef" describe "watch $ID2"; do
        # shellcheck disable=SC2086
        out=$(colour_of TERM=xterm -- $cmd)
        check "piped: no escape from $cmd" test "${out/$ESC/}" = "$out"
        # shellcheck disable=SC2086
        out=$(script -qec "env NO_COLOR=1 TERM=xterm '$CTL' --no-pager $cmd" /dev/null)
        check "NO_COLOR on a terminal: no escape from $cmd" test "${out/$ESC/}" = "$out"
done
check "SYSTEMD_COLORS=0 on a terminal: no escape" bash -c "out=\$(script -qec \"env SYSTEMD_COLORS=0 TERM=xterm '$CTL' --no-pager list\" /dev/null) && [ \"\${out/\$'\\e['/}\" = \"\$out\" ]"
check "on a terminal: colour without being asked" bash -c "script -qec \"env -u NO_COLOR -u SYSTEMD_COLORS TERM=xterm '$CTL' --no-pager list\" /dev/null | grep -qF \$'\\e[0;1;32mdone'"
check "TERM=dumb on a terminal: no escape" bash -c "out=\$(script -qec \"env -u NO_COLOR TERM=dumb '$CTL' --no-pager list\" /dev/null) && [ \"\${out/\$'\\e['/}\" = \"\$out\" ]"

# ---- the pager: on a terminal only, and not with --no-pager ----
pager_env="env -u SYSTEMD_PAGER PAGER='sed s/^/paged:/' TERM=xterm"
check "on a terminal, list goes through \$PAGER" bash -c "script -qec \"$pager_env '$CTL' list\" /dev/null | grep -q '^paged:$ID2  '"
check "SYSTEMD_PAGER wins over PAGER" bash -c "script -qec \"env SYSTEMD_PAGER='sed s/^/sd:/' PAGER='sed s/^/paged:/' '$CTL' report $ID2\" /dev/null | grep -q '^sd: *Result:'"
check "the pager gets LESS=FRSXMK" bash -c "script -qec \"env -u SYSTEMD_LESS SYSTEMD_PAGER='echo LESS=\\\$LESS; cat >/dev/null' '$CTL' status\" /dev/null | grep -q 'LESS=FRSXMK'"
check "--no-pager on a terminal: no pager" bash -c "out=\$(script -qec \"$pager_env '$CTL' --no-pager list\" /dev/null) && grep -q '^$ID2  ' <<<\"\$out\" && ! grep -q paged: <<<\"\$out\""
check "into a pipe: no pager" bash -c "out=\$(env PAGER='sed s/^/paged:/' '$CTL' list) && ! grep -q paged: <<<\"\$out\""
check "PAGER=cat on a terminal: no pager, same rows" bash -c "script -qec \"env -u SYSTEMD_PAGER PAGER=cat '$CTL' list\" /dev/null | grep -q '^$ID2  '"
check "a verb without long output is not paged" bash -c "! script -qec \"$pager_env '$CTL' cancel $ID3\" /dev/null | grep -q paged:"
for verb in stage commit cancel watch restore-vm status list report show describe; do
        check "$verb takes --no-pager" bash -c "'$CTL' $verb --no-pager --help >/dev/null && '$CTL' $verb --help | grep -q -- '--no-pager'"
done

stop_daemon
echo "1..$n"
[ "$failures" -eq 0 ]
