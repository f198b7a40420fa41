#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Writes the seed corpus of fuzz-bzimage into tests/fuzz/bzimage/: small crafted
headers (a minimal valid image and near misses), never real kernels.
Usage: tests/fuzz/fuzz-bzimage-seeds.py [OUTDIR]"""
import os
import struct
import sys

SETUP_SECTS = 1
SETUP_SIZE = (SETUP_SECTS + 1) * 512
KERNEL_SIZE = 512
VERSION = b"6.1.0-seed-amd64 (seed@example.org) #1 SMP\0"


def valid():
    img = bytearray(SETUP_SIZE + KERNEL_SIZE)
    img[0x1F1] = SETUP_SECTS
    struct.pack_into("<I", img, 0x1F4, KERNEL_SIZE // 16)  # syssize
    struct.pack_into("<H", img, 0x1FE, 0xAA55)  # boot_flag
    img[0x200:0x202] = b"\xeb\x6a"  # jump: header ends at 0x26c
    img[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", img, 0x206, 0x020F)  # version
    struct.pack_into("<H", img, 0x20E, 0x100)  # kernel_version
    img[0x211] = 0x01  # loadflags: LOADED_HIGH
    struct.pack_into("<I", img, 0x22C, 0x7FFFFFFF)  # initrd_addr_max
    struct.pack_into("<I", img, 0x230, 0x200000)  # kernel_alignment
    img[0x234] = 1  # relocatable_kernel
    img[0x235] = 21  # min_alignment
    struct.pack_into("<H", img, 0x236, 0x3)  # xloadflags: KERNEL_64 | ABOVE_4G
    struct.pack_into("<I", img, 0x238, 2047)  # cmdline_size
    struct.pack_into("<Q", img, 0x258, 0x1000000)  # pref_address
    struct.pack_into("<I", img, 0x260, 0x100000)  # init_size
    img[0x300:0x300 + len(VERSION)] = VERSION
    img[SETUP_SIZE:] = b"\x90" * KERNEL_SIZE
    return img


def mutated(off, fmt, value):
    img = valid()
    struct.pack_into(fmt, img, off, value)
    return img


seeds = {
    "valid": valid(),
    "valid-setup-sects-0": (lambda i: (i.__setitem__(0x1F1, 0), i + bytes(3 * 512)))(valid())[1],
    "bad-boot-flag": mutated(0x1FE, "<H", 0x55AA),
    "no-hdrs": mutated(0x202, "<I", 0),
    "protocol-2.11": mutated(0x206, "<H", 0x020B),
    "short-header": mutated(0x201, "<B", 0x40),
    "syssize-big": mutated(0x1F4, "<I", 0xFFFFFFFF),
    "zimage": mutated(0x211, "<B", 0),
    "no-64bit": mutated(0x236, "<H", 0x2),
    "not-relocatable": mutated(0x234, "<B", 0),
    "bad-alignment": mutated(0x230, "<I", 0x300000),
    "min-alignment-255": mutated(0x235, "<B", 255),
    "pref-unaligned": mutated(0x258, "<Q", 0x1001000),
    "init-size-0": mutated(0x260, "<I", 0),
    "version-0xffff": mutated(0x20E, "<H", 0xFFFF),
    "truncated-header": valid()[:0x240],
    "setup-only": valid()[:SETUP_SIZE],
}

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "bzimage")
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(bytes(data))
print(f"wrote {len(seeds)} seeds to {out}")
