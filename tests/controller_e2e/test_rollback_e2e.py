"""Rollbacks that harm nothing, end to end: the emulated Job controller counts every pod deleted
before it finished as failed (as kube-controller-manager v1.36 does), the real controller over
HTTP takes back a released group the scheduler refuses, and `sim.invariants` checks every change.

To make a release fail deterministically, `Spoiler` taints the node a released member is pinned
to, within the same settle of the emulated cluster as the release and so before the emulated
scheduler tries the member: a change the planner could not foresee. The scheduler refuses the
member (`Unschedulable`), the rest of its group binds, and the controller rolls the group back.
"""

import pytest

from gangkeeper import names
from gangkeeper.controller.deciding.settings import Settings
from sim.api import ADMIN, WatchEvent
from sim.names import NODES, PODS
from tests.controller_e2e.emulation import NS, Emulation, eventually, pinned_node, released

pytestmark = pytest.mark.e2e

SPOILT = {"key": "example.com/spoilt", "effect": "NoSchedule"}
FAST = Settings(bind_timeout_seconds=5.0, rollback_backoff_seconds=0.5)


class Spoiler:
    """Taints the node of the first member of a release it sees, `rounds` times: once per release
    (again only after a member of `namespace` was deleted, i.e. after a rollback)."""

    resources = (PODS,)

    def __init__(self, api, rounds: int, namespace: str = NS):
        self.api, self.left, self.namespace = api, rounds, namespace
        self.armed = True
        self.tainted: list[str] = []

    def observe(self, event: WatchEvent, now: float) -> None:
        """Writes from here, not from `step`: the taint then reaches the scheduler with the release."""
        pod = event.object
        if pod["metadata"].get("namespace") != self.namespace:
            return
        if event.type == "DELETED":
            self.armed = True
            return
        node = pinned_node(pod) if released(pod) else None
        if self.armed and self.left and node and not pod["spec"].get("nodeName"):
            self.api.patch(NODES, node, {"spec": {"taints": [SPOILT]}}, user=ADMIN)
            self.armed, self.left = False, self.left - 1
            self.tainted.append(node)

    def step(self, now: float) -> bool:
        return False

    def next_due(self) -> float | None:
        return None

    def clean(self) -> None:
        for node in self.tainted:
            self.api.patch(NODES, node, {"spec": {"taints": []}}, user=ADMIN)


def spoilt(cluster, spec_text: str, min_count: int, rounds: int):
    """The spec's cluster with its workloads and a Spoiler of `rounds` releases."""
    emulation, watch, _, (spoiler,) = cluster(spec_text, min_count, submit=True,
                                              extra=lambda api: [Spoiler(api, rounds)])
    return emulation, watch, spoiler


def conditions(obj: dict) -> dict[str, dict]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or ()}


def completed(emulation: Emulation, name: str) -> dict | None:
    job = emulation.api.get("jobs", name, namespace=NS)
    return job if "Complete" in conditions(job) else None


def warned(emulation: Emulation) -> set[tuple[str, str]]:
    """What got a Warning Event `RolledBack`: (kind, name)."""
    events = emulation.api.list("events", namespace=NS)
    return {(e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in events
            if e["reason"] == "RolledBack" and e["type"] == "Warning"}


def test_a_job_rolled_back_twice_has_no_failure_counted_and_runs_once_it_fits(cluster):
    emulation, watch, spoiler = spoilt(cluster, f"""
nodes: [{{count: 3, gpusPerNode: 8}}]
workloads: [{{kind: Job, name: train, namespace: {NS}, size: 2, gpusPerPod: 8, durationSeconds: 1}}]
""", min_count=2, rounds=2)  # the Job's backoffLimit is 0: one pod counted as failed would fail it
    _, audit = emulation.controller(FAST)
    eventually(lambda: audit.events().count("gang.rolled_back") == 2, timeout=30, what="two rollbacks")
    assert spoiler.left == 0 and len(set(spoiler.tainted)) == 2
    spoiler.clean()  # the capacity comes back: the Job fits again
    job = eventually(lambda: completed(emulation, "train"), timeout=30, what="the Job completed")
    assert job["status"]["failed"] == 0 and job["status"]["succeeded"] == 2
    assert "Failed" not in conditions(job) and conditions(job)["Suspended"]["reason"] == "JobResumed"
    assert not set(job["metadata"].get("annotations") or {}) & {names.SUSPENDED_BY_ANNOTATION,
                                                               names.RESUME_AT_ANNOTATION}
    # Two suspensions decided; each one that took effect was resumed. A suspend patch that meets
    # the Job controller's own status write in between fails its resourceVersion precondition and
    # is decided again the next pass, when the capacity may be back and no third rollback needed.
    assert audit.events().count("gang.suspended") == 2 and 1 <= audit.events().count("gang.resumed") <= 2
    assert "gang.member_deleted" not in audit.events(), "no pod of the Job was deleted by gangkeeper"
    (gang,) = emulation.api.list("gangs", namespace=NS)
    assert conditions(gang)["RolledBack"]["message"].startswith("rolled back 2 times: ")
    assert watch.violations() == []


def test_a_plain_pod_group_that_failed_to_bind_leaves_nothing_bound(cluster):
    emulation, watch, spoiler = spoilt(cluster, f"""
nodes: [{{count: 2, gpusPerNode: 8}}]
workloads: [{{kind: Pod, name: plain, namespace: {NS}, size: 2, gpusPerPod: 8, durationSeconds: 60}}]
""", min_count=2, rounds=1)
    _, audit = emulation.controller(FAST)
    eventually(lambda: "gang.rolled_back" in audit.events(), timeout=30, what="a rollback")
    eventually(lambda: emulation.pods() == {}, timeout=30, what="every member gone, the bound one too")
    deleted = [line for line in audit.lines if line["event"] == "gang.member_deleted"]
    assert sorted(line["pod"] for line in deleted) == ["plain-0", "plain-1"]
    (gang,) = emulation.api.list("gangs", namespace=NS)
    assert gang["status"]["phase"] == "Failed"
    assert f"resubmit them (label {names.GROUP_LABEL}=plain)" in conditions(gang)["RolledBack"]["message"]
    loud = {("Gang", "plain"), ("Pod", "plain-0"), ("Pod", "plain-1")}
    eventually(lambda: warned(emulation) == loud, what="a Warning on the Gang and on each pod")
    assert watch.violations() == []
