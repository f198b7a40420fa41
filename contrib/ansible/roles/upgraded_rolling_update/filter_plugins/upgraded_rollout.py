# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Filters of the upgraded_rolling_update role: what to do on a host given the daemon's
# Describe() JSON as `upgradectl describe --json` prints it, snake_case keys (stage plan),
# whether one finished update passes the gate (verdict), and the fleet summary over the hosts'
# records. Pure functions of documents the daemon publishes (docs/dbus-api.md Describe(),
# docs/report.md), so they run on the controller.

import math


def _get(describe, key, old_key):
    """describe[key] as `upgradectl describe --json` prints it (snake_case), or under the D-Bus
    name an older upgradectl printed (old_key), so that a fleet of mixed versions works."""
    return describe[key] if key in describe else describe.get(old_key)


def _updates(describe):
    return _get(describe, "updates", "Updates") or []


def upgraded_stage_plan(describe, kernel, initrd="", cmdline=None):
    """What the stage step must do on a host.

    Returns {"action", "id", "detail"}: action is "up-to-date" (the last finished update of
    this kernel is the running one), "staged" (this kernel is already staged: nothing to do),
    "stage" (the daemon is idle), "conflict" (another update is staged) or "busy" (an update
    is committing or completing)."""
    initrd = initrd or None
    want_reuse = cmdline is None or cmdline == ""
    running = _get(describe, "running_kernel", "RunningKernel")
    active = None
    last_done = None
    for u in _updates(describe):
        if u.get("state") in ("staged", "committing", "completing"):
            active = u
        elif u.get("state") == "done":
            last_done = u
    if active is not None:
        if active["state"] != "staged":
            return {"action": "busy", "id": active["id"],
                    "detail": "update %s is %s" % (active["id"], active["state"])}
        same = ((active.get("kernel") or {}).get("path") == kernel
                and ((active.get("initrd") or {}).get("path") if active.get("initrd") else None) == initrd
                and (bool(active.get("reuse_cmdline")) if want_reuse
                     else (not active.get("reuse_cmdline") and active.get("cmdline") == cmdline)))
        if same:
            return {"action": "staged", "id": active["id"],
                    "detail": "update %s already stages %s" % (active["id"], kernel)}
        return {"action": "conflict", "id": active["id"],
                "detail": "update %s stages %s, not %s" % (
                    active["id"], (active.get("kernel") or {}).get("path"), kernel)}
    if (last_done is not None and (last_done.get("kernel") or {}).get("path") == kernel
            and last_done.get("booted_kernel") == running):
        return {"action": "up-to-date", "id": last_done["id"],
                "detail": "running %s from update %s" % (running, last_done["id"])}
    return {"action": "stage", "id": None, "detail": "idle"}


def _schema1_vm_downtimes(report):
    """Schema 1: the cross-kexec estimate (vm_downtime[].downtime_ns) when the report has
    it, else libvirt's wall-clock pause -> resume (vms[].downtime, microseconds)."""
    est = {d.get("name"): d for d in report.get("vm_downtime") or []}
    out = []
    for vm in report.get("vms") or []:
        name = vm.get("name")
        d = est.get(name) or {}
        if d.get("downtime_ns") is not None:
            out.append({"vm": name, "ns": int(d["downtime_ns"]),
                        "uncertainty_ns": d.get("uncertainty_ns"),
                        "source": d.get("downtime_source") or "estimate"})
            continue
        us = vm.get("downtime")
        if isinstance(us, (int, float)) and not isinstance(us, bool):
            out.append({"vm": name, "ns": int(us) * 1000, "uncertainty_ns": None,
                        "source": "libvirt-wallclock"})
        else:
            out.append({"vm": name, "ns": None, "uncertainty_ns": None, "source": None})
    return out


def upgraded_vm_downtimes(report):
    """Each VM's downtime in ns with its source, from one report (docs/report.md).

    Schema 2: vms[].downtime {ns, source, uncertainty_ns}, the report's one figure per VM
    (the cross-kexec estimate when computed, else libvirt's wall clock). Schema 1 reports
    (written before) are read with the same rule. ns None: no figure."""
    if report.get("schema", 1) == 1:
        return _schema1_vm_downtimes(report)
    out = []
    for vm in report.get("vms") or []:
        d = vm.get("downtime") or {}
        ns = d.get("ns")
        out.append({"vm": vm.get("name"),
                    "ns": int(ns) if isinstance(ns, int) and not isinstance(ns, bool) else None,
                    "uncertainty_ns": d.get("uncertainty_ns"), "source": d.get("source")})
    return out


def _secs(ns):
    return "%.3f s" % (ns / 1e9)


def upgraded_verdict(report, state, max_vm_downtime_s, unknown_downtime_fails=True):
    """Whether one host's finished update passes the gate.

    Fails when the update did not end "done", the report is not a success, the host did not
    boot the staged kernel, a VM's downtime is unknown (unless allowed) or the worst VM
    downtime exceeds max_vm_downtime_s (None: no limit)."""
    report = report or {}
    vms = upgraded_vm_downtimes(report)
    known = [v for v in vms if v["ns"] is not None]
    worst = max(known, key=lambda v: v["ns"]) if known else None
    v = {"ok": True, "reason": None, "state": state, "id": report.get("id"),
         "result": report.get("result"), "vms": vms,
         "worst_ns": worst["ns"] if worst else None,
         "worst_vm": worst["vm"] if worst else None,
         "booted_kernel": report.get("booted_kernel"),
         "new_kernel": (report.get("new_kernel") or {}).get("version")}

    def fail(reason):
        v["ok"] = False
        v["reason"] = reason
        return v

    if state != "done":
        why = report.get("reason") or "no report"
        return fail("update %s ended %s: %s" % (report.get("id") or "?", state, why))
    if report.get("result") != "success":
        return fail("report %s: result %s: %s" % (report.get("id"), report.get("result"),
                                                   report.get("reason")))
    if v["booted_kernel"] != v["new_kernel"]:
        return fail("booted kernel %s, staged %s" % (v["booted_kernel"], v["new_kernel"]))
    unknown = [x["vm"] for x in vms if x["ns"] is None]
    if unknown and unknown_downtime_fails:
        return fail("VM downtime unknown for %s (see the report's missing)" % ", ".join(unknown))
    if max_vm_downtime_s not in (None, "") and worst is not None:
        limit_ns = int(round(float(max_vm_downtime_s) * 1e9))
        if worst["ns"] > limit_ns:
            return fail("worst VM downtime %s (VM %s, %s) exceeds the gate of %s" % (
                _secs(worst["ns"]), worst["vm"], worst["source"], _secs(limit_ns)))
    return v


def upgraded_percentile(values, p):
    """Nearest-rank percentile (the smallest value with at least p% of the values at or
    below it); None for no values."""
    vals = sorted(values)
    if not vals:
        return None
    rank = max(1, int(math.ceil(p / 100.0 * len(vals))))
    return vals[rank - 1]


def _host_line(name, rec):
    verdict = rec.get("verdict") or {}
    status = rec.get("status")
    if status == "up-to-date":
        return "  %-16s up to date (%s)" % (name, rec.get("detail"))
    if status == "check":
        return "  %-16s check mode: %s" % (name, verdict.get("note") or (
            "the policy would allow the commit" if verdict.get("ok") else verdict.get("reason")))
    worst = verdict.get("worst_ns")
    w = "worst VM downtime %s (%s)" % (_secs(worst), verdict.get("worst_vm")) \
        if worst is not None else "worst VM downtime n/a"
    line = "  %-16s %-6s update %s, %s" % (name, "ok" if verdict.get("ok") else "FAILED",
                                          verdict.get("id") or "-", w)
    if not verdict.get("ok"):
        line += "\n  %-16s why: %s" % ("", verdict.get("reason"))
    return line


def _batch_line(number, batch, records):
    downs = []
    bad = []
    worst = None
    for h in batch:
        rec = records.get(h) or {}
        verdict = rec.get("verdict") or {}
        if not verdict.get("ok"):
            bad.append(h)
        downs += [x["ns"] for x in verdict.get("vms") or [] if x.get("ns") is not None]
        if verdict.get("worst_ns") is not None and (worst is None or verdict["worst_ns"] > worst[1]):
            worst = (h, verdict["worst_ns"])
    if downs:
        pct = "VM downtime p50 %s, p90 %s, max %s over %d VM(s)" % (
            _secs(upgraded_percentile(downs, 50)), _secs(upgraded_percentile(downs, 90)),
            _secs(max(downs)), len(downs))
    else:
        pct = "no VM downtime"
    return "batch %d: %s: %s; worst VM downtime %s; %s" % (
        number, " ".join(batch), "FAILED (%s)" % " ".join(bad) if bad else "ok",
        "%s on %s" % (_secs(worst[1]), worst[0]) if worst else "n/a", pct), bad


def upgraded_fleet_summary(hostvars, all_hosts, kernel=""):
    """The fleet summary as text, from every host's upgraded_record.

    Per batch (in order): its hosts, its result, its worst VM downtime and the p50/p90/max
    (nearest rank) over every VM of the batch, then one line per host; then the failed
    hosts and why, and the hosts that never committed."""
    records = {}
    for h in all_hosts:
        rec = hostvars[h].get("upgraded_record") if h in hostvars else None
        if rec:
            records[h] = rec
    batches = {}
    for h, rec in records.items():
        batches.setdefault(int(rec.get("batch") or 0), rec.get("batch_hosts") or [h])
    lines = ["upgraded rolling update%s: %d host(s), %d batch(es) run" % (
        " to " + kernel if kernel else "", len(all_hosts), len(batches))]
    failed = []
    seen = set()
    for number in sorted(batches):
        batch = batches[number]
        line, bad = _batch_line(number, batch, records)
        lines.append(line)
        for h in batch:
            seen.add(h)
            rec = records.get(h)
            if rec is None:
                lines.append("  %-16s no result (the host did not finish its step)" % h)
                failed.append((h, "no result"))
                continue
            lines.append(_host_line(h, rec))
            if h in bad:
                failed.append((h, (rec.get("verdict") or {}).get("reason")))
    pending = [h for h in all_hosts if h not in seen]
    for h, why in failed:
        lines.append("failed: %s: %s" % (h, why))
    if pending:
        lines.append("not committed%s: %s" % (" (rollout stopped)" if failed else "",
                                               " ".join(pending)))
    lines.append("result: %s" % ("STOPPED, %d host(s) failed" % len(failed) if failed
                                 else "ok" if not pending else "in progress"))
    return "\n".join(lines)


class FilterModule(object):
    def filters(self):
        return {
            "upgraded_stage_plan": upgraded_stage_plan,
            "upgraded_vm_downtimes": upgraded_vm_downtimes,
            "upgraded_verdict": upgraded_verdict,
            "upgraded_percentile": upgraded_percentile,
            "upgraded_fleet_summary": upgraded_fleet_summary,
        }
