#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Boots another kernel (default: the lab's 6.1.0-47-cloud-amd64 from the lab
cache) under QEMU TCG with a throwaway initramfs whose init runs the probe
integration test, and passes on its result. This is how the probe is checked
on the kernels the product actually updates between, not only on this
machine's. Exit 77 when no such kernel is cached or QEMU is missing.

usage: run-on-kernel.py INIT TEST LAB_CACHE [KERNEL_GLOB]
"""
import glob
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

init, test, cache = sys.argv[1:4]
pattern = sys.argv[4] if len(sys.argv) > 4 else 'vmlinuz-6.1.0-47-cloud-amd64'

kernels = sorted(glob.glob(os.path.join(cache, 'images', '*', pattern)))
qemu = shutil.which('qemu-system-x86_64')
if not kernels or not qemu:
    print(f'skipped: no {pattern} under {cache}/images (run the lab once) or no QEMU')
    sys.exit(77)
kernel = kernels[0]


def newc(entries):
    """A cpio "newc" archive: [(path, mode, data)]."""
    out = bytearray()
    for ino, (path, mode, data) in enumerate(entries + [('TRAILER!!!', 0, b'')], 1):
        name = path.lstrip('/').encode() + b'\0'
        fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name), 0]
        out += ('070701' + ''.join('%08x' % f for f in fields)).encode() + name
        out += b'\0' * (-len(out) % 4) + data
        out += b'\0' * (-len(out) % 4)
    return bytes(out)


# the test binary and the shared libraries it needs, at their paths
files = {'/init': init, '/test': test}
for line in subprocess.run(['ldd', test], capture_output=True, text=True, check=True).stdout.splitlines():
    m = re.search(r'(/\S+) \(0x', line)
    if m:
        files[m.group(1)] = os.path.realpath(m.group(1))
dirs = {'/proc', '/sys', '/dev', '/tmp'}
for path in files:
    d = os.path.dirname(path)
    while d != '/':
        dirs.add(d)
        d = os.path.dirname(d)
entries = [(d, stat.S_IFDIR | 0o755, b'') for d in sorted(dirs)]
entries += [(p, stat.S_IFREG | 0o755, open(src, 'rb').read()) for p, src in sorted(files.items())]

with tempfile.TemporaryDirectory() as tmp:
    initrd = os.path.join(tmp, 'initrd.cpio')
    with open(initrd, 'wb') as f:
        f.write(newc(entries))
    cmd = [qemu, '-accel', 'tcg,tb-size=256', '-cpu', 'max', '-machine', 'q35', '-m', '1024',
           '-smp', '2', '-no-reboot', '-nic', 'none', '-display', 'none', '-serial', 'stdio',
           '-kernel', kernel, '-initrd', initrd,
           '-append', 'console=ttyS0 panic=-1 quiet modprobe.blacklist=kvm_amd,kvm_intel']
    print('booting', kernel, flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors='replace')
    try:
        console, _ = proc.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        proc.kill()  # our own QEMU, by its handle
        console, _ = proc.communicate()
        print(console)
        sys.exit('the guest did not finish within 600 s')

print(console)
m = re.search(r'PROBE-TEST-EXIT=(\d+)', console)
if not m:
    sys.exit('the guest never reported the test result')
sys.exit(int(m.group(1)))
