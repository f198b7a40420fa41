#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Builds a freestanding purgatory blob (x86_64, or arm64 with the cross
# compiler): compiles and links the sources twice, at base 0 and at base
# 1 MiB, and requires the two flat binaries to be identical: a blob that
# needs relocation (an absolute address anywhere) fails the build instead of
# failing between two kernels. Also requires the parameters at 0x40 and, on
# arm64, the exception vectors 2 KiB aligned.
#
# Usage: build-purgatory.sh ARCH OUTPUT SRCDIR OBJCOPY NM CC [CC-ARGS...] -- SOURCES...
#   ARCH x86_64 (purgatory.lds) or arm64 (arm64/purgatory.lds)
# Also writes OUTPUT.sym: "purgatory_entry_c <hex offset>".
set -eu

arch=$1
out=$2
srcdir=$3
objcopy=$4
nm=$5
shift 5
cc=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
        cc="$cc $1"
        shift
done
shift

tmp=$(mktemp -d "${TMPDIR:-/tmp}/purgatory.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

cflags="-std=gnu11 -O2 -ffreestanding -fno-builtin -nostdlib -fno-stack-protector
        -fno-zero-initialized-in-bss -fpie -fvisibility=hidden -fno-common
        -fno-asynchronous-unwind-tables -fno-unwind-tables -fno-sanitize=all
        -Wall -Wextra -Wno-unused-parameter -Werror -I$srcdir"
case "$arch" in
x86_64)
        # Generic code may not touch SSE/AVX state (-mgeneral-regs-only); the
        # SHA-NI and AVX2 functions turn them on with target attributes.
        cflags="$cflags -mno-red-zone -mgeneral-regs-only -fcf-protection=none"
        lds=$srcdir/purgatory.lds
        ;;
arm64)
        # Generic code may not touch the FP/SIMD registers: only sha256-ce.S
        # does, after the entry enabled them. -mstrict-align: parts run with
        # the MMU off, where all memory is Device memory and faults on an
        # unaligned access. -mno-outline-atomics: the atomics the CPUs share
        # the chunks with are inline LDXR/STXR, not calls into libgcc.
        cflags="$cflags -mgeneral-regs-only -mstrict-align -mbranch-protection=none
                -mno-outline-atomics
                -I$srcdir/arm64"
        lds=$srcdir/arm64/purgatory.lds
        ;;
*)
        echo "purgatory: unknown architecture $arch" >&2
        exit 2
        ;;
esac
ldflags="-static -nostdlib -Wl,--no-dynamic-linker -Wl,-T,$lds
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
sym() { "$nm" "$tmp/p-0x0.elf" | awk -v s="$1" '$3 == s { print $1 }'; }
# The loader writes the parameters at PURGATORY_PARAMS_OFFSET (0x40).
if [ "$(sym purgatory_params)" != "0000000000000040" ]; then
        echo "purgatory: purgatory_params is at 0x$(sym purgatory_params), not 0x40" >&2
        exit 1
fi
if [ "$arch" = arm64 ] && [ $((0x$(sym purgatory_vectors) % 2048)) -ne 0 ]; then
        echo "purgatory: the exception vectors at 0x$(sym purgatory_vectors) are not 2 KiB aligned" >&2
        exit 1
fi
cp "$tmp/p-0x0.bin" "$out"
# Offsets the tests use to call purgatory's C entry in a user-space harness.
echo "purgatory_entry_c $(sym purgatory_entry_c)" >"$out.sym"
