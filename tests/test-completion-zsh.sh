#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The zsh completion of upgradectl: it parses (zsh -n), and, run in zsh with the
# completion system's _arguments and _describe replaced by functions that print what
# they are given, it offers the verbs and each verb's options the built upgradectl's
# --help lists (both ways), and the update ids and VM names a stub upgradectl first in
# PATH answers for `list --json` and `status --json`. Skipped (77) without zsh.
#
# Usage: test-completion-zsh.sh COMPLETION_FILE BUILT_UPGRADECTL
set -u

completion=$1
real=$2
command -v zsh >/dev/null || {
	echo "zsh is not installed: skipped"
	exit 77
}
# shellcheck source=tests/completion-test-lib.sh
source "$(dirname "$0")/completion-test-lib.sh"
tmp=$(mktemp -d /tmp/upgraded-completion-zsh.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

zsh -n "$completion" || fail "zsh -n $completion"

mkdir "$tmp/bin"
cat >"$tmp/bin/upgradectl" <<'STUB'
#!/bin/sh
case "$*" in
*"list --json")
	echo '[{"id":"0123456789abcdef","state":"done","object":"/o/1"},{"id":"ffffeeeeddddcccc","state":"failed","object":"/o/2"}]' ;;
*"status --json")
	echo '{"updates":[{"vms":[{"name":"web-1","uuid":"u-1","strategy":"checkpoint"}],"stamps":[{"name":"booted","realtime_usec":1}]}]}' ;;
*) exit 8 ;;
esac
STUB
chmod +x "$tmp/bin/upgradectl"

# run_zsh STATE VERB CALL: sources the completion with stubs; prints the verbs
# (_describe), the option names of the specs (_arguments), or the candidates CALL gives.
run_zsh() {
	PATH="$tmp/bin:$PATH" zsh -f -c '
		state_want=$1 verb=$2 call=$3 completion=$4
		_describe() { local a=${@[-1]}; print -rl -- ${(P)a}; }
		_arguments() {
			if [[ $state_want == verb ]]; then state=verb; return 1; fi
			if [[ $state_want == args && ${#words} -eq 0 ]]; then words=($verb); state=args; return 1; fi
			[[ $state_want == args ]] && print -rl -- "$@"
			return 1
		}
		_hosts() { :; }; _files() { :; }
		source $completion
		[[ -n $call ]] && $call
	' zsh "$@" "$completion"
}

# Option names from _arguments specs: '(-H --host)-H+[...]', '*--property=[...]',
# '--json=-[...]' (optional value in the same word), '--no-legend[..]'.
spec_options() {
	grep -E '^(\([^)]*\))?\*?-' | sed -E 's/^\([^)]*\)//; s/^\*//; s/\[.*//; s/(=-|[+=])$//' | sort -u
}

offered=$(run_zsh verb '' '' | cut -d: -f1 | sort -u)
check_verbs "$offered"
for v in $offered; do
	want=$("$real" "$v" --help | help_options)
	got=$(run_zsh args "$v" '' | spec_options)
	[ "$want" = "$got" ] || fail "options of $v: expected [$(echo $want)], got [$(echo $got)]"
done

got=$(run_zsh none '' _upgradectl_ids | sort)
[ "$got" = "$(printf '0123456789abcdef\nffffeeeeddddcccc')" ] || fail "ids: got [$(echo $got)]"
got=$(run_zsh none '' _upgradectl_vms)
[ "$got" = "web-1" ] || fail "VM names: got [$(echo $got)]"

finish "zsh completion"
