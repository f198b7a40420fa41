#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The rolling update role's decisions (contrib/ansible/roles/upgraded_rolling_update/
# filter_plugins/upgraded_rollout.py) on documents shaped like Describe() and the report: the
# stage plan, the gate's edges, the downtime's source, nearest-rank percentiles and the
# summary of a stopped rollout. The fleet-ansible integration test runs them inside Ansible.
#
# usage: test-ansible-filters.py FILTER_PLUGIN_DIR

import sys
import unittest

sys.path.insert(0, sys.argv.pop(1))
import upgraded_rollout as f  # noqa: E402


def update(uid, state, kernel="/boot/k", initrd=None, reuse=True, cmdline="", booted=None):
    return {"id": uid, "state": state, "kernel": {"path": kernel},
            "initrd": {"path": initrd} if initrd else None, "reuse_cmdline": reuse,
            "cmdline": cmdline, "booted_kernel": booted}


def report1(vms, est=None, result="success", booted="6.1", new="6.1"):
    """Schema 1: libvirt's figure in vms[] (us), the estimate in vm_downtime[]."""
    return {"schema": 1, "id": "00000000000000aa", "result": result,
            "reason": None if result == "success" else "x",
            "booted_kernel": booted, "new_kernel": {"version": new},
            "vms": [{"name": n, "downtime": us} for n, us in vms],
            "vm_downtime": [{"name": n, "downtime_ns": ns, "downtime_source": "probe",
                             "uncertainty_ns": 1000} for n, ns in (est or [])]}


def report(vms, est=None, result="success", booted="6.1", new="6.1"):
    """Schema 2 (what the daemon writes): one downtime per VM, chosen as the daemon does."""
    r = report1(vms, est, result, booted, new)
    e = {n: ns for n, ns in (est or [])}
    r["schema"] = 2
    del r["vm_downtime"]
    r["vms"] = [{"name": n, "downtime": (
        {"ns": e[n], "source": "probe", "uncertainty_ns": 1000} if e.get(n) is not None
        else {"ns": us * 1000, "source": "libvirt-wallclock", "uncertainty_ns": None}
        if us is not None else {"ns": None, "source": None, "uncertainty_ns": None})}
        for n, us in vms]
    return r


class StagePlan(unittest.TestCase):
    def test_idle_stages(self):
        self.assertEqual(f.upgraded_stage_plan({"updates": []}, "/boot/k")["action"], "stage")

    def test_same_update_is_not_staged_twice(self):
        d = {"updates": [update("a", "staged", initrd="/boot/i")]}
        self.assertEqual(f.upgraded_stage_plan(d, "/boot/k", "/boot/i")["action"], "staged")

    def test_other_initrd_or_cmdline_conflicts(self):
        d = {"updates": [update("a", "staged", initrd="/boot/i")]}
        self.assertEqual(f.upgraded_stage_plan(d, "/boot/k")["action"], "conflict")
        self.assertEqual(f.upgraded_stage_plan(d, "/boot/k", "/boot/i", "ro")["action"], "conflict")

    def test_in_flight_is_busy(self):
        d = {"updates": [update("a", "committing")]}
        self.assertEqual(f.upgraded_stage_plan(d, "/boot/k")["action"], "busy")

    def test_running_the_kernel_is_up_to_date(self):
        d = {"running_kernel": "6.1", "updates": [update("a", "done", booted="6.1")]}
        self.assertEqual(f.upgraded_stage_plan(d, "/boot/k")["action"], "up-to-date")
        d["running_kernel"] = "6.0"  # rolled back to another kernel since: stage again
        self.assertEqual(f.upgraded_stage_plan(d, "/boot/k")["action"], "stage")

    def test_older_upgradectl_keys(self):
        # A host whose upgradectl predates snake_case prints the D-Bus names: same plan.
        d = {"RunningKernel": "6.1", "Updates": [update("a", "done", booted="6.1")]}
        self.assertEqual(f.upgraded_stage_plan(d, "/boot/k")["action"], "up-to-date")
        d = {"Updates": [update("a", "staged", initrd="/boot/i")]}
        self.assertEqual(f.upgraded_stage_plan(d, "/boot/k", "/boot/i")["action"], "staged")


class Verdict(unittest.TestCase):
    def test_gate_edges(self):
        r = report([("a", 2_000_000)])  # 2 s of libvirt wall clock
        self.assertTrue(f.upgraded_verdict(r, "done", 2)["ok"])
        v = f.upgraded_verdict(r, "done", 1.999)
        self.assertFalse(v["ok"])
        self.assertIn("worst VM downtime 2.000 s (VM a, libvirt-wallclock) exceeds the gate of 1.999 s",
                      v["reason"])
        self.assertTrue(f.upgraded_verdict(r, "done", None)["ok"])

    def test_estimate_wins_over_wall_clock(self):
        v = f.upgraded_verdict(report([("a", 9_000_000)], est=[("a", 500_000_000)]), "done", 1)
        self.assertTrue(v["ok"])
        self.assertEqual((v["worst_ns"], v["vms"][0]["source"]), (500_000_000, "probe"))

    def test_schema1_reads_the_same(self):
        for est in (None, [("a", 500_000_000)]):
            one = f.upgraded_verdict(report1([("a", 9_000_000)], est=est), "done", 1)
            two = f.upgraded_verdict(report([("a", 9_000_000)], est=est), "done", 1)
            self.assertEqual(one, two)
        self.assertEqual(f.upgraded_vm_downtimes(report1([("a", None)]))[0]["ns"], None)

    def test_unknown_downtime(self):
        r = report([("a", None)])
        self.assertIn("unknown for a", f.upgraded_verdict(r, "done", 60)["reason"])
        self.assertTrue(f.upgraded_verdict(r, "done", 60, False)["ok"])

    def test_failed_update_and_wrong_kernel(self):
        self.assertIn("ended failed", f.upgraded_verdict(report([], result="failed"), "failed", 60)["reason"])
        self.assertIn("booted kernel 6.0", f.upgraded_verdict(report([], booted="6.0"), "done", 60)["reason"])
        self.assertIn("no report", f.upgraded_verdict({}, "cancelled", 60)["reason"])


class Summary(unittest.TestCase):
    def test_percentiles_nearest_rank(self):
        vals = [5, 1, 4, 2, 3, 10, 7, 6, 9, 8]
        self.assertEqual([f.upgraded_percentile(vals, p) for p in (50, 90, 100)], [5, 9, 10])
        self.assertEqual(f.upgraded_percentile([7], 90), 7)
        self.assertIsNone(f.upgraded_percentile([], 50))

    def test_stopped_rollout(self):
        ok = f.upgraded_verdict(report([("a", 1_000_000), ("b", 3_000_000)]), "done", 10)
        bad = f.upgraded_verdict(report([("c", 20_000_000)]), "done", 10)
        hv = {"h1": {"upgraded_record": {"batch": 1, "batch_hosts": ["h1", "h2"], "status": "update", "verdict": ok}},
              "h2": {"upgraded_record": {"batch": 1, "batch_hosts": ["h1", "h2"], "status": "update", "verdict": bad}},
              "h3": {}}
        s = f.upgraded_fleet_summary(hv, ["h1", "h2", "h3"]).splitlines()
        self.assertIn("batch 1: h1 h2: FAILED (h2); worst VM downtime 20.000 s on h2; "
                      "VM downtime p50 3.000 s, p90 20.000 s, max 20.000 s over 3 VM(s)", s)
        self.assertIn("failed: h2: worst VM downtime 20.000 s (VM c, libvirt-wallclock) "
                      "exceeds the gate of 10.000 s", s)
        self.assertIn("not committed (rollout stopped): h3", s)
        self.assertEqual(s[-1], "result: STOPPED, 1 host(s) failed")


if __name__ == "__main__":
    unittest.main(verbosity=2)
