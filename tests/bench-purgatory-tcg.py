#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Purgatory's verification time under QEMU TCG, on the lab's real payload: the
figure the lab's report gives as purgatory's verify time, without booting the lab.

loader-tool stages the lab image's 6.1.0-57 vmlinuz and initrd for a 768 MiB
memory map (the segments dumped to files), QEMU TCG (`-cpu max`, as the lab host
runs) places them with -device loader, the stub of test-loader-qemu.py enters
purgatory as the old kernel would, and the new kernel's command line carries
purgatory's stamps. Each run forces one SHA-256 implementation through
sha256_impl_request (or none: the calibrated pick); the implementations are run
in interleaved rounds (A B C A B C ...) and the median of V - E (the stamps'
"verified" minus "entry" TSC) is printed per implementation, in ticks and in
seconds at the TSC rate the guest kernel reports. Under TCG the guest's TSC is
the host's and not invariant for the guest, so the seconds are estimates, like
the lab report's.

A benchmark: it prints figures and exits 0; 77 (skip) without
qemu-system-x86_64 or without a cached payload.

Usage: bench-purgatory-tcg.py PURGATORY_BIN STUB_S STUB_LDS LOADER_TOOL CACHE_DIR...
       [--rounds N]"""
import argparse
import glob
import importlib.util
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("loader_qemu",
                                               os.path.join(HERE, "test-loader-qemu.py"))
loader_qemu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(loader_qemu)

# 1 GiB of guest RAM; the map handed to the loader stops at 768 MiB, below what
# SeaBIOS keeps for itself at the top of RAM.
GUEST_MEMORY = "1024"
MEMMAP = [("0x0", "0x9fbff", "System RAM"), ("0x9fc00", "0x9ffff", "Reserved"),
          ("0xf0000", "0xfffff", "Reserved"), ("0x100000", "0x2fffffff", "System RAM"),
          ("0xfffc0000", "0xffffffff", "Reserved")]
# Offset of sha256_impl_request in struct purgatory_params (purgatory-abi.h).
IMPL_REQUEST_OFFSET = 84
# (label, sha256_impl_request: 0 = calibrated pick, else Sha256Impl + 1)
CASES = [("calibrated", 0), ("generic", 1), ("avx2", 2), ("sha-ni", 3), ("sse2", 4)]
IMPL_NAMES = {"s": "sha-ni", "a": "avx2", "g": "generic", "x": "sse2", "-": "none"}
STAMPS = re.compile(r"upgraded\.stamps=([0-9a-f]{16}),([0-9a-f]{16}),([0-9a-f]{16}),(.),(.)")
TSC_RATE = re.compile(r"tsc: Detected ([0-9.]+) MHz processor")
LAB_TARGET_S = 0.4  # issue: the lab report's verify time at most 0.4 s


def find_payload(dirs):
    """(vmlinuz, initrd or None): the newest lab image first, like bench-payload.h."""
    for d in dirs:
        images = sorted(glob.glob(os.path.join(d, "images", "*")), key=os.path.getmtime,
                        reverse=True)
        for base in images + [d, os.path.join(d, "boot"), os.path.join(d, "root", "boot")]:
            k = glob.glob(os.path.join(base, "vmlinuz-6.1.0-57*"))
            if k:
                i = glob.glob(os.path.join(base, "initrd.img-6.1.0-57*"))
                return k[0], (i[0] if i else None)
    return None, None


def stage(work, tool, vmlinuz, initrd):
    """Runs loader-tool; returns (QEMU -device arguments, purgatory segment file,
    bytes listed for hashing)."""
    root = loader_qemu.memmap_root(work, MEMMAP)
    seg = os.path.join(work, "seg")
    args = [tool, "--root", root, "load", "--dry-run", "--dump-segments", seg,
            "--cmdline", "console=ttyS0 nokaslr panic=-1"]
    if initrd:
        args += ["--initrd", initrd]
    subprocess.run(args + [vmlinuz], check=True, stdout=subprocess.DEVNULL)
    extra, entry, purgatory, hashed = [], None, None, 0
    with open(os.path.join(seg, "segments")) as f:
        for line in f:
            w = line.split()
            if w[0] == "entry":
                entry = w[1]
                continue
            extra += ["-device", "loader,file=%s,addr=%s,force-raw=on" % (w[2], w[1])]
            if w[0] == "purgatory":
                purgatory = w[2]
            else:
                hashed += os.path.getsize(w[2])
    extra += ["-device", "loader,addr=%#x,data=%s,data-len=8" %
              (loader_qemu.HANDOFF_ENTRY, entry)]
    return extra, purgatory, hashed


def run_once(work, extra, purgatory, original, request):
    """One boot; returns (V - E ticks, impl letter, guest TSC MHz or None)."""
    blob = bytearray(original)
    struct.pack_into("<I", blob, loader_qemu.PARAMS_OFFSET + IMPL_REQUEST_OFFSET, request)
    with open(purgatory, "wb") as f:
        f.write(blob)
    serial = os.path.join(work, "serial.txt")
    if os.path.exists(serial):
        os.unlink(serial)
    qemu = subprocess.Popen(["qemu-system-x86_64", "-accel", "tcg", "-cpu", "max",
                             "-m", GUEST_MEMORY, "-display", "none", "-monitor", "none",
                             "-no-reboot", "-serial", "file:" + serial,
                             "-kernel", os.path.join(work, "stub.elf")] + extra,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out, stamps, rate = "", None, None
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and qemu.poll() is None:
            time.sleep(0.2)
            if os.path.exists(serial):
                with open(serial, errors="replace") as f:
                    out = f.read()
            stamps, rate = STAMPS.search(out), TSC_RATE.search(out)
            if (stamps and rate) or "upgraded purgatory:" in out:
                break
    finally:
        qemu.kill()
        qemu.wait()
    if not stamps:
        raise RuntimeError("no stamps in the new kernel's command line:\n" + out[-600:])
    return (int(stamps[2], 16) - int(stamps[1], 16), stamps[5],
            float(rate[1]) if rate else None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("purgatory_bin")
    ap.add_argument("stub_s")
    ap.add_argument("stub_lds")
    ap.add_argument("loader_tool")
    ap.add_argument("cache_dirs", nargs="+")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()

    if not shutil.which("qemu-system-x86_64"):
        print("qemu-system-x86_64 not installed: skipped")
        return 77
    vmlinuz, initrd = find_payload(args.cache_dirs)
    if not vmlinuz:
        print("no cached vmlinuz-6.1.0-57 (tests/lab/build-image or tests/bench-fetch-kernel): "
              "skipped")
        return 77
    with open(args.purgatory_bin, "rb") as f:
        blob = f.read()
    with tempfile.TemporaryDirectory(prefix="bench-purgatory-tcg.") as work:
        extra, purgatory, hashed = stage(work, os.path.abspath(args.loader_tool), vmlinuz,
                                         initrd)
        with open(purgatory, "rb") as f:
            original = f.read()
        # The stub (and a dummy parameter block the real segments replace).
        loader_qemu.build(work, blob, os.path.abspath(args.stub_s),
                          os.path.abspath(args.stub_lds), loader_qemu.MODE_VERIFIED, 0)
        ticks = {label: [] for label, _ in CASES}
        ran = {label: set() for label, _ in CASES}
        rates = []
        for _ in range(args.rounds):
            for label, request in CASES:
                t, impl, rate = run_once(work, extra, purgatory, original, request)
                ticks[label].append(t)
                ran[label].add(IMPL_NAMES.get(impl, impl))
                if rate:
                    rates.append(rate)
    mhz = statistics.median(rates) if rates else None
    print("payload: %s + %s, %.1f MB hashed" %
          (vmlinuz, initrd or "no initrd (incomplete: the lab's figure is larger)", hashed / 1e6))
    print("method: QEMU TCG -cpu max, %d interleaved rounds, medians of V - E; guest TSC %s"
          % (args.rounds, "%.1f MHz (the guest kernel's calibration)" % mhz if mhz else
             "rate unknown"))
    for label, request in CASES:
        impls = ",".join(sorted(ran[label]))
        if request and impls != label:
            print("%-10s  not offered by this TCG CPU (ran %s)" % (label, impls))
            continue
        med = statistics.median(ticks[label])
        if mhz:
            s = med / (mhz * 1e6)
            print("%-10s  ran %-8s V-E %6.3f Gticks  %.3f s (estimated)  %5.1f MB/s  "
                  "lab target <= %.1f s: %s" % (label, impls, med / 1e9, s, hashed / 1e6 / s,
                                                LAB_TARGET_S,
                                                "met" if s <= LAB_TARGET_S else "not met"))
        else:
            print("%-10s  ran %-8s V-E %6.3f Gticks" % (label, impls, med / 1e9))
    return 0


if __name__ == "__main__":
    sys.exit(main())
