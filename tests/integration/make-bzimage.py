#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Writes a minimal file that parses as a 64-bit x86 bzImage (boot protocol
2.15 setup header with a kernel_version string) for tests on machines without
a kernel image. It boots nothing.

usage: make-bzimage.py OUT VERSION [--no-magic|--truncate|--no-version]"""
import struct
import sys

out, version = sys.argv[1], sys.argv[2]
flags = sys.argv[3:]
setup_sects = 4
img = bytearray(512 * (setup_sects + 1) + 64 * 1024)
img[0x1F1] = setup_sects
struct.pack_into("<H", img, 0x1FE, 0xAA55)
if "--no-magic" not in flags:
    img[0x202:0x206] = b"HdrS"
struct.pack_into("<H", img, 0x206, 0x020F)
img[0x236] = 0x01  # XLF_KERNEL_64
if "--no-version" not in flags:
    vstr = (version + " (test@upgraded) #1 SMP\0").encode()
    struct.pack_into("<H", img, 0x20E, 0x400 - 0x200)
    img[0x400:0x400 + len(vstr)] = vstr
for i in range(512 * (setup_sects + 1), len(img)):
    img[i] = (i * 7) & 0xFF
if "--truncate" in flags:
    img = img[:512 * (setup_sects + 1)]
with open(out, "wb") as f:
    f.write(img)
