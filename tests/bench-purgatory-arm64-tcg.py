#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""arm64 purgatory's verification time under qemu-system-aarch64 TCG, on a
payload of the size kexec-tools was measured on (docs/purgatory.md, "arm64"):
per SHA-256 implementation (the ARMv8 SHA-2 instructions, generic C), each with
the MMU and caches on (what purgatory does) and off (PURGATORY_FLAG_MMU_OFF:
what kexec-tools' purgatory does), so the MMU's gain is measured, not claimed.

The payload is a kernel-sized segment and an initrd-sized one (29 MB together,
about a 6.1.0-57-cloud-arm64 Image plus its initrd), pseudo-random bytes: SHA-256
costs the same on any bytes of the same length. The stub and fake kernel of
test-purgatory-arm64-qemu.py enter the real blob at EL1 on -M virt
-cpu max,pauth-impdef=on; each case runs once per round, rounds interleaved
(A B C D A B C D ...), and the median of the stamps' V - E (CNTVCT_EL0 at
CNTFRQ_EL0, which QEMU derives from the host clock) is printed per case.
The stamps are wall time, which a busy machine stretches (QEMU waits for a
CPU); so each case also gets QEMU's own CPU time for the run, less that of a
fast-mode run (the same boot, nothing hashed): the hashing's CPU time, which
other processes do not stretch. Both are medians.

A benchmark: it prints figures and exits 0; 77 (skip) without
qemu-system-aarch64.

Usage: bench-purgatory-arm64-tcg.py PURGATORY_BIN STUB_ELF [--rounds N]"""
import argparse
import importlib.util
import os
import resource
import random
import re
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "arm64_qemu", os.path.join(HERE, "test-purgatory-arm64-qemu.py"))
arm64_qemu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(arm64_qemu)
pp = arm64_qemu.pp

KERNEL_SIZE = 9 << 20      # about the Image's size
INITRD_SIZE = 20 << 20     # about its initrd's
INITRD_ADDR = arm64_qemu.PAYLOAD_ADDR + KERNEL_SIZE
DTB_ADDR = 0x43000000      # above the payload
CHUNK_SIZE = 256 << 10     # what the loader picks for this size (512 chunks at most)
KEXEC_TOOLS_S_PER_MB = (0.4, 0.5)  # issue 29: kexec-tools' purgatory under TCG, by hand
# (label, sha256_impl_request, flags)
CASES = [("ce mmu-on", arm64_qemu.CE_REQUEST, 0),
         ("ce mmu-off", arm64_qemu.CE_REQUEST, pp.FLAG_MMU_OFF),
         ("generic mmu-on", arm64_qemu.GENERIC_REQUEST, 0),
         ("generic mmu-off", arm64_qemu.GENERIC_REQUEST, pp.FLAG_MMU_OFF)]


def write_payload(work):
    rnd = random.Random(29)
    payload = rnd.randbytes(KERNEL_SIZE + INITRD_SIZE)
    with open(os.path.join(work, "payload.bin"), "wb") as f:
        f.write(payload)
    return payload


def write_params(work, blob, payload, request, flags, mode):
    text = arm64_qemu.PREFIX + arm64_qemu.KEY + pp.TEMPLATE_ARM64
    dtb = text + bytes(4096 - len(text))
    p = pp.pack(arm64_qemu.KERNEL_ENTRY, DTB_ADDR, mode, flags,
                DTB_ADDR + len(arm64_qemu.PREFIX) + len(arm64_qemu.KEY),
                len(pp.TEMPLATE_ARM64),
                [(arm64_qemu.PAYLOAD_ADDR, payload[:KERNEL_SIZE], KERNEL_SIZE),
                 (INITRD_ADDR, payload[KERNEL_SIZE:], INITRD_SIZE),
                 (DTB_ADDR, dtb, len(dtb))],
                CHUNK_SIZE, request, console_kind=pp.CONSOLE_PL011,
                console_base=arm64_qemu.UART)
    b = bytearray(blob)
    b[pp.PARAMS_OFFSET:pp.PARAMS_OFFSET + pp.PARAMS_SIZE] = p
    for name, data in (("purgatory.bin", b), ("dtb.bin", dtb)):
        with open(os.path.join(work, name), "wb") as f:
            f.write(data)


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_once(work, stub, blob, payload, request, flags, mode=pp.MODE_VERIFIED):
    """(seconds of V - E, the implementation letter, QEMU's CPU seconds), or None."""
    write_params(work, blob, payload, request, flags, mode)
    cpu0 = children_cpu()
    rc, out = arm64_qemu.boot(work, stub, "virt", 0, DTB_ADDR)
    cpu = children_cpu() - cpu0
    m = re.search(r"upgraded\.stamps=([0-9a-f]{16}),([0-9a-f]{16}),[0-9a-f]{16},([vf]),(.),"
                  r"([0-9a-f]{8})", out)
    state = re.search(r"state=([0-9a-f]+)", out)
    if not m or not state:
        print("run failed (qemu exit %d):\n%s" % (rc, out.strip()))
        return None
    mmu = bool(int(state.group(1), 16) & arm64_qemu.STATE_MMU)
    if mode == pp.MODE_VERIFIED and mmu == bool(flags & pp.FLAG_MMU_OFF):
        print("purgatory ran with the MMU %s, not as asked" % ("on" if mmu else "off"))
        return None
    return (int(m.group(2), 16) - int(m.group(1), 16)) / int(m.group(5), 16), m.group(4), cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("blob")
    ap.add_argument("stub")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if not shutil.which("qemu-system-aarch64"):
        print("qemu-system-aarch64 not installed: skipped")
        return 77
    with open(args.blob, "rb") as f:
        blob = f.read()
    load0 = os.getloadavg()[0]
    secs = {label: [] for label, _, _ in CASES}
    cpus = {label: [] for label, _, _ in CASES}
    letters = {label: set() for label, _, _ in CASES}
    fast_cpu = []
    with tempfile.TemporaryDirectory(prefix="bench-purgatory-arm64.") as work:
        payload = write_payload(work)
        stub = os.path.abspath(args.stub)
        for _ in range(args.rounds):
            r = run_once(work, stub, blob, payload, 0, 0, pp.MODE_FAST)
            if r:
                fast_cpu.append(r[2])
            for label, request, flags in CASES:
                r = run_once(work, stub, blob, payload, request, flags)
                if r:
                    secs[label].append(r[0])
                    letters[label].add(r[1])
                    cpus[label].append(r[2])
    mb = len(payload) / 1e6
    print("load average %.1f at the start, %.1f at the end (%d CPUs): figures from a busy "
          "machine are upper bounds" % (load0, os.getloadavg()[0], os.cpu_count()))
    lo, hi = (s * mb for s in KEXEC_TOOLS_S_PER_MB)
    print("payload: %.1f MB in two segments (%d + %d MiB) and a 4 KiB DTB stand-in, "
          "chunks of %d KiB" % (mb, KERNEL_SIZE >> 20, INITRD_SIZE >> 20, CHUNK_SIZE >> 10))
    print("method: qemu-system-aarch64 -M virt -cpu max,pauth-impdef=on (TCG), EL1, "
          "%d interleaved rounds, medians of the stamps' V - E at CNTFRQ_EL0" % args.rounds)
    print("kexec-tools' purgatory under TCG (issue 29, by hand): %.1f-%.1f s/MB, "
          "%.1f-%.1f s here; the target is at most 5%% of it" % (*KEXEC_TOOLS_S_PER_MB, lo, hi))
    for label, _, _ in CASES:
        if not secs[label]:
            print("%-16s  no run succeeded" % label)
            continue
        med = statistics.median(secs[label])
        cpu = statistics.median(cpus[label]) - statistics.median(fast_cpu) if fast_cpu else 0
        print("%-16s  impl %s  verify %7.3f s (min %.3f, max %.3f)  %5.1f%% of kexec-tools' "
              "%.1f s/MB;  CPU %6.3f s  %5.1f%%" %
              (label, "".join(sorted(letters[label])), med, min(secs[label]), max(secs[label]),
               100 * med / lo, KEXEC_TOOLS_S_PER_MB[0], cpu, 100 * cpu / lo))
    if fast_cpu:
        print("fast-mode run (the baseline): QEMU CPU %.3f s" % statistics.median(fast_cpu))
    for impl in ("ce", "generic"):
        on, off = secs.get(impl + " mmu-on"), secs.get(impl + " mmu-off")
        con, coff = cpus.get(impl + " mmu-on"), cpus.get(impl + " mmu-off")
        if on and off:
            print("%-8s MMU on saves %.3f s of verify (%.2fx), %.3f s of CPU" %
                  (impl, statistics.median(off) - statistics.median(on),
                   statistics.median(off) / statistics.median(on),
                   statistics.median(coff) - statistics.median(con)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
