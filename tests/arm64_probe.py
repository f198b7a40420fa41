# SPDX-License-Identifier: LGPL-2.1-or-later
"""The vCPU probe on the arm64 kernel, inside one boot of tests/arm64_e2e.py.

The probe's integration test (tests/integration/probe/test-probe-integration.c,
built for arm64) loads the CO-RE probe on the old kernel (6.1.0-47-cloud-arm64),
attaches it to sched_switch, tracks a busy stand-in thread through two
pause/resume windows and checks every degraded reason (no BTF, unusable BTF,
not root, disabled). add() appends it and its arm64 libraries to the boot's
initramfs as a second cpio archive (the kernel unpacks both) with
/sbin/e2e-probe, which the old kernel's /init runs before loading the new
kernel; it runs the test only in the boot named here (no extra boot: it costs
seconds of that boot) and prints its exit status. check() fails that boot when
the status is missing or not 0.

The test binary comes from the environment (E2E_PROBE_TEST, set by
tests/meson.build); without it nothing is added and check() passes."""
import os
import re

import arm64_e2e as e2e

ENV = "E2E_PROBE_TEST"
MARK = "E2E: probe-test exit"
SCRIPT = """#!/bin/busybox sh
[ "$1 $([ -d /sys/firmware/efi ] && echo uefi || echo direct)" = "@BOOT@" ] || exit 0
mount -t tmpfs tmpfs /tmp
/sbin/probe-test
echo "@MARK@ $?"
"""


def boot_name(case, uefi):
    return "%s %s" % (case, "uefi" if uefi else "direct")


def add(env, case, uefi):
    """Appends the probe test to env's initramfs for the boot of (CASE, UEFI)."""
    test = os.environ.get(ENV)
    if not test:
        return
    env["probe_boot"] = boot_name(case, uefi)
    script = SCRIPT.replace("@BOOT@", env["probe_boot"]).replace("@MARK@", MARK)
    c = e2e.Cpio()
    c.dir("sbin")
    c.dir("lib")
    c.file("sbin/e2e-probe", script.encode(), 0o755)
    with open(test, "rb") as f:
        c.file("sbin/probe-test", f.read(), 0o755)
    for name, path in e2e.library_closure([test], {}).items():
        with open(path, "rb") as f:
            c.file("lib/" + name, f.read(), 0o755)
    with open(env["initramfs"], "ab") as f:
        f.write(c.bytes())


def check(env, case, uefi, lines):
    """What is wrong with the probe test in this boot, as a list."""
    if env.get("probe_boot") != boot_name(case, uefi):
        return []
    m = e2e.find(lines, r"^%s \d+$" % re.escape(MARK))
    if not m:
        return ["the probe test never finished on %s" % e2e.OLD_PKG]
    if not m[1].endswith(" 0"):
        return ["the probe test failed on %s (%s)" % (e2e.OLD_PKG, m[1])]
    return []
