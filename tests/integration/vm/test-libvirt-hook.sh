#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# upgraded-libvirt-hook as libvirtd runs it, against domain XMLs a VM's owner wrote: text in
# <title>, <description>, <metadata> and a qemu:arg of its own that name paths outside the hook's
# own directories. The hook must not touch any of them (mode, owner, the file itself), whatever
# the XML says, and a start that is none of keep-ram's business must go on (exit 0).
# Usage: test-libvirt-hook.sh HOOK (root: skipped otherwise)
set -eu

hook=$1
if [ "$(id -u)" != 0 ]; then
        echo "test-libvirt-hook: needs root (the hook's root-owned directories): skipping"
        exit 77
fi
tmp=$(mktemp -d /tmp/test-libvirt-hook.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
uuid=0b3d8f2e-5c1a-4e6b-9a7d-2f4c6e8a0b1c
mkdir -p "$tmp/root" "$tmp/victim/parent/dir"
echo data >"$tmp/victim/parent/dir/sock"
chmod 0750 "$tmp/victim" "$tmp/victim/parent"
chmod 0711 "$tmp/victim/parent/dir"
before=$(stat -c '%n %u:%g %a' "$tmp/victim" "$tmp/victim/parent" "$tmp/victim/parent/dir" \
        "$tmp/victim/parent/dir/sock")
target=$tmp/victim/parent/dir/sock
arg="socket,id=upgraded-keep-ram,path=$target,server=on,wait=on"

fail=0
run() {
        name=$1
        xml=$2
        if ! printf '%s' "$xml" | "$hook" --root="$tmp/root" vm start begin - \
                >"$tmp/out" 2>&1; then
                echo "FAIL $name: the hook refused a start that is not keep-ram's:"
                cat "$tmp/out"
                fail=1
        fi
        after=$(stat -c '%n %u:%g %a' "$tmp/victim" "$tmp/victim/parent" \
                "$tmp/victim/parent/dir" "$tmp/victim/parent/dir/sock" 2>&1 || true)
        if [ "$after" != "$before" ]; then
                echo "FAIL $name: the hook changed what the XML named:"
                echo "before: $before"
                echo "after:  $after"
                fail=1
        else
                echo "ok   $name"
        fi
        if [ -e "$tmp/root/run/upgraded/keep-ram/$uuid/qmp" ] ||
                ls "$tmp/root/var/lib/upgraded/keep-ram/" 2>/dev/null | grep -q qmp.log; then
                echo "FAIL $name: a monitor helper was started"
                fail=1
        fi
}

head="<domain type='qemu' id='4' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>"
run description "$head<name>vm</name><uuid>$uuid</uuid>
<title>$arg</title><description>$arg</description></domain>"
run metadata "$head<name>vm</name><metadata><x:m xmlns:x='urn:x'><qemu:commandline>
<qemu:arg value='$arg'/></qemu:commandline></x:m></metadata><uuid>$uuid</uuid></domain>"
run own-qemu-arg "$head<name>vm</name><uuid>$uuid</uuid><qemu:commandline>
<qemu:arg value='-chardev'/><qemu:arg value='$arg'/></qemu:commandline></domain>"
run other-namespace "$head<name>vm</name><uuid>$uuid</uuid><q:commandline xmlns:q='urn:q'>
<q:arg value='$arg'/></q:commandline></domain>"
run not-xml "socket,id=upgraded-keep-ram,path=$target, <uuid>$uuid</uuid>"
exit $fail
