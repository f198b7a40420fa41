#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""catalog/upgraded.catalog through the real journalctl: it builds a catalog database from the
file under a scratch root (--root) and lists it; each MESSAGE_ID defined in common/log-ids.h
is there with its subject, nothing else is, and every entry names the update (@UPGRADED_ID@).

usage: check-catalog.py CATALOG LOG_IDS_H"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

catalog, ids_h = sys.argv[1], sys.argv[2]
journalctl = shutil.which('journalctl')
if not journalctl:
    print('SKIP: journalctl missing')
    sys.exit(77)
failures = 0
with tempfile.TemporaryDirectory(prefix='upgraded-catalog.') as root:
    d = os.path.join(root, 'usr/lib/systemd/catalog')
    os.makedirs(d)
    shutil.copy(catalog, os.path.join(d, 'upgraded.catalog'))
    subprocess.run([journalctl, f'--root={root}', '--update-catalog'], check=True)
    listing = subprocess.run([journalctl, f'--root={root}', '--list-catalog'], check=True,
                             capture_output=True, text=True).stdout
    print(''.join(f'# {line}\n' for line in listing.splitlines()), end='')
    want = sorted(set(re.findall(r'^#define LOG_MID_[A-Z_]+ +"([0-9a-f]{32})"',
                                 open(ids_h).read(), re.M)))
    have = sorted(line.split()[0] for line in listing.splitlines()
                  if len(line.split()) > 1 and line.split()[1] == 'upgraded:')
    if len(want) < 9:
        print(f'not ok 0 - only {len(want)} ids in {ids_h}')
        failures += 1
    if want == have:
        print(f'ok 1 - every MESSAGE_ID has its catalog entry, and only those ({len(want)})')
    else:
        print(f'not ok 1 - ids without an entry {sorted(set(want) - set(have))}, entries '
              f'without an id {sorted(set(have) - set(want))}')
        failures += 1
    bad = [i for i in want if '@UPGRADED_ID@' not in subprocess.run(
        [journalctl, f'--root={root}', '--dump-catalog', i], capture_output=True,
        text=True).stdout]
    if bad:
        print(f'not ok 2 - entries without @UPGRADED_ID@: {bad}')
        failures += 1
    else:
        print('ok 2 - every entry names the update (@UPGRADED_ID@)')
print('1..2')
sys.exit(1 if failures else 0)
