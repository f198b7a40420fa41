# SPDX-License-Identifier: LGPL-2.1-or-later
# bash completion for upgradectl(1): verbs, each verb's options, update ids and VM
# names. Ids and names are asked from upgraded at completion time (list --json,
# status --json); when it does not answer within two seconds nothing is offered.

__upgradectl_verbs="stage commit cancel watch restore-vm status list report show describe"

# Options before a verb: those of `upgradectl --help`.
__upgradectl_global_opts="--json --json= --no-legend --wait --wait-timeout= --version --no-ask-password --no-pager -H --host= -h --help"
__upgradectl_common_opts="--no-ask-password --no-pager -H --host= -h --help"

# The options each verb takes (`upgradectl VERB --help`), besides the common ones.
__upgradectl_verb_opts() {
	case $1 in
	stage) echo "--initrd= --cmdline= --reuse-cmdline --wait --wait-timeout=" ;;
	commit) echo "--wait --wait-timeout= --dry-run --json --json= --no-legend" ;;
	watch) echo "--wait-timeout= --no-legend" ;;
	status | list) echo "--json --json= --no-legend" ;;
	describe) echo "--json --json=" ;;
	report) echo "--json --json= --html -o --output=" ;;
	show) echo "-p --property= --value" ;;
	esac
}

# Asks the local daemon; silent and empty when it is not reachable.
__upgradectl_ask() {
	timeout 2 upgradectl --no-ask-password "$@" </dev/null 2>/dev/null
}

# Update ids from `upgradectl list --json` ([{"id": ..., "state": ..., "object": ...}]);
# keys are matched in any case, so an older upgradectl's CamelCase keys work too.
__upgradectl_ids() {
	__upgradectl_ask list --json | grep -oi '"id" *: *"[0-9a-f]\{16\}"' | grep -o '[0-9a-f]\{16\}'
}

# VM names from `upgradectl status --json`: the per-VM entries of the update records,
# whose "name" is followed by "uuid". Names with quotes or backslashes are left out.
__upgradectl_vms() {
	__upgradectl_ask status --json | grep -oi '"name" *: *"[^"\\]*" *, *"uuid"' |
		sed 's/^"[nN][aA][mM][eE]" *: *"\([^"]*\)".*/\1/' | sort -u
}

_upgradectl() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev= opt= verb= i w nargs=0
	local words=()

	COMPREPLY=()
	((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
	# COMP_WORDBREAKS splits --opt=value into "--opt" "=" "value".
	if [[ $cur == "=" ]]; then
		opt=$prev
		cur=
	elif [[ $prev == "=" ]] && ((COMP_CWORD > 1)); then
		opt=${COMP_WORDS[COMP_CWORD - 2]}
	elif [[ $prev == -H || $prev == -o || $prev == -p ]]; then
		opt=$prev
	fi

	# The verb is the first word that is neither an option nor an option's value.
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		case $w in
		-H | -o | -p) ((i++)) ;;
		=) ((i++)) ;;
		-*) ;;
		*)
			if [[ -z $verb ]]; then
				verb=$w
			else
				((nargs++))
			fi
			;;
		esac
	done

	case $opt in
	--initrd | --output | -o)
		COMPREPLY=($(compgen -f -- "$cur"))
		return 0
		;;
	--host | -H)
		COMPREPLY=($(compgen -A hostname -- "$cur"))
		return 0
		;;
	--json)
		COMPREPLY=($(compgen -W "short pretty" -- "$cur"))
		return 0
		;;
	--cmdline | --wait-timeout | --property | -p)
		return 0
		;;
	esac

	if [[ $cur == -* ]]; then
		if [[ -z $verb ]]; then
			words=($__upgradectl_global_opts)
		else
			words=($(__upgradectl_verb_opts "$verb") $__upgradectl_common_opts)
		fi
		COMPREPLY=($(compgen -W "${words[*]}" -- "$cur"))
		[[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} == *= ]] && compopt -o nospace 2>/dev/null
		return 0
	fi

	if [[ -z $verb ]]; then
		COMPREPLY=($(compgen -W "$__upgradectl_verbs" -- "$cur"))
		return 0
	fi
	((nargs > 0)) && return 0
	case $verb in
	stage) COMPREPLY=($(compgen -f -- "$cur")) ;;
	commit | cancel | watch | report | show) COMPREPLY=($(compgen -W "$(__upgradectl_ids)" -- "$cur")) ;;
	restore-vm) COMPREPLY=($(compgen -W "$(__upgradectl_vms)" -- "$cur")) ;;
	esac
	return 0
}

complete -F _upgradectl upgradectl
