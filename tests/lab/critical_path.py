# SPDX-License-Identifier: LGPL-2.1-or-later
"""The report's critical_path (docs/report.md) held against what the lab host's own tools say.

- New kernel: `systemd-analyze critical-chain UNIT` for the unit the report's chain ends at
  (`target`: upgraded.service, ordered after libvirtd; libvirtd.service if the daemon ran
  before libvirtd was up), run in the lab host once its boot finished
  (guest/critical-chain-new.txt, with the unit on its first line). Every link the report
  names must be the one systemd-analyze names, at the same time (+-1.5 ms: it prints
  milliseconds), down to where the two may part by design: systemd-analyze also follows a
  dependency that became active after the unit above it began starting (it cannot have held
  it up, and the report does not follow it), or two dependencies became active in the same
  millisecond (a tie). From there the comparison goes on with systemd-analyze's chain of the
  report's next link (guest/critical-chain-units/, one for every unit of the report's chain).
- Old kernel: PID 1's "Stopping"/"Stopped" entries of the old boot, read with journalctl
  (guest/unit-stops-old.json). The report must list exactly the units whose last stop ended
  at or after its cut (the reboot request), each at the journal's time; libvirtd.service
  among them (upgraded requests the kexec before libvirtd stops). upgraded.service's stop
  must have ended before libvirtd.service's began (its After=libvirtd.service: a rollback
  needs libvirtd). After a fast shutdown
  (handoff.shutdown.mode fast) there must be none, in the report and in the journal.

check(results, own) -> (lines, reasons); nothing to check (lines only) when the scenario did
not collect the files.
"""
import json
import os
import re

UNIT_RE = re.compile(r'(?P<name>\w[\w@\\.:-]*\.(?:service|target|socket|mount|device|slice|'
                     r'scope|path|timer|swap|automount))'
                     r'(?:\s+@(?P<at>[0-9.a-z ]+?))?(?:\s+\+(?P<took>[0-9.a-z ]+?))?\s*$')
SPAN_RE = re.compile(r'([0-9.]+)(min|ms|us|h|s)')
SCALE = {'h': 3600.0, 'min': 60.0, 's': 1.0, 'ms': 1e-3, 'us': 1e-6}
STOPPING = 'de5b426a63be47a7b6ac3eaac82e2f6f'
STOPPED = '9d1aaa27d60140bd96365438aad20286'
TOLERANCE_S = 0.0015


def span_s(text):
    """'1min 2.345s' -> 62.345; None for None."""
    if text is None:
        return None
    return sum(float(v) * SCALE[u] for v, u in SPAN_RE.findall(text))


def parse_analyze(text):
    """systemd-analyze's main chain, target first: [(name, at_s, took_s)]. Siblings (ties)
    are skipped: each kept line is indented deeper than the one before."""
    chain, last_indent = [], -1
    for line in text.splitlines():
        m = UNIT_RE.search(line)
        if not m or line.startswith('The time'):
            continue
        indent = m.start('name')
        if indent <= last_indent:
            continue
        last_indent = indent
        chain.append((m.group('name'), span_s(m.group('at')), span_s(m.group('took')) or 0.0))
    return chain


def compare_from(analyze, ours, base, zero):
    """Compares ours[base:] with one systemd-analyze chain (whose target is ours[base]).
    Returns (agreed, next_base or None, lines, reasons): next_base is where a divergence by
    design (a dependency active after the unit above began, or a tie) left off."""
    lines, reasons, agreed = [], [], 0
    for k, (name, at, took) in enumerate(analyze):
        i = base + k
        if i >= len(ours):
            break
        u = ours[i]
        if u['unit'] != name:
            # systemd-analyze prints its target without a start (no @): the report's own,
            # which that link agreed with by name.
            parent_start = analyze[k - 1][1] if k > 0 else None
            if k > 0 and parent_start is None:
                parent_start = ours[i - 1]['activating_ns'] / 1e9 - zero
            active = (at or 0) + took
            if parent_start is not None and active > parent_start + TOLERANCE_S:
                lines.append(f'critical chain: systemd-analyze follows {name} (active at '
                             f'{active:.3f} s, after {analyze[k - 1][0]} began at '
                             f'{parent_start:.3f} s); the report follows {u["unit"]}')
                return agreed, i, lines, reasons
            if k > 0 and abs(((u['activated_ns'] / 1e9) - zero) - active) <= TOLERANCE_S:
                lines.append(f'critical chain: a tie at link {i}: {name} and {u["unit"]}')
                return agreed, i, lines, reasons
            reasons.append(f'critical chain: link {i} is {u["unit"]} in the report, '
                           f'{name} in systemd-analyze')
            return agreed, None, lines, reasons
        took_ours = u['time_ns'] / 1e9
        at_ours = ((u['activating_ns'] if took_ours > 0 else u['activated_ns']) / 1e9) - zero
        if at is not None and (abs(at_ours - at) > TOLERANCE_S or abs(took_ours - took) > TOLERANCE_S):
            reasons.append(f'critical chain: {name} @{at_ours:.3f} +{took_ours:.3f} s in the '
                           f'report, @{at:.3f} +{took:.3f} s in systemd-analyze')
        agreed += 1
    return agreed, None, lines, reasons


def check_new(chain_text, nk, more=None):
    """chain_text: systemd-analyze for the report's target. more: {unit: text} of
    systemd-analyze for other units of the report's chain; where the two chains part by
    design, the comparison goes on from the report's next link with that unit's chain."""
    lines, reasons = [], []
    analyze = parse_analyze(chain_text)
    ours = list(reversed(nk.get('units') or []))  # target first, as systemd-analyze prints
    zero = (nk.get('userspace_ns') or 0) / 1e9
    if not analyze:
        return lines, ['critical chain: systemd-analyze printed no chain: ' +
                       chain_text.strip()[:200]]
    agreed, base, first = 0, 0, len(analyze)
    while analyze:
        n, base, l, r = compare_from(analyze, ours, base, zero)
        agreed, lines, reasons = agreed + n, lines + l, reasons + r
        if base is None or base >= len(ours):
            break
        text = (more or {}).get(ours[base]['unit'])
        analyze = parse_analyze(text) if text else None
    if agreed < min(3, first, len(ours)):
        reasons.append(f'critical chain: only {agreed} link(s) agree with systemd-analyze')
    lines.append(f'critical chain: {agreed} of {len(ours)} link(s) agree with systemd-analyze '
                 f'(its chain of {first}, and of the units where the two part), up to '
                 f'{nk.get("target")}')
    return lines, reasons


def stop_order(last, first_stopping, cut):
    """upgraded.service stopped before libvirtd.service began to stop, in the orderly
    shutdown after the reboot request."""
    up, lv = last.get('upgraded.service'), first_stopping.get('libvirtd.service')
    if lv is None:
        return []  # libvirtd's absence is reported by the caller
    if up is None or up < cut:
        return ['old-kernel stops: upgraded.service did not stop after the reboot request']
    if up > lv:
        return [f'old-kernel stops: upgraded.service stopped {(up - lv) / 1e9:.3f} s after '
                'libvirtd.service began to stop (a rollback needs libvirtd)']
    return []


def check_old(stops_path, ok, fast, cut):
    units = ok.get('units') or []
    if fast:
        # No orderly stop: systemd logs no stop of any unit after the request.
        if units:
            return [], [f'old-kernel stops: {len(units)} unit(s) stopped in order although '
                        'the shutdown was fast']
    elif not any(u['unit'] == 'libvirtd.service' for u in units):
        return [], ['old-kernel stops: libvirtd.service is not among the units stopped '
                    'after the reboot request']
    # The cut on the old kernel's clock: stopped_ns - end_ns (end_ns is on the reboot
    # request's axis, exact on the old kernel); with no unit, the report's own sample.
    if units:
        cut = units[0]['stopped_ns'] - units[0]['end_ns']
    last, first_stopping = {}, {}
    with open(stops_path) as f:
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if not e.get('UNIT'):
                continue
            t = int(e['__MONOTONIC_TIMESTAMP']) * 1000
            if e.get('MESSAGE_ID') == STOPPED:
                last[e['UNIT']] = max(t, last.get(e['UNIT'], 0))
            elif e.get('MESSAGE_ID') == STOPPING and t >= cut:
                first_stopping.setdefault(e['UNIT'], t)
    want = {u: t for u, t in last.items() if t >= cut}
    got = {u['unit']: u['stopped_ns'] for u in units}
    reasons = stop_order(last, first_stopping, cut) if not fast else []
    if set(want) != set(got):
        reasons.append('old-kernel stops: the report lists '
                       f'{sorted(set(got) - set(want))} the journal does not, and misses '
                       f'{sorted(set(want) - set(got))}')
    wrong = [u for u in got if u in want and got[u] != want[u]]
    if wrong:
        reasons.append(f'old-kernel stops: other times than the journal for {wrong}')
    if not units:
        return ['old-kernel stops: none after the reboot request (fast shutdown), as the '
                'journal says'], reasons
    slow = max(units, key=lambda u: u['time_ns'])
    return [f'old-kernel stops: {len(got)} unit(s) after the reboot request agree with the '
            f'journal; the longest {slow["unit"]} {slow["time_ns"] / 1e9:.3f} s'], reasons


def read_chain(path):
    """guest/critical-chain-new.txt: 'unit: NAME' on its first line, then systemd-analyze's
    output for NAME."""
    with open(path) as f:
        text = f.read()
    first, _, rest = text.partition('\n')
    if first.startswith('unit: '):
        return first[len('unit: '):].strip(), rest
    return None, text


def check(results, own):
    guest = os.path.join(results, 'guest')
    chain_path = os.path.join(guest, 'critical-chain-new.txt')
    more_dir = os.path.join(guest, 'critical-chain-units')
    stops_path = os.path.join(guest, 'unit-stops-old.json')
    if not os.path.exists(chain_path):
        return [], []
    reports = [r for r in own.values() if isinstance(r, dict) and r.get('result') == 'success'
               and r.get('booted_kernel')]
    if not reports:
        return [], ['critical path: no successful report to check']
    cp = reports[-1].get('critical_path') or {}
    missing = {m.get('figure'): m.get('reason') for m in reports[-1].get('missing', [])}
    lines, reasons = [], []
    if not cp.get('new_kernel'):
        reasons.append('critical path: the report has no new-kernel chain: ' +
                       str(missing.get('critical_path_new')))
    else:
        unit, text = read_chain(chain_path)
        if unit != cp['new_kernel'].get('target'):
            reasons.append(f'critical chain: the report\'s ends at '
                           f'{cp["new_kernel"].get("target")}, systemd-analyze was asked for '
                           f'{unit}')
        else:
            more = {}
            for name in os.listdir(more_dir) if os.path.isdir(more_dir) else []:
                u, t = read_chain(os.path.join(more_dir, name))
                if u:
                    more[u] = t
            l, r = check_new(text, cp['new_kernel'], more)
            lines, reasons = lines + l, reasons + r
    if not cp.get('old_kernel'):
        reasons.append('critical path: the report has no old-kernel stops: ' +
                       str(missing.get('critical_path_old')))
    elif os.path.exists(stops_path):
        rep = reports[-1]
        fast = ((rep.get('handoff') or {}).get('shutdown') or {}).get('mode') == 'fast'
        # Without a unit to derive the cut from: the handoff stamp, right before the request.
        stamp = [s for s in rep.get('stamps') or [] if s.get('name') == 'handoff']
        cut = stamp[0]['monotonic_ns'] if stamp else 0
        l, r = check_old(stops_path, cp['old_kernel'], fast, cut)
        lines, reasons = lines + l, reasons + r
    return lines, reasons
