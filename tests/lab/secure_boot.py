# SPDX-License-Identifier: LGPL-2.1-or-later
"""A lab host under UEFI Secure Boot (lab.conf SECURE_BOOT=snakeoil).

Debian's ovmf ships a firmware build and a variable store whose PK, KEK and db
hold one test key ("snakeoil"), together with that key and its certificate, so
that testers can sign what the firmware must accept (/usr/share/doc/ovmf/
README.Debian). The runner uses them like this:

- the old kernel, which OVMF starts through its EFI stub (-kernel), is re-signed
  with the snakeoil key (Debian's own signature removed first): with Secure Boot
  on, OVMF loads only images db accepts;
- Debian's kernel then locks itself down (integrity) because it was booted with
  Secure Boot, so kexec_load is refused and kexec_file_load checks the staged
  kernel's signature: against the kernel's built-in and secondary keyrings and the
  platform keyring, which holds db (the snakeoil certificate);
- the new kernel is re-signed the same way and put into the payload as
  /lab-payload/signed/vmlinuz-<release>, which a scenario stages; the image's own
  /boot/vmlinuz-<release> keeps Debian's signature, which no keyring of this host
  accepts (no shim, so no MOK list).

The firmware needs SMM (the variable store is only writable from it) and a
per-run copy of the variable store.
"""

import os
import shutil
import subprocess

OVMF_CODE = '/usr/share/OVMF/OVMF_CODE_4M.snakeoil.fd'
OVMF_VARS = '/usr/share/OVMF/OVMF_VARS_4M.snakeoil.fd'
KEY = '/usr/share/ovmf/PkKek-1-snakeoil.key'
CERT = '/usr/share/ovmf/PkKek-1-snakeoil.pem'
KEY_PASSWORD = 'snakeoil'  # documented in README.Debian
VALUES = ('snakeoil',)
PAYLOAD_DIR = 'signed'


def _run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        raise RuntimeError(f'{" ".join(cmd)} failed ({p.returncode}): {p.stdout.strip()}')
    return p.stdout


def missing():
    """What this machine lacks for a Secure Boot lab host (empty when nothing)."""
    need = [f for f in (OVMF_CODE, OVMF_VARS, KEY, CERT) if not os.path.exists(f)]
    need += [t for t in ('sbsign', 'sbattach', 'sbverify', 'openssl') if not shutil.which(t)]
    return need


def sign(src, dst, key):
    """dst = src with its signatures replaced by one made with the snakeoil key."""
    shutil.copyfile(src, dst)
    # sbattach --remove takes one signature off at a time; Debian's kernels carry one.
    while 'signature 1' in _run(['sbverify', '--list', dst]):
        _run(['sbattach', '--remove', dst])
    _run(['sbsign', '--key', key, '--cert', CERT, '--output', dst, dst])
    _run(['sbverify', '--cert', CERT, dst])


def prepare(work, imgdir, old, new):
    """Signs both kernels into work, copies the variable store. Returns the old
    kernel to boot, the signed new kernel (for the payload) and the QEMU arguments
    that replace the default firmware."""
    need = missing()
    if need:
        raise RuntimeError(f'Secure Boot lab host: missing {", ".join(need)} '
                           '(packages ovmf, sbsigntool, openssl)')
    key = os.path.join(work, 'snakeoil.key')
    _run(['openssl', 'pkey', '-in', KEY, '-passin', f'pass:{KEY_PASSWORD}', '-out', key])
    old_signed = os.path.join(work, f'vmlinuz-{old}.signed')
    new_signed = os.path.join(work, f'vmlinuz-{new}.signed')
    sign(os.path.join(imgdir, f'vmlinuz-{old}'), old_signed, key)
    sign(os.path.join(imgdir, f'vmlinuz-{new}'), new_signed, key)
    os.unlink(key)
    vars_copy = os.path.join(work, 'OVMF_VARS.snakeoil.fd')
    shutil.copyfile(OVMF_VARS, vars_copy)
    qemu = ['-machine', 'q35,smm=on',
            '-global', 'driver=cfi.pflash01,property=secure,value=on',
            '-drive', f'if=pflash,format=raw,unit=0,readonly=on,file={OVMF_CODE}',
            '-drive', f'if=pflash,format=raw,unit=1,file={vars_copy}']
    return old_signed, new_signed, qemu
