#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Turns the purgatory blob into a C array the loader links in.
Usage: blob-to-c.py INPUT.bin INPUT.bin.sym OUTPUT.c"""
import sys

data = open(sys.argv[1], "rb").read()
syms = dict(line.split() for line in open(sys.argv[2]) if line.strip())
entry_c = int(syms["purgatory_entry_c"], 16)
with open(sys.argv[3], "w") as f:
    f.write("/* Generated from purgatory.bin by blob-to-c.py: do not edit. */\n")
    f.write("#include <stddef.h>\n\n")
    f.write("extern const unsigned char purgatory_blob[];\n")
    f.write("extern const size_t purgatory_blob_size;\n")
    f.write("extern const size_t purgatory_blob_entry_c_offset;\n\n")
    f.write("const unsigned char purgatory_blob[] __attribute__((aligned(4096))) = {\n")
    for i in range(0, len(data), 16):
        f.write("\t" + ", ".join(f"0x{b:02x}" for b in data[i:i + 16]) + ",\n")
    f.write("};\n")
    f.write(f"const size_t purgatory_blob_size = {len(data)};\n")
    f.write("/* purgatory_entry_c(): the C entry, called by user-space tests. */\n")
    f.write(f"const size_t purgatory_blob_entry_c_offset = {entry_c:#x};\n")
