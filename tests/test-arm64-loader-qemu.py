#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The arm64 loader's own segments boot Debian's real arm64 kernel under QEMU.

loader-tool (the arm64 build; under qemu-aarch64 on another machine) stages
vmlinuz-6.1.0-57-cloud-arm64 against tests/fixtures/arm64-virt (QEMU virt's own
DT, 2 GiB, a crash reservation) and dumps its segments; qemu-system-aarch64
-M virt (TCG) places them with -device loader and starts the CPU at the entry,
purgatory's first byte, as the old kernel would hand over (MMU off, EL1). Then:
  verified  -> the kernel's banner, its command line with the stamps field
               written ('v', a counter frequency), the initrd found;
  fast      -> the banner, stamps mode 'f';
  corrupted -> purgatory's mismatch line and a reset, no banner;
  panic     -> the crash image inside the fixture's reservation (256 MiB at
               0xa0000000): stamps mode 'p', the kernel reserving our ELF core
               header and seeing only the usable memory range as its RAM.
No kexec and no guest OS: only the loader's output and purgatory are under test.
Skips (exit 77) without the cached kernel (tests/bench-fetch-kernel '' arm64).
Usage: test-arm64-loader-qemu.py LOADER_TOOL FIXTURE_ROOT VMLINUZ...
"""
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile

BANNER = re.compile(rb"Linux version (\S+)")
CMDLINE = re.compile(rb"Kernel command line: .*upgraded\.stamps=([0-9a-f]{16}),([0-9a-f]{16}),"
                     rb"([0-9a-f]{16}),([vfp]),(.),([0-9a-f]{8})")
MISMATCH = re.compile(rb"SHA-256 mismatch")


PANIC_RAM = re.compile(rb"Memory: \d+K/262144K available")
ELFCOREHDR = re.compile(rb"Reserving \d+ KiB of memory at 0x([0-9a-f]+) for elfcorehdr")


def stage(tool, root, vmlinuz, initrd, out, mode, corrupt, panic=False):
    wrap = [] if platform.machine() == "aarch64" else ["qemu-aarch64-static"]
    cmd = wrap + [tool, "load", "--root", root, "--dry-run", "--mode", mode,
                  "--initrd", initrd, "--cmdline", "console=ttyAMA0 panic=-1",
                  "--dump-segments", out, vmlinuz]
    if corrupt:
        cmd.append("--test-corrupt-digest")
    if panic:
        cmd.append("--panic")
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    segs, entry = [], None
    with open(os.path.join(out, "segments")) as f:
        for line in f:
            w = line.split()
            if w[0] == "entry":
                entry = w[1]
            else:
                segs.append((w[1], w[2]))
    return segs, entry


def boot(segs, entry, log):
    cmd = ["qemu-system-aarch64", "-M", "virt", "-cpu", "max,pauth-impdef=on", "-m", "2048",
           "-smp", "1", "-nographic", "-no-reboot", "-monitor", "none"]
    for addr, path in segs:
        cmd += ["-device", "loader,file=%s,addr=%s,force-raw=on" % (path, addr)]
    cmd += ["-device", "loader,addr=%s,cpu-num=0" % entry]
    with open(log, "wb") as f:
        try:
            subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=240, check=False)
        except subprocess.TimeoutExpired:
            f.write(b"\n[test] timeout\n")
    with open(log, "rb") as f:
        return f.read()


def check(name, out, mode, corrupt):
    banner = BANNER.search(out)
    if corrupt:
        return bool(MISMATCH.search(out)) and not banner, "mismatch and reset expected"
    m = CMDLINE.search(out)
    if not banner or not m:
        return False, "no banner or no written stamps"
    entry, verified, jump = (int(m.group(i), 16) for i in (1, 2, 3))
    freq = int(m.group(6), 16)
    if mode == "panic" and not (PANIC_RAM.search(out) and ELFCOREHDR.search(out)):
        return False, "the crash kernel's RAM or ELF core header"
    if m.group(4).decode() != mode[0] or not entry <= verified <= jump or freq == 0:
        return False, "stamps %s" % m.group(0)[-60:].decode()
    if b"Freeing initrd memory" not in out:
        return False, "the initrd was not found"
    return True, "verify %.3f s, %s" % ((verified - entry) / freq, banner.group(1).decode())


def main():
    tool, root = sys.argv[1], sys.argv[2]
    vmlinuz = next((p for p in sys.argv[3:] if os.path.exists(p)), None)
    if not vmlinuz:
        print("skipped: no cached vmlinuz-6.1.0-57-cloud-arm64 (tests/bench-fetch-kernel '' arm64)")
        return 77
    if not shutil.which("qemu-system-aarch64"):
        print("skipped: qemu-system-aarch64 not installed (package qemu-system-arm)")
        return 77
    failed = 0
    with tempfile.TemporaryDirectory(prefix="test-arm64-loader-qemu.") as tmp:
        initrd = os.path.join(tmp, "initrd.img")
        with open(initrd, "wb") as f:
            f.write(os.urandom(64 * 1024))
        for name, mode, corrupt in (("verified", "verified", False), ("fast", "fast", False),
                                    ("corrupted", "verified", True), ("panic", "panic", False)):
            out_dir = os.path.join(tmp, name)
            segs, entry = stage(tool, root, vmlinuz, initrd, out_dir,
                                "verified" if mode == "panic" else mode, corrupt,
                                panic=mode == "panic")
            out = boot(segs, entry, os.path.join(tmp, name + ".log"))
            ok, why = check(name, out, mode, corrupt)
            print("%-10s %s: %s" % (name, "ok" if ok else "FAILED", why))
            if not ok:
                failed += 1
                sys.stdout.write(out[-3000:].decode(errors="replace"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
