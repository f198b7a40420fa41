#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Checks the Grafana dashboard in contrib/grafana/ against what the daemon exports.

- The file is well-formed JSON with a title, a uid, unique panel ids and panels on
  Grafana's 24-column grid, every panel (but rows) with at least one query.
- Every metric name in every PromQL expression (panels and template variables) is one the
  daemon writes: the "upgraded_*" string literals of daemon/metrics/metrics.c, each of which
  docs/fleet.md documents.
- The dashboard shows what it promises: the fleet's VM downtime distribution, each host's
  last update, the failures.
- With promtool (Debian's prometheus) every expression parses: they are checked as
  recording rules by `promtool check rules`.

usage: check-grafana-dashboard.py DASHBOARD METRICS_C FLEET_MD"""
import json
import re
import shutil
import subprocess
import sys
import tempfile

# Operators, and the aggregations (written "sum by (x) (...)" as well as "sum(...)").
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and",
            "or", "unless", "offset", "inf", "nan", "sum", "min", "max", "avg", "group",
            "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile"}


def exported(metrics_c, fleet_md):
    names = set(re.findall(r'"(upgraded_[a-z_]+)"', open(metrics_c).read()))
    doc = open(fleet_md).read()
    undocumented = sorted(n for n in names if "`%s`" % n not in doc)
    return names, undocumented


def metric_names(expr):
    """The metric names an expression selects: identifiers that are not functions,
    keywords, label names or inside strings."""
    e = re.sub(r'"(\\.|[^"\\])*"', '""', expr)           # strings
    e = re.sub(r"\{[^}]*\}", "", e)                        # label matchers
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", r"\1", e)
    e = re.sub(r"\[[^\]]*\]", "", e)                       # range/subquery durations
    names = []
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        word = m.group(0)
        if e[m.end():].lstrip().startswith("(") or word.lower() in KEYWORDS:
            continue                                       # a function or an operator
        if m.start() > 0 and (e[m.start() - 1].isdigit() or e[m.start() - 1] in "$."):
            continue                                       # 5m, 1e3, $instance
        names.append(word)
    return names


def expressions(dash):
    for p in dash["panels"]:
        for t in p.get("targets", []):
            yield p["title"], t.get("expr", "")
    for v in dash.get("templating", {}).get("list", []):
        q = v.get("query")
        if isinstance(q, dict):
            q = q.get("query")
        if v.get("type") == "query" and q:
            m = re.fullmatch(r"label_values\((.*),\s*\w+\)", q)
            yield "variable " + v["name"], m.group(1) if m else q


def main():
    dash_path, metrics_c, fleet_md = sys.argv[1:4]
    dash = json.load(open(dash_path))  # raises on malformed JSON
    errors = []
    names, undocumented = exported(metrics_c, fleet_md)
    if len(names) < 10:
        errors.append("found only %d exported names in %s" % (len(names), metrics_c))
    errors += ["%s is exported but not documented in docs/fleet.md" % n for n in undocumented]
    for k in ("title", "uid", "panels", "schemaVersion"):
        if k not in dash:
            errors.append("dashboard has no %r" % k)

    ids = [p.get("id") for p in dash["panels"]]
    if len(ids) != len(set(ids)) or None in ids:
        errors.append("panel ids are missing or repeated: %s" % ids)
    for p in dash["panels"]:
        g = p.get("gridPos", {})
        if not (0 <= g.get("x", -1) and g.get("w", 0) > 0 and g["x"] + g["w"] <= 24 and g.get("h", 0) > 0):
            errors.append("panel %r: bad gridPos %s" % (p.get("title"), g))
        if p.get("type") != "row" and not [t for t in p.get("targets", []) if t.get("expr")]:
            errors.append("panel %r has no query" % p.get("title"))

    used = set()
    exprs = list(expressions(dash))
    for title, expr in exprs:
        found = metric_names(expr)
        if not found:
            errors.append("%s: no metric in %r" % (title, expr))
        for n in found:
            used.add(n)
            if n not in names:
                errors.append("%s: %r names %s, which the daemon does not export" % (title, expr, n))

    def shown(kind, metric):
        return any(p.get("type") == kind and any(metric in t.get("expr", "") for t in p.get("targets", []))
                   for p in dash["panels"])
    if not shown("histogram", "upgraded_last_update_vm_downtime_seconds"):
        errors.append("no histogram of the fleet's VM downtime")
    if not shown("table", "upgraded_last_update_info"):
        errors.append("no table of each host's last update")
    if not any("upgraded_last_update_success" in e and "== 0" in e for _, e in exprs) or \
            not shown("table", 'result="failed"'):
        errors.append("the failures are not shown")

    promtool = shutil.which("promtool")
    if promtool:
        with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
            rules = [{"record": "dashboard:expr_%d" % i,
                      "expr": e.replace("$instance", ".*")} for i, (_, e) in enumerate(exprs)]
            json.dump({"groups": [{"name": "dashboard", "rules": rules}]}, f)  # JSON is YAML
            f.flush()
            r = subprocess.run([promtool, "check", "rules", f.name], capture_output=True, text=True)
            if r.returncode != 0:
                errors.append("promtool check rules: " + r.stdout + r.stderr)
            else:
                print("# promtool parsed all %d expressions" % len(rules))
    else:
        print("# promtool missing (tools/install-deps): PromQL syntax not checked")

    print("# %d panels, %d expressions, metrics used: %s" % (len(dash["panels"]), len(exprs), " ".join(sorted(used))))
    for e in errors:
        print("error:", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
