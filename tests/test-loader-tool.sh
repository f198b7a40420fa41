#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# loader-tool end to end on a crafted root: release, check, a dry-run load
# (segments and the stamps placeholder printed) and a named refusal.
# Usage: test-loader-tool.sh LOADER_TOOL SEED_IMAGE
set -eu

tool=$1
image=$2
root=$(mktemp -d /tmp/test-loader-tool.XXXXXX)
trap 'rm -rf "$root"' EXIT

fail() {
        echo "FAIL: $*" >&2
        exit 1
}

i=0
for r in "0x0 0x9fbff System RAM" "0x100000 0xbfffffff System RAM" "0xeec00000 0xfebfffff Reserved"; do
        set -- $r
        mkdir -p "$root/sys/firmware/memmap/$i"
        echo "$1" >"$root/sys/firmware/memmap/$i/start"
        echo "$2" >"$root/sys/firmware/memmap/$i/end"
        shift 2
        echo "$*" >"$root/sys/firmware/memmap/$i/type"
        i=$((i + 1))
done

"$tool" --help | grep -q "kexec_load" || fail "--help"
[ "$("$tool" release "$image")" = "6.1.0-seed-amd64" ] || fail "release"

"$tool" --root "$root" check >/dev/null || fail "check on a plain root"
mkdir -p "$root/sys/kernel/security"
echo "none [integrity] confidentiality" >"$root/sys/kernel/security/lockdown"
set +e
out=$("$tool" --root "$root" check)
rc=$?
set -e
[ $rc -eq 2 ] || fail "check under lockdown exited $rc"
echo "$out" | grep -q lockdown || fail "lockdown reason: $out"

out=$("$tool" --root "$root" load --dry-run --mode fast --cmdline "console=ttyS0" "$image")
echo "$out"
echo "$out" | grep -q "kernel 6.1.0-seed-amd64" || fail "dry-run release"
echo "$out" | grep -q "^  kernel    0x000001000000-" || fail "kernel not at pref_address"
echo "$out" | grep -q "mode fast" || fail "mode"
echo "$out" | grep -q "cmdline   console=ttyS0 upgraded.handoff=1 upgraded.stamps=0000000000000000," ||
        fail "cmdline"

set +e
err=$("$tool" --root "$root" load --dry-run --panic "$image" 2>&1)
rc=$?
set -e
[ $rc -ne 0 ] || fail "panic image without a crash reservation was accepted"
echo "$err" | grep -q "no crashkernel= reservation" || fail "panic refusal: $err"

# arm64: a tiny Image (the booting.rst header: text_offset 0, image_size 1 MiB, flags 0xa,
# "ARM\x64" at 56) with a banner; its release, and on an x86_64 build the named refusal
# to build an image whose purgatory this build does not carry.
a64="$root/Image"
{
        printf 'MZ\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\020\0\0\0\0\0\n\0\0\0\0\0\0\0'
        printf '\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0ARM\144\0\0\0\0'
        printf 'Linux version 6.1.0-seed-arm64 (seed) #1\n'
} >"$a64"
[ "$(wc -c <"$a64")" -eq 105 ] || fail "arm64 seed size $(wc -c <"$a64")"
[ "$("$tool" --arch arm64 release "$a64")" = "6.1.0-seed-arm64" ] || fail "arm64 release"
set +e
err=$("$tool" --arch sparc release "$a64" 2>&1)
rc=$?
set -e
[ $rc -ne 0 ] && echo "$err" | grep -q "Unknown architecture" || fail "--arch sparc: $err"
if "$tool" --help | grep -q "this build's, x86_64"; then
        set +e
        err=$("$tool" --root "$root" --arch arm64 load --dry-run "$a64" 2>&1)
        rc=$?
        set -e
        [ $rc -ne 0 ] || fail "an arm64 image built without arm64's purgatory"
        echo "$err" | grep -q "no purgatory for that architecture" || fail "arm64 refusal: $err"
fi
echo "ok"
