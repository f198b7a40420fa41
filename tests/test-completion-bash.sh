#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The bash completion of upgradectl, sourced into this shell and run as bash runs it
# (COMP_WORDS/COMP_CWORD in, COMPREPLY out):
#   - the verbs and each verb's options are those the built upgradectl's --help lists
#     (read at test time), both ways;
#   - update ids and VM names come from `upgradectl list --json` / `status --json`:
#     a stub upgradectl first in PATH, for this test only, answers them;
#   - a daemon that is down or hangs gives no candidates and prints nothing.
#
# Usage: test-completion-bash.sh COMPLETION_SCRIPT BUILT_UPGRADECTL
set -u

completion=$1
real=$2
# shellcheck source=tests/completion-test-lib.sh
source "$(dirname "$0")/completion-test-lib.sh"
tmp=$(mktemp -d /tmp/upgraded-completion.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# The stub answers as the daemon would; its behaviour comes from $STUB_MODE.
mkdir "$tmp/bin"
cat >"$tmp/bin/upgradectl" <<'STUB'
#!/bin/bash
for a in "$@"; do
	case $a in --no-ask-password) ;; *) args+=("$a") ;; esac
done
case $STUB_MODE:${args[*]} in
up:"list --json")
	echo '[{"id":"0123456789abcdef","state":"done","object":"/org/upgraded/Upgrade1/update/0123456789abcdef"},{"id":"0123fedcba987654","state":"staged","object":"/org/upgraded/Upgrade1/update/0123fedcba987654"},{"id":"ffffeeeeddddcccc","state":"failed","object":"/org/upgraded/Upgrade1/update/ffffeeeeddddcccc"}]'
	;;
up:"status --json")
	echo '{"state":"idle","backend":{"name":"kexec_load"},"updates":[{"id":"0123456789abcdef","decisions":{"vms":[{"name":"db-1","strategy":"checkpoint","uuid":"u1"}]},"vms":[{"name":"web-1","uuid":"11111111-2222-3333-4444-555555555555","strategy":"checkpoint"},{"name":"web-2","uuid":"21111111-2222-3333-4444-555555555555","strategy":"shutdown"}],"stamps":[{"name":"commit-requested","realtime_usec":1}]},{"id":"ffffeeeeddddcccc","vms":[{"name":"build-7","uuid":"31111111-2222-3333-4444-555555555555","strategy":"keep-ram"}]}]}'
	;;
hang:*)
	sleep 30
	;;
*)
	echo "upgradectl: The name org.upgraded.Upgrade1 was not provided by any .service files" >&2
	exit 8
	;;
esac
STUB
chmod +x "$tmp/bin/upgradectl"
export PATH="$tmp/bin:$PATH" STUB_MODE=up

# shellcheck source=/dev/null
source "$completion" || {
	echo "FAIL: cannot source $completion"
	exit 1
}

# complete WORD... : runs the completion for the words (the last one is the word being
# completed) and prints COMPREPLY sorted, one per line, '=' stripped.
complete_words() {
	COMP_WORDS=("$@")
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
	COMP_LINE="$*"
	COMP_POINT=${#COMP_LINE}
	COMPREPLY=()
	_upgradectl upgradectl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
	printf '%s\n' "${COMPREPLY[@]}" | sed 's/=$//' | sed '/^$/d' | sort -u
}

expect() {
	local what=$1 want=$2 got=$3
	if [ "$want" != "$got" ]; then
		fail "$what: expected [$(echo $want)], got [$(echo $got)]"
	fi
}

# 1. Verbs: every verb of --help is offered; every verb offered is one upgradectl answers.
offered=$(complete_words upgradectl '')
check_verbs "$offered"
expect "verb prefix 'st'" "$(printf 'stage\nstatus')" "$(complete_words upgradectl st)"
expect "verb prefix 're'" "$(printf 'report\nrestore-vm')" "$(complete_words upgradectl re)"

# 2. Options, before a verb and for each verb, equal to the help's OPTIONS.
expect "options before a verb" "$("$real" --help | help_options)" \
	"$(complete_words upgradectl -)"
for v in $offered; do
	expect "options of $v" "$("$real" "$v" --help | help_options)" \
		"$(complete_words upgradectl "$v" -)"
done
expect "--json= completes its modes" "$(printf 'pretty\nshort')" \
	"$(complete_words upgradectl status --json = '')"
expect "--json=p" "pretty" "$(complete_words upgradectl list --json = p)"
expect "option prefix --wa" "$(printf -- '--wait\n--wait-timeout')" \
	"$(complete_words upgradectl commit --wa)"
touch "$tmp/initrd.img-6.1" "$tmp/initrd.img-6.2"
expect "--initrd= completes files" "$(printf '%s\n' "$tmp/initrd.img-6.1" "$tmp/initrd.img-6.2")" \
	"$(complete_words upgradectl stage --initrd = "$tmp/initrd")"

# 3. Update ids and VM names from the daemon.
expect "ids for commit" "$(printf '0123456789abcdef\n0123fedcba987654\nffffeeeeddddcccc')" \
	"$(complete_words upgradectl commit '')"
expect "id prefix for report" "$(printf '0123456789abcdef\n0123fedcba987654')" \
	"$(complete_words upgradectl report 0123)"
expect "ids after options" "ffffeeeeddddcccc" "$(complete_words upgradectl -H host show -p State f)"
expect "one id only" "" "$(complete_words upgradectl watch 0123456789abcdef '')"
expect "VM names for restore-vm" "$(printf 'build-7\nweb-1\nweb-2')" \
	"$(complete_words upgradectl restore-vm '')"
expect "no ids for status" "" "$(complete_words upgradectl status '')"

# 4. A daemon that is down, or hangs: nothing offered, nothing printed.
STUB_MODE=down
err=$(complete_words upgradectl commit '' 2>&1 >/dev/null)
expect "ids, daemon down" "" "$(complete_words upgradectl commit '' 2>/dev/null)"
expect "stderr, daemon down" "" "$err"
expect "VM names, daemon down" "" "$(complete_words upgradectl restore-vm '' 2>&1)"
STUB_MODE=hang
start=$SECONDS
expect "ids, daemon hangs" "" "$(complete_words upgradectl cancel '' 2>&1)"
# The completion gives up after 2 s; 20 s only tells "gave up" from "waited for the stub".
((SECONDS - start < 20)) || fail "completion waited $((SECONDS - start)) s for a hung daemon"

finish "bash completion"
