#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Validates report files against docs/report.schema.json (schema 2: what the daemon
writes; "schema": 1 is refused) or, for the schema-1 fixtures, docs/report-1.schema.json.

usage: validate-report.py SCHEMA REPORT...   (exit 0 valid, 1 invalid, 2 usage)"""
import json
import os
import sys

import warnings

import jsonschema

# RefResolver is what Debian 12's jsonschema offers; newer ones only deprecate it.
warnings.filterwarnings("ignore", category=DeprecationWarning)

if len(sys.argv) < 3:
    print(__doc__, file=sys.stderr)
    sys.exit(2)
with open(sys.argv[1]) as f:
    schema = json.load(f)
jsonschema.Draft202012Validator.check_schema(schema)
# Schemas the report references by $id (docs/vm-results.schema.json) live next to it.
store = {}
for name in ("vm-results.schema.json",):
    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), name)) as f:
            sub = json.load(f)
        store[sub["$id"]] = sub
    except FileNotFoundError:
        pass
validator = jsonschema.Draft202012Validator(
    schema, resolver=jsonschema.RefResolver.from_schema(schema, store=store))
bad = 0
for path in sys.argv[2:]:
    with open(path) as f:
        report = json.load(f)
    for error in validator.iter_errors(report):
        print(f"{path}: {'/'.join(map(str, error.path))}: {error.message}", file=sys.stderr)
        bad += 1
sys.exit(1 if bad else 0)
