# SPDX-License-Identifier: LGPL-2.1-or-later
"""The report's purgatory.relocation (docs/measurement.md, "The relocation slice") held
against the external clock.

The report puts the old kernel's "Starting new kernel" line on its axis from the old
kernel's shutdown dump in pstore (the line's printk time against upgraded's reboot-request
mark in the same dump), and purgatory's entry stamp from the TSC. The console carries both
kernel lines at the moment they are printed, and the runner timestamps them on arrival:
  start (reboot request -> "Starting new kernel") must equal
    kexec-start - upgraded-reboot-request
  entry (reboot request -> purgatory's entry) must lie in
    [kexec-start, new-kernel banner] - upgraded-reboot-request
  the slice (entry - start) must be positive,
each within the report's uncertainty plus the console's slack.

check(own, tl, slack_s) -> (lines, reasons).
"""


def _span(tl, a, b):
    return None if tl.get(a) is None or tl.get(b) is None else tl[b] - tl[a]


def _one(name, rep, tl, slack_s):
    rel = (rep.get('purgatory') or {}).get('relocation') if isinstance(rep, dict) else None
    if not isinstance(rel, dict):
        why = [m.get('reason') for m in (rep or {}).get('missing', [])
               if m.get('figure') == 'relocation']
        return [f'upgraded report {name}: no relocation slice {why}'], \
            [f'upgraded report {name}: no purgatory.relocation ({why})']
    start, entry = rel['start_ns'] / 1e9, rel['entry_ns'] / 1e9
    ns, unc = rel['ns'] / 1e9, rel['uncertainty_ns'] / 1e9
    kind = 'estimated' if rel.get('estimated') else 'measured'
    ext_start = _span(tl, 'upgraded_reboot_request', 'kexec_start')
    ext_banner = _span(tl, 'upgraded_reboot_request', 'new_kernel_banner')
    lines = [f'upgraded relocation: {ns * 1e3:.1f} ms +- {unc * 1e3:.1f} ms ({kind}, '
             f'from {rel.get("source")})']
    reasons = []
    if ext_start is None or ext_banner is None:
        reasons.append(f'upgraded report {name}: relocation not comparable (the reboot-request '
                       'mark, kexec-start or the new banner is missing from the console)')
        return lines, reasons
    tol = unc + slack_s
    ok_start = abs(start - ext_start) <= tol
    ok_entry = ext_start - tol <= entry <= ext_banner + tol
    lines.append(f'upgraded relocation start: {start:.3f} s after the reboot request; external '
                 f'kexec-start {ext_start:.3f} s (+- {tol:.3f} s): '
                 f'{"agrees" if ok_start else "DISAGREES"}')
    lines.append(f'upgraded relocation end (purgatory entry): {entry:.3f} s; external '
                 f'[kexec-start, new banner] [{ext_start:.3f}, {ext_banner:.3f}] s '
                 f'(+- {tol:.3f} s): {"agrees" if ok_entry else "DISAGREES"}')
    if not ok_start:
        reasons.append(f'upgraded report {name}: "Starting new kernel" at {start:.3f} s, the '
                       f'console saw it at {ext_start:.3f} s (+- {tol:.3f} s)')
    if not ok_entry:
        reasons.append(f'upgraded report {name}: purgatory entry at {entry:.3f} s is outside '
                       f'[{ext_start:.3f}, {ext_banner:.3f}] s (+- {tol:.3f} s)')
    if ns <= 0:
        reasons.append(f'upgraded report {name}: relocation slice {ns * 1e3:.3f} ms is not '
                       'positive')
    return lines, reasons


def check(own, tl, slack_s):
    lines, reasons = [], []
    if not own:
        reasons.append('no upgraded report to check the relocation slice in')
    for name, rep in own.items():
        one_lines, one_reasons = _one(name, rep, tl, slack_s)
        lines += one_lines
        reasons += one_reasons
    return lines, reasons
