"""Preemption by whole groups, end to end: the real controller over HTTP on the emulated cluster,
whose PriorityClasses, Job controller (counting every deleted unfinished pod as failed, as
kube-controller-manager v1.36 does) and Eviction API are those of a real control plane, and
`sim.invariants` checking every change."""

import pytest

from gangkeeper.controller.reconciler import Preempting, Settings
from tests.controller_e2e.emulation import NS, eventually

pytestmark = pytest.mark.e2e

FAST = Settings(bind_timeout_seconds=5.0, rollback_backoff_seconds=0.5)
CLASSES = """priorityClasses: [{name: low, value: 10}, {name: lowish, value: 20}, {name: high, value: 1000},
                  {name: polite, value: 1000, preemptionPolicy: Never}]"""
LONE = "apps"  # a namespace gangkeeper does not enforce: its pods are nobody's group


def conditions(obj: dict) -> dict[str, dict]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or ()}


def completed(emulation, name: str) -> dict | None:
    """The Job once it completed (None before, or before it is submitted)."""
    jobs = {job["metadata"]["name"]: job for job in emulation.api.list("jobs", namespace=NS)}
    job = jobs.get(name)
    return job if job is not None and "Complete" in conditions(job) else None


def preempted(audit) -> list[str]:
    """The groups taken, by the group label their audit line names."""
    return [line["group"] for line in audit.lines if line["event"] == "gang.preempted"]


def test_a_high_priority_job_preempts_a_lower_one_whole_which_comes_back_whole_with_nothing_failed(cluster):
    emulation, watch, _, _ = cluster(f"""
nodes: [{{count: 2, gpusPerNode: 8}}]
{CLASSES}
workloads:
  - {{kind: Job, name: batch, namespace: {NS}, size: 2, gpusPerPod: 8, durationSeconds: 3, priorityClassName: low}}
  - {{kind: Job, name: urgent, namespace: {NS}, size: 1, gpusPerPod: 8, durationSeconds: 1, priorityClassName: high,
      submitSeconds: 1.5}}
""", min_count=lambda group: 1 if group.startswith("urgent") else 2, submit=True)
    _, audit = emulation.controller(FAST)
    taken = eventually(lambda: preempted(audit), timeout=20, what="the urgent Job preempting the batch Job")
    assert len(taken) == 1 and taken[0].startswith("batch") and "gang.preempting" in audit.events()
    urgent = eventually(lambda: completed(emulation, "urgent"), timeout=20, what="the urgent Job completed")
    batch = eventually(lambda: completed(emulation, "batch"), timeout=40, what="the preempted Job completed")
    assert batch["status"]["failed"] == 0 and batch["status"]["succeeded"] == 2, "suspended, never failed"
    assert urgent["status"]["succeeded"] == 1
    assert "gang.member_deleted" not in audit.events(), "no pod of either Job was deleted by gangkeeper"
    assert watch.violations() == []


def test_of_two_lower_priority_jobs_only_the_one_needed_and_least_important_is_taken(cluster):
    emulation, watch, _, _ = cluster(f"""
nodes: [{{count: 2, gpusPerNode: 8}}]
{CLASSES}
workloads:
  - {{kind: Job, name: least, namespace: {NS}, size: 1, gpusPerPod: 8, durationSeconds: 3, priorityClassName: low}}
  - {{kind: Job, name: more, namespace: {NS}, size: 1, gpusPerPod: 8, durationSeconds: 3, priorityClassName: lowish}}
  - {{kind: Job, name: urgent, namespace: {NS}, size: 1, gpusPerPod: 8, durationSeconds: 1, priorityClassName: high,
      submitSeconds: 1.5}}
""", min_count=1, submit=True)
    _, audit = emulation.controller(FAST)
    eventually(lambda: completed(emulation, "urgent"), timeout=20, what="the urgent Job completed")
    for name in ("least", "more"):
        job = eventually(lambda name=name: completed(emulation, name), timeout=40, what=f"{name} completed")
        assert job["status"]["failed"] == 0
    taken = eventually(lambda: preempted(audit), what="a preemption on record")
    assert len(taken) == 1 and taken[0].startswith("least")
    assert watch.violations() == []


@pytest.mark.parametrize("waiting_class", ["polite", "low"])  # above the running Job but Never; its equal
def test_a_never_class_or_equal_priority_preempts_nothing(cluster, waiting_class):
    emulation, watch, _, _ = cluster(f"""
nodes: [{{count: 1, gpusPerNode: 8}}]
{CLASSES}
workloads:
  - {{kind: Job, name: running, namespace: {NS}, size: 1, gpusPerPod: 8, durationSeconds: 3, priorityClassName: low}}
  - {{kind: Job, name: waiting, namespace: {NS}, size: 1, gpusPerPod: 8, durationSeconds: 1,
      priorityClassName: {waiting_class}, submitSeconds: 1}}
""", min_count=1, submit=True)
    _, audit = emulation.controller(FAST)
    done = eventually(lambda: completed(emulation, "running"), timeout=20, what="the running Job completed")
    eventually(lambda: completed(emulation, "waiting"), timeout=20, what="the waiting Job completed after it")
    assert done["status"]["failed"] == 0 and preempted(audit) == [] and "gang.preempting" not in audit.events()
    assert watch.violations() == []


def test_lone_lower_priority_pods_are_evicted_only_as_many_as_needed(cluster):
    emulation, watch, _, _ = cluster(f"""
nodes: [{{count: 1, gpusPerNode: 8}}]
{CLASSES}
workloads:
  - {{kind: Pod, name: urgent, namespace: {NS}, size: 1, gpusPerPod: 4, durationSeconds: 1, priorityClassName: high,
      submitSeconds: 1}}
""", min_count=1, submit=True)
    emulation.api.create("namespaces", {"metadata": {"name": LONE}})
    for i in range(4):
        emulation.api.create("pods", {"metadata": {"name": f"lone-{i}"}, "spec": {
            "priorityClassName": "low", "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": "busybox:1.36",
                            "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "1", "memory": "1Gi"}}}]}},
            namespace=LONE)
    eventually(lambda: all(p["spec"].get("nodeName") for p in emulation.pods(LONE).values()), what="lone pods bound")
    _, audit = emulation.controller(FAST)
    eventually(lambda: emulation.pods(NS).get("urgent", {}).get("status", {}).get("phase") == "Succeeded",
               timeout=20, what="the urgent pod ran")
    evicted = [line["pod"] for line in audit.lines if line.get("decision") == "evicted"]
    assert len(evicted) == 2 and len(emulation.pods(LONE)) == 2, "two 2-GPU pods make room for four GPUs"
    assert watch.violations() == []


def test_with_preemption_off_a_higher_priority_job_waits(cluster):
    emulation, watch, _, _ = cluster(f"""
nodes: [{{count: 1, gpusPerNode: 8}}]
{CLASSES}
workloads:
  - {{kind: Job, name: running, namespace: {NS}, size: 1, gpusPerPod: 8, durationSeconds: 3, priorityClassName: low}}
  - {{kind: Job, name: urgent, namespace: {NS}, size: 1, gpusPerPod: 8, durationSeconds: 1, priorityClassName: high,
      submitSeconds: 1}}
""", min_count=1, submit=True)
    _, audit = emulation.controller(Settings(bind_timeout_seconds=5.0, preemption=Preempting.NEVER))
    eventually(lambda: completed(emulation, "urgent"), timeout=40, what="the urgent Job ran after the other")
    assert completed(emulation, "running")["status"]["failed"] == 0 and preempted(audit) == []
    assert watch.violations() == []


def test_a_group_that_lost_a_member_to_the_stock_schedulers_preemption_is_rolled_back_whole(cluster):
    emulation, watch, _, _ = cluster(f"""
nodes: [{{count: 2, gpusPerNode: 8}}]
{CLASSES}
workloads:
  - {{kind: Pod, name: pair, namespace: {NS}, size: 2, gpusPerPod: 8, priorityClassName: low}}
""", min_count=2, submit=True)
    _, audit = emulation.controller(FAST)
    eventually(lambda: all(p["spec"].get("nodeName") for p in emulation.pods().values()) and len(emulation.pods()) == 2,
               timeout=20, what="the pair bound")
    emulation.api.create("namespaces", {"metadata": {"name": LONE}})
    emulation.api.create("pods", {"metadata": {"name": "vip"}, "spec": {
        "priorityClassName": "high", "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "c", "image": "busybox:1.36",
                        "resources": {"limits": {"nvidia.com/gpu": "8", "cpu": "1", "memory": "1Gi"}}}]}},
        namespace=LONE)  # the stock scheduler takes one member of the pair for it
    eventually(lambda: emulation.pods(LONE)["vip"]["spec"].get("nodeName"), timeout=20, what="the vip pod bound")
    eventually(lambda: "gang.rolled_back" in audit.events(), timeout=20, what="the pair rolled back")
    eventually(lambda: emulation.pods() == {}, timeout=20, what="nothing of the pair left holding a GPU")
    assert watch.violations() == []
