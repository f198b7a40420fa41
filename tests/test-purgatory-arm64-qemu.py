#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Runs the real arm64 purgatory blob in qemu-system-aarch64 -M virt (TCG)
between a tiny boot stub and a fake kernel (test-purgatory-arm64-qemu.S), and
checks the handoff paths end to end, at EL1, at EL2 (nVHE, as the hyp stub
hands over) and at EL2 with E2H set (as a VHE kernel hands over):
  verified, intact     -> the kernel is entered at the same EL with the MMU and
                          the D-cache off, x0 = the DTB, x1..x3 = 0; the stamps
                          field holds three increasing CNTVCT_EL0 values, 'v',
                          the implementation and CNTFRQ_EL0; purgatory verified
                          with the MMU on (arch_state)
  verified, corrupted  -> the mismatch line on the PL011, a PSCI reset (QEMU
                          runs with -no-reboot, so it exits), no kernel; with the
                          ARMv8 SHA-2 instructions and with generic code, in each
                          chunk, in the zero-filled rest, in the stand-in DTB
  fast, corrupted      -> the kernel is entered, stamps 'f,-', MMU never on
  -smp 2, CPUs 0 and 1 -> both hashed (stamps ',02,00'), the second one off
  listed, PSCI given      again at the kernel's entry (the fake kernel asks
                          AFFINITY_INFO); a corrupt chunk still refused
  one CPU: -smp 1, panic, -> the boot CPU hashed alone (',01,00')
  MMU off
  MMU off (bench flag) -> verified all the same, with the MMU off
  refusals             -> a panic image in fast mode, a bad magic, a bad version,
                          an unknown flag: the line, a reset, no kernel
Exit 77 (skip) without qemu-system-aarch64.

Usage: test-purgatory-arm64-qemu.py PURGATORY_BIN STUB_ELF"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

import purgatory_params as pp

PURGATORY_ADDR = 0x40200000
STUB_CONFIG = 0x40170000
KERNEL_ENTRY = 0x40180000  # fake_kernel, see test-purgatory-arm64-qemu.lds
PAYLOAD_ADDR = 0x40400000  # 2 MiB aligned: one 2 MiB block, then pages
PAYLOAD_FILESZ = (2 << 20) + 100 * 1024
PAYLOAD_MEMSZ = PAYLOAD_FILESZ + 8192 - (PAYLOAD_FILESZ % 4096)
DTB_ADDR = 0x40800000  # a stand-in for the DTB: its bootargs string only
CHUNK_SIZE = 256 * 1024
UART = 0x09000000
KEY = b"upgraded.stamps="
PREFIX = b"console=ttyAMA0 "
CNTFRQ = 62500000  # QEMU's virt board
GENERIC_REQUEST, CE_REQUEST = 1, 5  # Sha256Impl + 1
STATE_EL_MASK, STATE_E2H, STATE_MMU, STATE_SMP_LATE = 0x3, 0x4, 0x8, 0x20
PSCI_AFFINITY_OFF = 1
# (label, -M machine, stub config (E2H), expected EL)
LEVELS = [("el1", "virt", 0, 1), ("el2", "virt,virtualization=on", 0, 2),
          ("el2-vhe", "virt,virtualization=on", 1, 2)]


def build(workdir, blob, mode, flags, corrupt=None, request=0, patch=None, conduit=pp.PSCI_NONE):
    """Writes the blob with its parameters, the payload and the stand-in DTB;
    corrupt: (segment, offset) of a byte flipped after the digests were taken;
    patch: (offset in the parameter block, struct format, value); conduit:
    PSCI to start the CPUs with MPIDR 0 and 1 by (none: one CPU)."""
    payload = bytearray((i * 131 + 7) & 0xFF for i in range(PAYLOAD_FILESZ))
    payload += bytes(PAYLOAD_MEMSZ - PAYLOAD_FILESZ)
    text = PREFIX + KEY + pp.TEMPLATE_ARM64
    dtb = bytearray(text + bytes(4096 - len(text)))
    p = bytearray(pp.pack(KERNEL_ENTRY, DTB_ADDR, mode, flags,
                          DTB_ADDR + len(PREFIX) + len(KEY), len(pp.TEMPLATE_ARM64),
                          [(PAYLOAD_ADDR, bytes(payload[:PAYLOAD_FILESZ]), PAYLOAD_MEMSZ),
                           (DTB_ADDR, bytes(dtb), len(dtb))],
                          CHUNK_SIZE, request, console_kind=pp.CONSOLE_PL011,
                          console_base=UART, psci_conduit=conduit,
                          mpidrs=(0, 1) if conduit else ()))
    if patch:
        struct.pack_into(patch[1], p, patch[0], patch[2])
    blob = bytearray(blob)
    blob[pp.PARAMS_OFFSET:pp.PARAMS_OFFSET + pp.PARAMS_SIZE] = p
    if corrupt:
        (payload, dtb)[corrupt[0]][corrupt[1]] ^= 1
    for name, data in (("purgatory.bin", blob), ("payload.bin", payload), ("dtb.bin", dtb)):
        with open(os.path.join(workdir, name), "wb") as f:
            f.write(data)


def boot(workdir, stub, machine, e2h, dtb_addr=DTB_ADDR, smp=1):
    serial = os.path.join(workdir, "serial.txt")
    if os.path.exists(serial):
        os.unlink(serial)
    load = lambda name, addr: ["-device", "loader,file=%s,addr=%#x,force-raw=on" %
                               (os.path.join(workdir, name), addr)]
    r = subprocess.run(["qemu-system-aarch64", "-M", machine, "-cpu", "max,pauth-impdef=on",
                        "-smp", str(smp), "-m", "256", "-display", "none", "-monitor", "none",
                        "-no-reboot",
                        "-serial", "file:" + serial, "-kernel", stub,
                        "-device", "loader,addr=%#x,data=%d,data-len=8" % (STUB_CONFIG, e2h)] +
                       load("purgatory.bin", PURGATORY_ADDR) + load("payload.bin", PAYLOAD_ADDR) +
                       load("dtb.bin", dtb_addr),
                       timeout=120, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    with open(serial, errors="replace") as f:
        return r.returncode, f.read() + r.stdout.decode(errors="replace")


def check_entry(out, el, mode, impl, mmu, cpus=1):
    """The fake kernel's line and the stamps: what the boot protocol and the
    report rely on; cpus: how many must have hashed (2: and the second is off
    again when the kernel is entered). Returns a list of what is wrong."""
    m = re.search(r"FAKE KERNEL el=([0-9a-f]+) sctlr=([0-9a-f]+) x0=([0-9a-f]+) "
                  r"x1=([0-9a-f]+) x2=([0-9a-f]+) x3=([0-9a-f]+) state=([0-9a-f]+) "
                  r"cpu1=([0-9a-f]+)", out)
    if not m:
        return ["the kernel was not entered"]
    v = [int(x, 16) for x in m.groups()]
    wrong = []
    if v[0] != el:
        wrong.append("entered at EL%d, not EL%d" % (v[0], el))
    if v[1] & 0x5:
        wrong.append("MMU or D-cache on at the kernel entry (SCTLR %#x)" % v[1])
    if v[2] != DTB_ADDR or v[3] or v[4] or v[5]:
        wrong.append("x0..x3 = %s" % [hex(x) for x in v[2:6]])
    if (v[6] & STATE_EL_MASK) != el or bool(v[6] & STATE_MMU) != mmu or v[6] & STATE_SMP_LATE:
        wrong.append("arch_state %#x" % v[6])
    if cpus > 1 and v[7] != PSCI_AFFINITY_OFF:
        wrong.append("the second CPU is not off at the kernel's entry (AFFINITY_INFO %#x)" % v[7])
    s = re.search(r"ARGS " + re.escape(PREFIX.decode() + KEY.decode()) +
                  r"([0-9a-f]{16}),([0-9a-f]{16}),([0-9a-f]{16}),(.),(.),([0-9a-f]{8}),"
                  r"([0-9a-f]{2}),([0-9a-f]{2})$", out, re.M)
    if not s:
        return wrong + ["no stamps field in the bootargs"]
    t = [int(x, 16) for x in s.groups()[:3]]
    if not 0 < t[0] <= t[1] <= t[2]:
        wrong.append("stamps not increasing: %s" % t)
    if s.group(4) != mode or not re.fullmatch(impl, s.group(5)):
        wrong.append("mode/impl %s,%s" % (s.group(4), s.group(5)))
    if int(s.group(6), 16) != CNTFRQ:
        wrong.append("frequency %s" % s.group(6))
    hashed = 0 if mode == "f" else cpus
    if int(s.group(7), 16) != hashed or int(s.group(8), 16) != 0:
        wrong.append("CPUs hashed %s, left on %s; want %d, 0" % (s.group(7), s.group(8), hashed))
    return wrong


def cases():
    """(name, mode, flags, corrupt, request, patch, expect: regex of the refusal,
    or (mode letter, impl regex, MMU on) for an entered kernel)."""
    seg0 = (r"SHA-256 mismatch: segment 0 at 0x%016x size 0x%016x, chunk %%d at 0x%%016x" %
            (PAYLOAD_ADDR, PAYLOAD_MEMSZ))
    c = [("verified", pp.MODE_VERIFIED, 0, None, 0, None, ("v", "[cg]", True)),
         ("verified-ce", pp.MODE_VERIFIED, 0, None, CE_REQUEST, None, ("v", "c", True)),
         ("verified-generic", pp.MODE_VERIFIED, 0, None, GENERIC_REQUEST, None, ("v", "g", True)),
         ("verified-mmu-off", pp.MODE_VERIFIED, pp.FLAG_MMU_OFF, None, CE_REQUEST, None,
          ("v", "c", False)),
         ("panic", pp.MODE_VERIFIED, pp.FLAG_PANIC, None, 0, None, ("p", "[cg]", True)),
         ("fast-corrupt", pp.MODE_FAST, 0, (0, 5), 0, None, ("f", "-", False)),
         ("panic-fast", pp.MODE_FAST, pp.FLAG_PANIC, None, 0, None, r"panic image in fast mode"),
         ("bad-magic", pp.MODE_VERIFIED, 0, None, 0, (0, "<Q", 1),
          r"parameter block does not match"),
         ("bad-version", pp.MODE_VERIFIED, 0, None, 0, (8, "<I", 2),
          r"parameter block does not match"),
         ("unknown-flag", pp.MODE_VERIFIED, 1 << 7, None, 0, None, r"unknown flags")]
    for impl, request in (("ce", CE_REQUEST), ("generic", GENERIC_REQUEST)):
        for k, off in ((0, 5), (8, 8 * CHUNK_SIZE + 99)):
            c.append(("corrupt-%s-c%d" % (impl, k), pp.MODE_VERIFIED, 0, (0, off), request, None,
                      seg0 % (k, PAYLOAD_ADDR + k * CHUNK_SIZE)))
        c.append(("corrupt-%s-padding" % impl, pp.MODE_VERIFIED, 0, (0, PAYLOAD_MEMSZ - 3),
                  request, None, r"non-zero byte in the zero padding: segment 0"))
        c.append(("corrupt-%s-dtb" % impl, pp.MODE_VERIFIED, 0, (1, 3), request, None,
                  r"SHA-256 mismatch: segment 1 at 0x%016x" % DTB_ADDR))
    return c


def smp_cases(conduit):
    """Two CPUs listed and started by PSCI (conduit: the level's): (name, mode,
    flags, corrupt, request, conduit, -smp, expect), expect as in cases() with
    the CPUs that must have hashed."""
    seg0 = r"SHA-256 mismatch: segment 0 at 0x%016x size 0x%016x, chunk 8 at 0x%016x" % (
        PAYLOAD_ADDR, PAYLOAD_MEMSZ, PAYLOAD_ADDR + 8 * CHUNK_SIZE)
    return [
        ("smp2-verified-ce", pp.MODE_VERIFIED, 0, None, CE_REQUEST, conduit, 2,
         ("v", "c", True, 2)),
        ("smp2-verified-generic", pp.MODE_VERIFIED, 0, None, GENERIC_REQUEST, conduit, 2,
         ("v", "g", True, 2)),
        ("smp2-corrupt-c8", pp.MODE_VERIFIED, 0, (0, 8 * CHUNK_SIZE + 99), CE_REQUEST, conduit,
         2, seg0),
        # One CPU: no second one to start (CPU_ON refused), a panic image, the MMU off.
        ("smp1-listed", pp.MODE_VERIFIED, 0, None, CE_REQUEST, conduit, 1, ("v", "c", True, 1)),
        ("smp2-panic", pp.MODE_VERIFIED, pp.FLAG_PANIC, None, CE_REQUEST, conduit, 2,
         ("p", "c", True, 1)),
        ("smp2-mmu-off", pp.MODE_VERIFIED, pp.FLAG_MMU_OFF, None, CE_REQUEST, conduit, 2,
         ("v", "c", False, 1)),
        ("smp2-fast", pp.MODE_FAST, 0, None, 0, conduit, 2, ("f", "-", False, 1)),
    ]


def run_case(workdir, blob, stub, machine, e2h, el, case):
    """Boots one case; returns the list of what is wrong and the output."""
    name, mode, flags, corrupt, request, patch, conduit, smp, expect = case
    build(workdir, blob, mode, flags, corrupt, request, patch, conduit)
    rc, out = boot(workdir, stub, machine, e2h, smp=smp)
    if isinstance(expect, tuple):
        wrong = check_entry(out, el, *expect)
    else:
        wrong = []
        if "FAKE KERNEL" in out:
            wrong.append("the kernel was entered")
        if not re.search(r"upgraded purgatory: " + expect + r".*resetting", out):
            wrong.append("no refusal line matching %r" % expect)
    if rc != 0:
        wrong.append("qemu exit %d" % rc)
    return wrong, out


def main():
    if not shutil.which("qemu-system-aarch64"):
        print("qemu-system-aarch64 not installed: skipped")
        return 77
    blob_path, stub = (os.path.abspath(a) for a in sys.argv[1:3])
    with open(blob_path, "rb") as f:
        blob = f.read()
    failed = 0
    with tempfile.TemporaryDirectory(prefix="test-purgatory-arm64-qemu.") as workdir:
        for level, machine, e2h, el in LEVELS:
            # PSCI as QEMU's virt board offers it: HVC at EL1, SMC with EL2.
            conduit = pp.PSCI_SMC if el == 2 else pp.PSCI_HVC
            run = [c[:6] + (pp.PSCI_NONE, 1, c[6]) for c in cases()]
            run += [c[:5] + (None,) + c[5:] for c in smp_cases(conduit)]
            for case in run:
                name = case[0]
                # Every path at EL1; at EL2 the paths whose registers differ.
                if el == 2 and name not in ("verified", "verified-mmu-off", "fast-corrupt",
                                            "corrupt-ce-c8", "panic-fast", "smp2-verified-ce",
                                            "smp2-corrupt-c8", "smp1-listed"):
                    continue
                wrong, out = run_case(workdir, blob, stub, machine, e2h, el, case)
                print("%-28s %s\n%s" % (level + "/" + name, "; ".join(wrong) or "ok", out.strip()))
                failed += bool(wrong)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
