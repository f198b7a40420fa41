#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Writes the BTF of a Linux kernel Image (arm64's uncompressed boot image, as
Debian's linux-image-*-arm64 ships it in /boot/vmlinuz-*) as a raw BTF file
that `bpftool btf dump file OUT format c` turns into vmlinux.h.

The cross build of the vCPU probe needs the target architecture's kernel types
(struct pt_regs and friends differ), and the build machine's
/sys/kernel/btf/vmlinux has only its own. A kernel built with
CONFIG_DEBUG_INFO_BTF carries its BTF as one blob in .BTF; the Image is the
kernel's memory image without section headers, so the blob is found by its
header: magic 0xeb9f, version 1, a 24-byte header, then the type and string
sections it describes. Exactly one such blob that spans the whole header and
begins with an empty string must exist, else the Image is refused.

usage: image-btf.py OUT DIR... (the newest vmlinuz-*-arm64 found in the DIRs)
"""
import glob
import os
import struct
import sys

HEADER = struct.Struct("<HBBIIIII")  # magic, version, flags, hdr_len, type off/len, str off/len
MAGIC, VERSION, HDR_LEN = 0xEB9F, 1, 24
MAX_IMAGE = 256 << 20  # a cloud kernel's Image is ~30 MiB


def find_image(dirs):
    found = []
    for d in dirs:
        found += glob.glob(os.path.join(d, "vmlinuz-*-arm64"))
        found += glob.glob(os.path.join(d, "*", "boot", "vmlinuz-*-arm64"))
    found = [f for f in found if os.path.isfile(f)]
    if not found:
        sys.exit("image-btf: no vmlinuz-*-arm64 in %s: fetch one with "
                 "`tests/bench-fetch-kernel '' arm64`" % " ".join(dirs))
    return max(found, key=lambda f: (os.path.basename(f), f))


def blobs(data):
    """(offset, length) of every plausible BTF blob in DATA."""
    pat = struct.pack("<HBBI", MAGIC, VERSION, 0, HDR_LEN)
    i = data.find(pat)
    while i >= 0:
        if i + HEADER.size <= len(data):
            _, _, _, hdr, toff, tlen, soff, slen = HEADER.unpack_from(data, i)
            end = i + hdr + max(toff + tlen, soff + slen)
            if toff + tlen <= soff and slen > 0 and end <= len(data) and \
                    data[i + hdr + soff] == 0:
                yield i, end - i
        i = data.find(pat, i + 1)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    image = find_image(sys.argv[2:])
    if os.path.getsize(image) > MAX_IMAGE:
        sys.exit("image-btf: %s is larger than %d MiB" % (image, MAX_IMAGE >> 20))
    with open(image, "rb") as f:
        data = f.read()
    if data[56:60] != b"ARMd":
        sys.exit("image-btf: %s is not an uncompressed arm64 Image" % image)
    found = list(blobs(data))
    if len(found) != 1:
        sys.exit("image-btf: %s holds %d BTF blobs, expected one (CONFIG_DEBUG_INFO_BTF)" %
                 (image, len(found)))
    off, length = found[0]
    tmp = sys.argv[1] + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data[off:off + length])
    os.replace(tmp, sys.argv[1])


if __name__ == "__main__":
    main()
