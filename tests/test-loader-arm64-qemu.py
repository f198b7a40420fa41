#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A real kexec on arm64, end to end: Debian's 6.1.0-47 cloud-arm64 kernel
boots in qemu-system-aarch64 (TCG) on a busybox initramfs, loads 6.1.0-57
and kexecs into it (tests/arm64_e2e.py). One boot per case:

  ours-verified  direct   our loader, verified, -smp 2: the new kernel's banner
                 2 CPUs   (its ABI and Debian version), its command line with
                          the stamps: three increasing counts, 'v', the SHA-256
                          implementation, CNTFRQ_EL0, 2 CPUs hashed, none left
                          on; and the new kernel brought up 2 CPUs (purgatory
                          turned its second CPU off again as PSCI wants)
  ours-corrupt   direct   our loader, a kernel digest made wrong after hashing,
                 2 CPUs   -smp 2: purgatory's mismatch line, a reset (QEMU
                          exits), no new kernel
  ours-fast      UEFI     our loader, fast: banner, stamps with 'f,-', 0 CPUs
                          hashed
  ours-verified  UEFI     as the first, through QEMU_EFI.fd, -smp 1: the boot
                          CPU hashed alone (1 CPU)
  kexec-fast     direct   kexec-tools `kexec -l -i`: the new banner (the path
                          the measured facts name, and the benchmark's baseline)
  kexec-fast     UEFI     the same through QEMU_EFI.fd

The kexec-tools cases run only while our arm64 loader-tool cannot load (it is
missing or its --help names no arm64 support): they keep the harness proven.
Exit 77 (skip) without qemu-system-aarch64, or when the packages are neither
cached nor downloadable.

Usage: test-loader-arm64-qemu.py CACHE_DIR XENCTRL_STUB COUNTER [LOADER_TOOL]"""
import os
import subprocess
import sys
import tempfile
import time

import arm64_e2e as e2e
import arm64_probe


def loader_supported(tool):
    """Whether TOOL is an arm64 loader-tool that stages arm64 Images."""
    if not tool or not os.access(tool, os.X_OK):
        return False
    r = subprocess.run(["qemu-aarch64-static", "-L", "/usr/aarch64-linux-gnu", tool, "--help"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return r.returncode == 0 and "arm64" in r.stdout


def check(env, case, uefi, lines, rc, smp=1):
    """What is wrong with the boot of CASE on SMP CPUs, as a list."""
    s = e2e.summarize(env, lines)
    wrong = []
    if not s["old_banner"]:
        wrong.append("the old kernel's banner (%s %s) is missing" %
                     (e2e.OLD_PKG, env["versions"][e2e.OLD_PKG]))
    # The old kernel says how it was booted: through EDK II, or directly.
    if not e2e.find(lines, r"efi: EFI v.* by EDK II" if uefi else r"efi: UEFI not found"):
        wrong.append("the old kernel was not booted %s" % ("through UEFI" if uefi else
                                                           "directly"))
    if s["load_failed"] or s["skip"]:
        return wrong + ["the guest could not load the new kernel"]
    if not s["exec"]:
        return wrong + ["the guest never reached kexec -e"]
    if case == "ours-corrupt":
        if s["banner"]:
            wrong.append("the new kernel started")
        if not s["mismatch"]:
            wrong.append("no mismatch line from purgatory")
        if rc != 0:
            wrong.append("QEMU did not exit on the reset (exit %s)" % rc)
        return wrong
    if not s["banner"]:
        return wrong + ["no banner of %s %s" % (e2e.NEW_PKG, env["versions"][e2e.NEW_PKG])]
    if not s["cmdline"] or e2e.NEW_CMDLINE not in s["cmdline"][1]:
        wrong.append("the new kernel's command line lacks %r" % e2e.NEW_CMDLINE)
    if case.startswith("ours-"):
        st = s["stamps"]
        want = "v" if case == "ours-verified" else "f"
        if not st:
            wrong.append("no stamps in the new kernel's command line")
        elif not (0 < st[0] <= st[1] <= st[2]) or st[3] != want or \
                (want == "f") != (st[4] == "-"):
            wrong.append("stamps %s, want mode %s" % (st, want))
        elif st[5:] != ((0 if want == "f" else smp), 0):
            wrong.append("stamps say %d CPUs hashed, %d left on; want %d, 0" %
                         (st[5], st[6], 0 if want == "f" else smp))
    if smp > 1 and s["cpus_up"] != smp:
        wrong.append("the new kernel brought up %s CPUs, not %d" % (s["cpus_up"], smp))
    return wrong


def main():
    if len(sys.argv) < 4:
        print(__doc__)
        return 2
    cache, xenctrl, counter = (os.path.abspath(a) for a in sys.argv[1:4])
    tool = os.path.abspath(sys.argv[4]) if len(sys.argv) > 4 else None
    ours = loader_supported(tool)
    if ours:
        cases = [("ours-verified", False, 2), ("ours-corrupt", False, 2), ("ours-fast", True, 1),
                 ("ours-verified", True, 1)]
    else:
        print("our loader-tool cannot load arm64 Images yet: kexec-tools cases only")
        cases = [("kexec-fast", False, 1), ("kexec-fast", True, 1)]
    t_start = time.monotonic()
    failed = 0
    with tempfile.TemporaryDirectory(prefix="test-loader-arm64-qemu.") as work:
        try:
            env = e2e.prepare(cache, xenctrl, counter, tool if ours else None, work)
        except e2e.Skip as e:
            print("skipped: %s" % e)
            return 77
        arm64_probe.add(env, *cases[0][:2])
        print("old %s %s, new %s %s; initramfs %.1f MiB" %
              (e2e.OLD_PKG, env["versions"][e2e.OLD_PKG], e2e.NEW_PKG,
               env["versions"][e2e.NEW_PKG], os.path.getsize(env["initramfs"]) / 2**20))
        for case, uefi, smp in cases:
            t0 = time.monotonic()
            if case == "ours-corrupt":
                stop = lambda lines: False  # purgatory resets: QEMU exits
            else:
                stop = e2e.new_kernel_up(env, cpus=smp > 1)
            lines, rc, _, _ = e2e.boot(env, case, uefi, stop, smp=smp)
            wrong = check(env, case, uefi, lines, rc, smp) + arm64_probe.check(env, case, uefi, lines)
            name = "%s/%s/smp%d" % ("uefi" if uefi else "direct", case, smp)
            s = e2e.summarize(env, lines)
            st = s["stamps"]
            detail = ", stamps %s,%s, verify %.3f s, %d CPUs hashed, %s up" % (
                st[3], st[4], st[1] - st[0], st[5], s["cpus_up"]) if st else ""
            print("%-26s %s (%.1f s%s)" % (name, "; ".join(wrong) or "ok", time.monotonic() - t0,
                                           detail))
            if wrong:
                print("\n".join("  %8.3f %s" % (t - lines[0][0], l) for t, l in lines))
            failed += bool(wrong)
    print("total %.1f s" % (time.monotonic() - t_start))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
