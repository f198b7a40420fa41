#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Checks the report fixtures: every seed-*.json (a real report of schema 1) validates
against the frozen schema 1 and not against schema 2, every seed2-*.json (schema 2)
against schema 2 and not against schema 1.

usage: check-report-fixtures.py VALIDATE SCHEMA2 SCHEMA1 DIR   (exit 0 ok, 1 not)"""
import glob
import os
import subprocess
import sys

validate, schema2, schema1, d = sys.argv[1:5]


def valid(schema, path):
    return subprocess.run([sys.executable, validate, schema, path],
                          stderr=subprocess.DEVNULL).returncode == 0


bad = []
one = [p for p in glob.glob(os.path.join(d, "seed-*.json")) if "not-object" not in p]
two = glob.glob(os.path.join(d, "seed2-*.json"))
for p in one:
    if not valid(schema1, p) or valid(schema2, p):
        bad.append(p + ": not schema 1 only")
for p in two:
    if not valid(schema2, p) or valid(schema1, p):
        bad.append(p + ": not schema 2 only")
if not one or not two:
    bad.append("no fixtures found in " + d)
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
