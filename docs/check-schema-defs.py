#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Checks that report.schema.json carries the $defs of measurement.schema.json
unchanged (but bootlog, which schema 2 carries in nanoseconds as report_bootlog)
and those of vm-results.schema.json it still uses under a "vm_" prefix (with their
$refs rewritten), so the three schemas cannot drift apart.

usage: check-schema-defs.py REPORT MEASUREMENT VM_RESULTS   (exit 0 in sync, 1 not)"""
import json
import sys


def prefixed(x):
    if isinstance(x, dict):
        return {k: ('#/$defs/vm_' + v.split('/')[-1] if k == '$ref' else prefixed(v))
                for k, v in x.items()}
    if isinstance(x, list):
        return [prefixed(i) for i in x]
    return x


report, meas, vms = (json.load(open(p)) for p in sys.argv[1:4])
defs = report['$defs']
# Schema 2 re-types these (units: durations and clock readings in ns).
RETYPED = {'bootlog'}
bad = [k for k, v in meas['$defs'].items() if k not in RETYPED and defs.get(k) != v]
bad += ['vm_' + k for k, v in vms['$defs'].items()
        if 'vm_' + k in defs and defs['vm_' + k] != prefixed(v)]
for k in bad:
    print(f"report.schema.json: $defs/{k} differs from its source schema", file=sys.stderr)
sys.exit(1 if bad else 0)
