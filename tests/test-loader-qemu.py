#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Runs the real purgatory blob in QEMU (TCG, never KVM) between a tiny boot stub
and a fake kernel, and checks the handoff paths end to end:
  verified, intact       -> the kernel is entered with rsi = boot_params, stamps 'v'
  verified, corrupted    -> the mismatch line on the serial port, a reset, no kernel
  fast, corrupted        -> the kernel is entered, stamps 'f,-'
  verified, no AVX2      -> generic SHA-256 ('g')
  panic flag, fast mode  -> refused and reset
The TCG CPU has AVX2 but no SHA-NI, so 'verified' exercises purgatory's SSE/XSAVE
enabling and the AVX2 path.

With LOADER_TOOL and a cached Debian 6.1.0-57 vmlinuz, it also boots the real
kernel: loader-tool builds the segments for a 256 MiB memory map (as on the
host, but dumped to files), QEMU places them with -device loader, the stub
enters purgatory, and the kernel must start with our e820 map and the stamps in
its command line (it then stops at mounting root: there is no initrd). With a
corrupted digest the kernel must never start. Exit 77 (skip) without
qemu-system-x86_64.

Usage: test-loader-qemu.py PURGATORY_BIN STUB_S STUB_LDS [LOADER_TOOL VMLINUZ...]"""
import hashlib
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

PARAMS_OFFSET = 0x40
MAGIC = 0x3147525055504755
ABI_VERSION = 1
MAX_DIGESTS = 16
PARAMS_SIZE = 88 + 48 * MAX_DIGESTS
MODE_FAST, MODE_VERIFIED = 0, 1
FLAG_PANIC = 1
KERNEL_ENTRY = 0x180000  # fake kernel, see test-loader-qemu.lds
PAYLOAD_ADDR = 0x400000
CMDLINE_ADDR = 0x500000
BOOT_PARAMS = 0x12345000  # what rsi must hold at the kernel entry
KEY = b"upgraded.stamps="
TEMPLATE = b"0000000000000000,0000000000000000,0000000000000000,-,-"
PREFIX = b"console=ttyS0 "


def build(workdir, blob, stub_s, stub_lds, mode, flags, corrupt, request=0):
    payload = bytearray((i * 31 + 7) & 0xFF for i in range(65536))
    cmd = PREFIX + KEY + TEMPLATE
    cmdline = bytearray(cmd + bytes(4096 - len(cmd)))
    digests = [(PAYLOAD_ADDR, bytes(payload)), (CMDLINE_ADDR, bytes(cmdline))]

    p = struct.pack("<QII", MAGIC, ABI_VERSION, PARAMS_SIZE)
    p += struct.pack("<QQ", KERNEL_ENTRY + 0, BOOT_PARAMS)
    p += struct.pack("<II", mode, flags)
    p += struct.pack("<QIHH", CMDLINE_ADDR + len(PREFIX) + len(KEY), len(TEMPLATE), 0x3F8,
                     len(digests))
    p += bytes(24)  # stamps, written by purgatory
    p += struct.pack("<II", 0, request)  # sha256_impl (written), sha256_impl_request
    for addr, data in digests:
        p += struct.pack("<QQ", addr, len(data)) + hashlib.sha256(data).digest()
    p += bytes(PARAMS_SIZE - len(p))
    blob = bytearray(blob)
    blob[PARAMS_OFFSET:PARAMS_OFFSET + PARAMS_SIZE] = p
    if corrupt:
        payload[-1] ^= 1  # after the digest was recorded

    for name, data in (("purgatory.bin", blob), ("payload.bin", payload),
                       ("cmdline.bin", cmdline)):
        with open(os.path.join(workdir, name), "wb") as f:
            f.write(data)
    run = lambda *a: subprocess.run(a, cwd=workdir, check=True)
    run("cc", "-c", stub_s, "-o", "stub.o")
    run("ld", "-m", "elf_x86_64", "-T", stub_lds, "-o", "stub64.elf", "stub.o")
    # QEMU's multiboot loader takes 32-bit ELF only.
    run("objcopy", "-I", "elf64-x86-64", "-O", "elf32-i386", "stub64.elf", "stub.elf")


def boot(workdir, cpu, extra=(), memory="256"):
    serial = os.path.join(workdir, "serial.txt")
    if os.path.exists(serial):
        os.unlink(serial)
    r = subprocess.run(["qemu-system-x86_64", "-accel", "tcg", "-cpu", cpu, "-m", memory,
                        "-display", "none", "-monitor", "none", "-no-reboot",
                        "-serial", "file:" + serial,
                        "-device", "isa-debug-exit,iobase=0xf4,iosize=0x04",
                        "-kernel", os.path.join(workdir, "stub.elf")] + list(extra),
                       timeout=120, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    with open(serial, errors="replace") as f:
        return r.returncode, f.read()


HANDOFF_ENTRY = 0x700000  # see test-loader-qemu.S
MEMMAP = [("0x0", "0x9fbff", "System RAM"), ("0x9fc00", "0x9ffff", "Reserved"),
          ("0xf0000", "0xfffff", "Reserved"), ("0x100000", "0xfffffff", "System RAM"),
          ("0xfffc0000", "0xffffffff", "Reserved")]


def real_kernel(workdir, blob, stub_s, stub_lds, tool, vmlinuz, corrupt):
    """Boots vmlinuz through loader-tool's segments; returns True when it behaved."""
    root = os.path.join(workdir, "root")
    for i, (start, end, kind) in enumerate(MEMMAP):
        d = os.path.join(root, "sys/firmware/memmap", str(i))
        os.makedirs(d, exist_ok=True)
        for name, value in (("start", start), ("end", end), ("type", kind)):
            with open(os.path.join(d, name), "w") as f:
                f.write(value + "\n")
    seg = os.path.join(workdir, "seg")
    args = [tool, "--root", root, "load", "--dry-run", "--dump-segments", seg,
            "--cmdline", "console=ttyS0 nokaslr panic=-1", vmlinuz]
    if corrupt:
        args.insert(3, "--test-corrupt-digest")
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    extra, entry = [], None
    with open(os.path.join(seg, "segments")) as f:
        for line in f:
            w = line.split()
            if w[0] == "entry":
                entry = w[1]
            else:
                extra += ["-device", "loader,file=%s,addr=%s,force-raw=on" % (w[2], w[1])]
    extra += ["-device", "loader,addr=%#x,data=%s,data-len=8" % (HANDOFF_ENTRY, entry)]
    build(workdir, blob, stub_s, stub_lds, MODE_VERIFIED, 0, False)
    rc, out = boot(workdir, "max", extra, memory="512")
    started = "Linux version 6.1.0-57-cloud-amd64" in out
    if corrupt:
        ok = not started and "SHA-256 mismatch: segment 0 at 0x0000000001000000" in out
    else:
        ok = (started and re.search(r"Command line: console=ttyS0 nokaslr panic=-1 "
                                     r"upgraded\.stamps=[0-9a-f]{16},[0-9a-f]{16},"
                                     r"[0-9a-f]{16},v,[ag]", out) is not None and
              "BIOS-e820: [mem 0x0000000000100000-0x000000000fffffff] usable" in out)
    lines = [l for l in out.splitlines()
             if "Command line" in l or "Linux version" in l or "purgatory" in l or
             "e820" in l or "Kernel panic" in l]
    print("%-18s %s (qemu exit %d)\n%s" % ("real-kernel" + ("-corrupt" if corrupt else ""),
                                           "ok" if ok else "FAILED", rc, "\n".join(lines)))
    return ok


def main():
    if not shutil.which("qemu-system-x86_64"):
        print("qemu-system-x86_64 not installed: skipped")
        return 77
    blob_path, stub_s, stub_lds = (os.path.abspath(a) for a in sys.argv[1:4])
    with open(blob_path, "rb") as f:
        blob = f.read()

    # (name, mode, flags, corrupt, cpu, sha256_impl_request, expect kernel, expect
    # in serial: a regular expression). Without a request purgatory picks the
    # implementation it measures fastest: under TCG that is generic C ('g'),
    # as emulated AVX2 is slower; 'a' is accepted too.
    AVX2_REQUEST = 2  # SHA256_IMPL_AVX2 + 1
    cases = [
        ("verified", MODE_VERIFIED, 0, False, "max", 0, True, r",v,[ag]"),
        ("verified-avx2", MODE_VERIFIED, 0, False, "max", AVX2_REQUEST, True, r",v,a"),
        ("verified-corrupt", MODE_VERIFIED, 0, True, "max", 0, False,
         r"upgraded purgatory: SHA-256 mismatch: segment 0 at 0x0000000000400000"),
        ("fast-corrupt", MODE_FAST, 0, True, "max", 0, True, r",f,-"),
        ("verified-generic", MODE_VERIFIED, 0, False, "max,-avx2", AVX2_REQUEST, True, r",v,g"),
        ("panic", MODE_VERIFIED, FLAG_PANIC, False, "max", 0, True, r",p,[ag]"),
        ("panic-fast", MODE_FAST, FLAG_PANIC, False, "max", 0, False,
         r"panic image in fast mode"),
    ]
    failed = 0
    with tempfile.TemporaryDirectory(prefix="test-loader-qemu.") as workdir:
        for name, mode, flags, corrupt, cpu, request, want_kernel, want in cases:
            build(workdir, blob, stub_s, stub_lds, mode, flags, corrupt, request)
            rc, out = boot(workdir, cpu)
            entered = "FAKE KERNEL ENTERED rsi=%016x" % BOOT_PARAMS in out
            ok = (entered == want_kernel and re.search(want, out) is not None and
                  # isa-debug-exit gives (0x31 << 1) | 1 = 99; a reset with
                  # -no-reboot exits 0.
                  rc == (99 if want_kernel else 0))
            if want_kernel and ok:
                # The stamps: three increasing TSC values in the field.
                field = out.split(KEY.decode())[1].split(",")
                tsc = [int(x, 16) for x in field[:3]]
                ok = 0 < tsc[0] <= tsc[1] <= tsc[2]
            print("%-18s %s (qemu exit %d)\n%s" % (name, "ok" if ok else "FAILED", rc,
                                                   out.strip()))
            failed += not ok

        vmlinuz = [v for v in sys.argv[5:] if os.access(v, os.R_OK)]
        if len(sys.argv) > 4 and vmlinuz:
            tool = os.path.abspath(sys.argv[4])
            for corrupt in (False, True):
                failed += not real_kernel(workdir, blob, stub_s, stub_lds, tool, vmlinuz[0],
                                          corrupt)
        else:
            print("real-kernel        skipped: no cached vmlinuz-6.1.0-57-cloud-amd64 "
                  "(tests/bench-fetch-kernel)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
