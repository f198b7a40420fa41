#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Runs the real purgatory blob in QEMU (TCG, never KVM) between a tiny boot stub
and a fake kernel, and checks the handoff paths end to end:
  verified, intact       -> the kernel is entered with rsi = boot_params, stamps 'v'
  verified, corrupted    -> the mismatch line on the serial port, a reset, no kernel:
                            a byte in each chunk of each segment, and one in the
                            zero-filled rest, with each implementation the TCG CPU
                            offers (AVX2 16 lanes, the SSE2 assembly, generic)
  fast, corrupted        -> the kernel is entered, stamps 'f,-'
  verified, no AVX2      -> an AVX2 request falls back to what purgatory measures
                            fastest, generic or the SSE2 assembly ('g', 'x')
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
import os
import re
import shutil
import subprocess
import sys
import tempfile

from purgatory_params import PARAMS_OFFSET, PARAMS_SIZE, MODE_FAST, MODE_VERIFIED, FLAG_PANIC
import purgatory_params

CHUNK_SIZE = 16384  # small here, for several chunks per segment
PAYLOAD_FILESZ = 65536
PAYLOAD_MEMSZ = PAYLOAD_FILESZ + 8192  # the rest must be zero
KERNEL_ENTRY = 0x180000  # fake kernel, see test-loader-qemu.lds
PAYLOAD_ADDR = 0x400000
CMDLINE_ADDR = 0x500000
BOOT_PARAMS = 0x12345000  # what rsi must hold at the kernel entry
KEY = b"upgraded.stamps="
TEMPLATE = purgatory_params.TEMPLATE
PREFIX = b"console=ttyS0 "


def params(mode, flags, request, segments):
    """The parameter block (purgatory-abi.h) for segments [(addr, data, memsz)]."""
    return purgatory_params.pack(KERNEL_ENTRY, BOOT_PARAMS, mode, flags,
                                 CMDLINE_ADDR + len(PREFIX) + len(KEY), len(TEMPLATE), segments,
                                 CHUNK_SIZE, request, console_port=0x3F8)


def build(workdir, blob, stub_s, stub_lds, mode, flags, corrupt=None, request=0):
    """corrupt: None, or (segment, offset) of a byte flipped after the digests."""
    payload = bytearray((i * 31 + 7) & 0xFF for i in range(PAYLOAD_FILESZ))
    payload += bytes(PAYLOAD_MEMSZ - PAYLOAD_FILESZ)
    cmd = PREFIX + KEY + TEMPLATE
    cmdline = bytearray(cmd + bytes(4096 - len(cmd)))
    p = params(mode, flags, request, [(PAYLOAD_ADDR, bytes(payload[:PAYLOAD_FILESZ]),
                                       PAYLOAD_MEMSZ),
                                      (CMDLINE_ADDR, bytes(cmdline), len(cmdline))])
    blob = bytearray(blob)
    blob[PARAMS_OFFSET:PARAMS_OFFSET + PARAMS_SIZE] = p
    if corrupt:
        (payload, cmdline)[corrupt[0]][corrupt[1]] ^= 1

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


def memmap_root(workdir, memmap):
    """A root below workdir whose /sys/firmware/memmap holds memmap [(start, end, type)]
    (what loader-tool --root places the segments in); returns its path."""
    root = os.path.join(workdir, "root")
    for i, (start, end, kind) in enumerate(memmap):
        d = os.path.join(root, "sys/firmware/memmap", str(i))
        os.makedirs(d, exist_ok=True)
        for name, value in (("start", start), ("end", end), ("type", kind)):
            with open(os.path.join(d, name), "w") as f:
                f.write(value + "\n")
    return root


def real_kernel(workdir, blob, stub_s, stub_lds, tool, vmlinuz, corrupt):
    """Boots vmlinuz through loader-tool's segments; returns True when it behaved."""
    root = memmap_root(workdir, MEMMAP)
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
    build(workdir, blob, stub_s, stub_lds, MODE_VERIFIED, 0)
    rc, out = boot(workdir, "max", extra, memory="512")
    started = "Linux version 6.1.0-57-cloud-amd64" in out
    if corrupt:
        ok = not started and "SHA-256 mismatch: segment 0 at 0x0000000001000000" in out
    else:
        # The loader appends the update's handoff mark, then its stamps (docs/loader.md).
        ok = (started and re.search(r"Command line: console=ttyS0 nokaslr panic=-1 "
                                     r"upgraded\.handoff=1 "
                                     r"upgraded\.stamps=[0-9a-f]{16},[0-9a-f]{16},"
                                     r"[0-9a-f]{16},v,[agx]", out) is not None and
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
    # implementation it measures fastest; under TCG any it offers is accepted.
    GENERIC_REQUEST, AVX2_REQUEST, SSE2_REQUEST = 1, 2, 4  # Sha256Impl + 1
    seg0 = r"SHA-256 mismatch: segment 0 at 0x0000000000400000 size 0x0000000000012000"
    cases = [
        ("verified", MODE_VERIFIED, 0, None, "max", 0, True, r",v,[agx]"),
        ("verified-avx2", MODE_VERIFIED, 0, None, "max", AVX2_REQUEST, True, r",v,a"),
        ("verified-sse2", MODE_VERIFIED, 0, None, "max", SSE2_REQUEST, True, r",v,x"),
        ("fast-corrupt", MODE_FAST, 0, (0, PAYLOAD_FILESZ - 1), "max", 0, True, r",f,-"),
        ("verified-no-avx2", MODE_VERIFIED, 0, None, "max,-avx2", AVX2_REQUEST, True,
         r",v,[gx]"),
        ("panic", MODE_VERIFIED, FLAG_PANIC, None, "max", 0, True, r",p,[agx]"),
        ("panic-fast", MODE_FAST, FLAG_PANIC, None, "max", 0, False,
         r"panic image in fast mode"),
    ]
    # A corruption in every chunk of every segment, and in the zero-filled rest,
    # with each implementation the TCG CPU offers: refused, reset, no kernel.
    for impl, request in (("avx2", AVX2_REQUEST), ("sse2", SSE2_REQUEST),
                          ("generic", GENERIC_REQUEST)):
        for k in range(PAYLOAD_FILESZ // CHUNK_SIZE):
            off = k * CHUNK_SIZE + (CHUNK_SIZE - 1 if k % 2 else 5)
            cases.append(("corrupt-%s-s0c%d" % (impl, k), MODE_VERIFIED, 0, (0, off), "max",
                          request, False, seg0 + r", chunk %d at 0x%016x size 0x%016x;" %
                          (k, PAYLOAD_ADDR + k * CHUNK_SIZE, CHUNK_SIZE)))
        cases.append(("corrupt-%s-s1c0" % impl, MODE_VERIFIED, 0, (1, 4000), "max", request,
                      False, r"SHA-256 mismatch: segment 1 at 0x0000000000500000 size "
                      r"0x0000000000001000, chunk 0 at "))
        cases.append(("corrupt-%s-padding" % impl, MODE_VERIFIED, 0, (0, PAYLOAD_MEMSZ - 3),
                      "max", request, False,
                      r"non-zero byte in the zero padding: segment 0 at 0x0000000000400000 "
                      r"size 0x0000000000012000, byte at 0x%016x;" %
                      (PAYLOAD_ADDR + PAYLOAD_MEMSZ - 3)))
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
