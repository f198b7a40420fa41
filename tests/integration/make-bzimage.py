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
kernel_size = len(img) - 512 * (setup_sects + 1)
# Offsets: Documentation/arch/x86/boot.rst; names as in loader/bootparam.h.
img[0x1F1] = setup_sects                          # setup_sects
struct.pack_into("<I", img, 0x1F4, kernel_size // 16)  # syssize
struct.pack_into("<H", img, 0x1FE, 0xAA55)        # boot_flag
img[0x200:0x202] = b"\xeb\x6a"                    # jump: header ends at 0x26c
if "--no-magic" not in flags:
    img[0x202:0x206] = b"HdrS"
struct.pack_into("<H", img, 0x206, 0x020F)        # version 2.15
img[0x211] = 0x01                                 # loadflags: LOADED_HIGH
struct.pack_into("<I", img, 0x22C, 0x7FFFFFFF)    # initrd_addr_max
struct.pack_into("<I", img, 0x230, 0x200000)      # kernel_alignment
img[0x234] = 1                                    # relocatable_kernel
img[0x235] = 21                                   # min_alignment
struct.pack_into("<H", img, 0x236, 0x03)          # XLF_KERNEL_64 | CAN_BE_LOADED_ABOVE_4G
struct.pack_into("<I", img, 0x238, 2047)          # cmdline_size
struct.pack_into("<Q", img, 0x258, 0x1000000)     # pref_address
struct.pack_into("<I", img, 0x260, 0x100000)      # init_size
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
