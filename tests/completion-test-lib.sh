# SPDX-License-Identifier: LGPL-2.1-or-later
# Sourced by the completion tests: what the built upgradectl's --help lists, read at
# test time, and the failure count. Needs $real (the built upgradectl).

failures=0
fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}

# The options an OPTIONS section of a help text (stdin) lists: the first word(s) of each
# line, "-H, --host=..." giving -H and --host.
help_options() {
	sed -n '/^OPTIONS\b/,/^$/p' | grep -oE '^    (-[a-zA-Z], )?--?[a-zA-Z][a-z-]*' |
		grep -oE -- '--?[a-zA-Z][a-z-]*' | sort -u
}

# check_verbs OFFERED: every verb of `upgradectl --help` is offered, and every verb
# offered is one upgradectl answers `VERB --help` for.
check_verbs() {
	local offered=$1 help_verbs v

	help_verbs=$("$real" --help | sed -n '/^VERBS\b/,/^$/p' | grep -oE '^    [a-z][a-z-]*' |
		tr -d ' ' | sort -u)
	[ -n "$help_verbs" ] || fail "upgradectl --help lists no verb"
	for v in $help_verbs; do
		grep -qx -- "$v" <<<"$offered" || fail "verb $v (upgradectl --help) is not completed"
	done
	for v in $offered; do
		"$real" "$v" --help 2>/dev/null | grep -q "upgradectl $v -" ||
			fail "completed verb $v is not a verb of upgradectl"
	done
}

finish() {
	if ((failures > 0)); then
		echo "$failures failure(s)"
		exit 1
	fi
	echo "$1 OK"
	exit 0
}
