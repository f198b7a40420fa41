#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Keeps the man pages true to the programs.

  check-man.py help UPGRADECTL UPGRADED MANDIR
      every verb, option and exit status `upgradectl --help` (and each `upgradectl
      VERB --help`) and `upgraded --help` list is documented in upgradectl(1) /
      upgraded(8), and every one those pages document is one the program has.
  check-man.py settings POLICY_SETTINGS_C MANDIR
      every section and key of the parser's settings table is in upgraded.conf(5),
      and every one the page documents is in the table.
  check-man.py render PAGE...
      each built page renders with man -l, without a warning.

The lists are read from the built programs and from the sources at test time.
"""
import os
import re
import subprocess
import sys

LONG_OPT = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*)")
SHORT_OPT_LINE = re.compile(r"^\s*(-[a-zA-Z])[, ]+--")

failures = []


def fail(msg):
    failures.append(msg)


def run_help(argv):
    p = subprocess.run(argv + ["--help"], capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout


def help_options(text):
    """Long options anywhere in a help text, short ones where an option line names them."""
    opts = {"--" + m for m in LONG_OPT.findall(text)}
    for line in text.splitlines():
        m = SHORT_OPT_LINE.match(line)
        if m:
            opts.add(m.group(1))
    return opts


def help_section(text, name):
    """The lines of one upper-case section of a help text."""
    out, inside = [], False
    for line in text.splitlines():
        m = re.match(r"^([A-Z][A-Z ]*[A-Z])\b", line)  # "VERBS (without one: status)"
        if m:
            inside = m.group(1) == name
            continue
        if inside:
            out.append(line)
    return out


def scd_sections(path):
    """{heading: [lines]} of an scdoc page."""
    sections, cur = {}, None
    with open(path, encoding="utf-8") as f:
        for line in f.read().splitlines():
            if line.startswith("# "):
                cur = line[2:].strip()
                sections[cur] = []
            elif cur is not None:
                sections[cur].append(line)
    return sections


def scd_item_options(lines):
    """Options named by the item headings (unindented lines starting with *-)."""
    opts = set()
    for line in lines:
        if not line.startswith("*-"):
            continue
        for word in re.findall(r"\*(-[a-zA-Z]|--[a-z][a-z0-9-]*)=?\*", line):
            opts.add(word)
    return opts


def scd_all_long_options(path):
    with open(path, encoding="utf-8") as f:
        return {"--" + m for m in LONG_OPT.findall(f.read())}


def compare(what, documented, listed, doc_name, listed_name):
    for x in sorted(listed - documented):
        fail(f"{what} {x}: listed by {listed_name} but not documented in {doc_name}")
    for x in sorted(documented - listed):
        fail(f"{what} {x}: documented in {doc_name} but not listed by {listed_name}")


def program_help(exe, marker):
    """`exe --help`, or None (and a failure) when it fails or lacks marker."""
    rc, text = run_help([exe])
    if rc != 0 or marker not in text:
        fail(f"{exe} --help failed ({rc})")
        return None
    return text


def check_options(documented, listed, page, man_name, prog):
    """Both ways; and no long option anywhere in the page that prog does not list."""
    compare("option", documented, listed, f"{man_name} OPTIONS", f"{prog} --help")
    for o in sorted(scd_all_long_options(page) - listed):
        fail(f"option {o}: mentioned in {man_name} but unknown to {prog} --help")


def check_upgradectl(exe, page):
    top = program_help(exe, "VERBS")
    if top is None:
        return
    help_verbs = set()
    for line in help_section(top, "VERBS"):
        m = re.match(r"^    ([a-z][a-z-]*)\b", line)
        if m:
            help_verbs.add(m.group(1))
    if not help_verbs:
        fail("upgradectl --help lists no verb")

    sections = scd_sections(page)
    man_verbs = set()
    for line in sections.get("COMMANDS", []):
        m = re.match(r"^\*([a-z][a-z-]*)\*", line)
        if m:
            man_verbs.add(m.group(1))
    for v in sorted(help_verbs - man_verbs):
        fail(f"verb {v}: listed by upgradectl --help but not documented in upgradectl(1)")
    # A documented verb must be one upgradectl runs: its own --help answers.
    opts = help_options(top)
    for v in sorted(help_verbs | man_verbs):
        rc, text = run_help([exe, v])
        if rc != 0 or f"upgradectl {v} -" not in text:
            fail(f"verb {v}: documented in upgradectl(1) but `upgradectl {v} --help` "
                 f"does not describe it (exit {rc})")
            continue
        opts |= help_options(text)

    check_options(scd_item_options(sections.get("OPTIONS", [])), opts, page,
                  "upgradectl(1)", "upgradectl")

    help_codes = {m.group(1) for line in help_section(top, "EXIT STATUS")
                  if (m := re.match(r"^\s+(\d+)\s\s", line))}
    man_codes = {m.group(1) for line in sections.get("EXIT STATUS", [])
                 if (m := re.match(r"^\|\s+(\d+)$", line))}
    if not help_codes:
        fail("upgradectl --help lists no exit status")
    compare("exit status", man_codes, help_codes, "upgradectl(1) EXIT STATUS",
            "upgradectl --help")


def check_upgraded(exe, page):
    text = program_help(exe, "--root")
    if text is None:
        return
    sections = scd_sections(page)
    documented = scd_item_options(sections.get("OPTIONS", []))
    documented |= scd_item_options(sections.get("TEST OPTIONS", []))
    check_options(documented, help_options(text), page, "upgraded(8)", "upgraded")


def parser_settings(source):
    """{(section, key)} of the settings table; [VMRule:NAME] keys have section NULL."""
    with open(source, encoding="utf-8") as f:
        text = f.read()
    table = re.search(r"static const Setting settings\[\] = \{(.*?)\n\};", text, re.S)
    known = re.search(r"known_sections\[\] = \{([^}]*)\}", text)
    if not table or not known:
        fail(f"{source}: settings table or known_sections not found")
        return set(), set()
    keys = set()
    for sec, key in re.findall(r'\{\s*(NULL|"[A-Za-z]+")\s*,\s*"([A-Za-z]+)"', table.group(1)):
        keys.add(("VMRule:NAME" if sec == "NULL" else sec.strip('"'), key))
    sections = set(re.findall(r'"([A-Za-z]+)"', known.group(1))) | {"VMRule:NAME"}
    return sections, keys


def check_settings(source, page):
    sections, keys = parser_settings(source)
    if not keys:
        fail(f"{source}: no setting found")
    man_sections, man_keys = set(), set()
    for heading, lines in scd_sections(page).items():
        m = re.match(r"^\[([A-Za-z]+(?::NAME)?)\] SECTIONS?$", heading)
        if not m:
            continue
        man_sections.add(m.group(1))
        for line in lines:
            k = re.match(r"^\*([A-Za-z]+)=\*$", line)
            if k:
                man_keys.add((m.group(1), k.group(1)))
    compare("section", man_sections, sections, "upgraded.conf(5)", "the parser")
    compare("key", {f"[{s}] {k}=" for s, k in man_keys}, {f"[{s}] {k}=" for s, k in keys},
            "upgraded.conf(5)", "the parser")


def check_render(pages):
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8")
    for page in pages:
        p = subprocess.run(["man", "--warnings", "-E", "UTF-8", "-l", page],
                           capture_output=True, text=True, env=env, timeout=60)
        name = os.path.basename(page)
        if p.returncode != 0 or p.stderr.strip():
            fail(f"{name}: man -l failed ({p.returncode}): {p.stderr.strip()}")
        elif "NAME" not in p.stdout or "SEE ALSO" not in p.stdout:
            fail(f"{name}: rendered page lacks NAME or SEE ALSO")


def main(argv):
    if len(argv) >= 5 and argv[1] == "help":
        check_upgradectl(argv[2], os.path.join(argv[4], "upgradectl.1.scd"))
        check_upgraded(argv[3], os.path.join(argv[4], "upgraded.8.scd"))
    elif len(argv) >= 4 and argv[1] == "settings":
        check_settings(argv[2], os.path.join(argv[3], "upgraded.conf.5.scd"))
    elif len(argv) >= 3 and argv[1] == "render":
        check_render(argv[2:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for f in failures:
        print(f"FAIL: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
