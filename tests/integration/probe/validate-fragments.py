#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Runs the probe integration test with --dump and validates every JSON fragment
it wrote against docs/measurement.schema.json (the $defs the report schema
includes). Exit 77 (skip) when the test itself skips (not root)."""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import jsonschema

binary, schema_path = sys.argv[1], sys.argv[2]
schema = json.loads(Path(schema_path).read_text())
jsonschema.Draft202012Validator.check_schema(schema)

# fragment file prefix -> $defs entry
kinds = {'probe-': 'probe', 'timebase-': 'timebase', 'bootlog': 'bootlog'}
expected = {'probe-available', 'probe-disabled', 'probe-no-btf', 'probe-load-failed',
            'timebase-tsc', 'timebase-realtime', 'timebase-none', 'bootlog'}

with tempfile.TemporaryDirectory() as d:
    r = subprocess.run([binary, '--dump', d], stdout=subprocess.PIPE, text=True)
    if 'no TSC timebase fragment' in r.stdout:
        # A machine whose kernel distrusts its TSC (tsc=unstable): nothing to write.
        print('this machine distrusts its TSC: no timebase-tsc fragment expected')
        expected.discard('timebase-tsc')
    if r.returncode == 77:
        print('skipped: the probe integration test needs root')
        sys.exit(77)
    if r.returncode != 0:
        sys.exit(f'{binary} failed with {r.returncode}')
    files = {p.stem: p for p in Path(d).glob('*.json')}
    missing = expected - files.keys()
    if missing:
        sys.exit(f'fragments not written: {sorted(missing)}')
    failed = 0
    for stem, path in sorted(files.items()):
        kind = next(v for k, v in kinds.items() if stem.startswith(k))
        sub = dict(schema, **{'$ref': f'#/$defs/{kind}'})
        try:
            jsonschema.validate(json.loads(path.read_text()), sub,
                                cls=jsonschema.Draft202012Validator)
            print(f'{stem}: valid {kind}')
        except jsonschema.ValidationError as e:
            print(f'{stem}: INVALID {kind}: {e.message} at {list(e.absolute_path)}')
            failed += 1
    # and the schema must refuse what the code never writes
    bad = {'available': True, 'clock': 'CLOCK_MONOTONIC', 'marks_ns': {}, 'vms': []}
    try:
        jsonschema.validate(bad, dict(schema, **{'$ref': '#/$defs/probe'}),
                            cls=jsonschema.Draft202012Validator)
        print('schema accepts an available probe without event counters')
        failed += 1
    except jsonschema.ValidationError:
        pass
    sys.exit(1 if failed else 0)
