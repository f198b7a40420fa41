#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Builds the freestanding purgatory blob: compiles and links the sources twice,
# at base 0 and at base 1 MiB, and requires the two flat binaries to be
# identical: a blob that needs relocation (an absolute address anywhere) fails
# the build instead of failing between two kernels.
#
# Usage: build-purgatory.sh OUTPUT SRCDIR OBJCOPY CC [CC-ARGS...] -- SOURCES...
# Also writes OUTPUT.sym: "purgatory_entry_c <hex offset>".
set -eu

out=$1
srcdir=$2
objcopy=$3
shift 3
cc=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
        cc="$cc $1"
        shift
done
shift

tmp=$(mktemp -d "${TMPDIR:-/tmp}/purgatory.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Generic code may not touch SSE/AVX state (-mgeneral-regs-only); the SHA-NI and
# AVX2 functions in sha256.c turn them on with target attributes.
cflags="-std=gnu11 -O2 -ffreestanding -fno-builtin -nostdlib -fno-stack-protector
        -mno-red-zone -mgeneral-regs-only -fno-zero-initialized-in-bss -fpie
        -fvisibility=hidden -fno-common -fno-asynchronous-unwind-tables
        -fno-unwind-tables -fcf-protection=none -fno-sanitize=all
        -Wall -Wextra -Wno-unused-parameter -Werror -I$srcdir"
ldflags="-static -nostdlib -Wl,--no-dynamic-linker -Wl,-T,$srcdir/purgatory.lds
         -Wl,--build-id=none -Wl,-z,noexecstack -Wl,--no-warn-rwx-segments"

for base in 0x0 0x100000; do
        # shellcheck disable=SC2086
        $cc $cflags $ldflags -Wl,--defsym=PURGATORY_BASE=$base -o "$tmp/p-$base.elf" "$@"
        "$objcopy" -O binary "$tmp/p-$base.elf" "$tmp/p-$base.bin"
done
if ! cmp -s "$tmp/p-0x0.bin" "$tmp/p-0x100000.bin"; then
        echo "purgatory: the blob differs when linked at another base: it needs relocations" >&2
        cmp "$tmp/p-0x0.bin" "$tmp/p-0x100000.bin" >&2 || true
        exit 1
fi
# The loader writes the parameters at PURGATORY_PARAMS_OFFSET (0x40).
addr=$(nm "$tmp/p-0x0.elf" | awk '$3 == "purgatory_params" { print $1 }')
if [ "$addr" != "0000000000000040" ]; then
        echo "purgatory: purgatory_params is at 0x$addr, not 0x40" >&2
        exit 1
fi
cp "$tmp/p-0x0.bin" "$out"
# Offsets the tests use to call purgatory's C entry in a user-space harness.
nm "$tmp/p-0x0.elf" | awk '$3 == "purgatory_entry_c" { print "purgatory_entry_c", $1 }' >"$out.sym"
