#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# catalog/upgraded.catalog through the real journalctl: it builds a catalog database from the
# file under a scratch root (--root), lists it, and each MESSAGE_ID defined in common/log-ids.h
# is there with its subject, and nothing else is.
#
# usage: check-catalog.sh CATALOG LOG_IDS_H
set -uo pipefail
CATALOG=$1 IDS=$2
command -v journalctl >/dev/null || { echo "SKIP: journalctl missing"; exit 77; }
T=$(mktemp -d /tmp/upgraded-catalog.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/usr/lib/systemd/catalog"
cp "$CATALOG" "$T/usr/lib/systemd/catalog/upgraded.catalog"
journalctl --root="$T" --update-catalog || { echo "not ok - journalctl refused the catalog"; exit 1; }
journalctl --root="$T" --list-catalog >"$T/list" || exit 1
sed 's/^/# /' "$T/list"
want=$(grep -oE '^#define LOG_MID_[A-Z_]+ +"[0-9a-f]{32}"' "$IDS" | grep -oE '[0-9a-f]{32}' | sort)
have=$(awk '$2 == "upgraded:" {print $1}' "$T/list" | sort)
failures=0
[ "$(wc -l <<<"$want")" -ge 9 ] || { echo "not ok - only $(wc -l <<<"$want") ids in $IDS"; failures=1; }
if [ "$want" = "$have" ]; then
        echo "ok 1 - every MESSAGE_ID has its catalog entry, and only those ($(wc -l <<<"$want"))"
else
        echo "not ok 1 - ids and catalog differ:"
        diff <(echo "$want") <(echo "$have") | sed 's/^/# /'
        failures=1
fi
# Each entry explains the event with the update's id filled in.
bad=$(for id in $want; do journalctl --root="$T" --dump-catalog "$id" | grep -q '@UPGRADED_ID@' || echo "$id"; done)
if [ -z "$bad" ]; then echo "ok 2 - every entry names the update (@UPGRADED_ID@)"; else echo "not ok 2 - entries without @UPGRADED_ID@: $bad"; failures=1; fi
echo "1..2"
exit $failures
