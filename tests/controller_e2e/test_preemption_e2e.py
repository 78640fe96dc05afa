"""Preemption by whole groups, end to end: the real controller over HTTP on the emulated cluster,
whose PriorityClasses, Job controller (counting every deleted unfinished pod as failed, as
kube-controller-manager v1.36 does) and Eviction API are those of a real control plane, and
`sim.invariants` checking every change."""

import pytest

from gangkeeper.controller.deciding.settings import Preempting, Settings
from tests import builders
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


def lone_pod(emulation, name: str, gpus: int = 2, priority_class: str = "low", **labels) -> None:
    """A pod of no group in the LONE namespace (not enforced), gone as soon as it is deleted."""
    limits = {builders.GPU: str(gpus), "cpu": "1", "memory": "1Gi"}
    emulation.api.create("pods", builders.pod(name, namespace=LONE, labels=labels,
                                              containers=[builders.container("c", image="busybox:1.36", limits=limits)],
                                              priorityClassName=priority_class, terminationGracePeriodSeconds=0))


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


def urgent_pod_among_lone_pods(cluster, pods: dict[str, dict], budgets: tuple[dict, ...] = ()):
    """One 8-GPU node full of 2-GPU lone pods of low priority (name → labels) and `budgets` over
    them, then an urgent 4-GPU pod; the controller starts once the lone pods are bound. Returns the
    emulation, the invariants' watch and the audit once the urgent pod ran."""
    emulation, watch, _, _ = cluster(f"""
nodes: [{{count: 1, gpusPerNode: 8}}]
{CLASSES}
workloads:
  - {{kind: Pod, name: urgent, namespace: {NS}, size: 1, gpusPerPod: 4, durationSeconds: 1, priorityClassName: high,
      submitSeconds: 1}}
""", min_count=1, submit=True)
    emulation.api.create("namespaces", {"metadata": {"name": LONE}})
    for name, labels in pods.items():
        lone_pod(emulation, name, **labels)
    for budget in budgets:
        emulation.api.create("poddisruptionbudgets", budget, namespace=LONE)
    eventually(lambda: all(p["spec"].get("nodeName") for p in emulation.pods(LONE).values()), what="lone pods bound")
    _, audit = emulation.controller(FAST)
    eventually(lambda: emulation.pods(NS).get("urgent", {}).get("status", {}).get("phase") == "Succeeded",
               timeout=20, what="the urgent pod ran")
    return emulation, watch, audit


def evicted(audit) -> list[str]:
    return sorted(line["pod"] for line in audit.lines if line.get("decision") == "evicted")


def test_lone_lower_priority_pods_are_evicted_only_as_many_as_needed(cluster):
    emulation, watch, audit = urgent_pod_among_lone_pods(cluster, {f"lone-{i}": {} for i in range(4)})
    assert len(evicted(audit)) == 2 and len(emulation.pods(LONE)) == 2, "two 2-GPU pods make room for four GPUs"
    assert watch.violations() == []


def test_lone_pods_a_disruption_budget_protects_are_spared_where_others_can_go(cluster):
    # The protected pods sort first among equals (by name), so without reading the budget they
    # would be chosen, the Eviction API would refuse them, and the urgent pod would wait in vain.
    web = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
           "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}}
    pods = {"a-web-0": {"app": "web"}, "a-web-1": {"app": "web"}, "b-batch-0": {"app": "batch"},
            "b-batch-1": {"app": "batch"}}
    emulation, watch, audit = urgent_pod_among_lone_pods(cluster, pods, (web,))
    assert evicted(audit) == ["b-batch-0", "b-batch-1"] and sorted(emulation.pods(LONE)) == ["a-web-0", "a-web-1"]
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
    # The Job controller may mark the first Job Complete after the second ran: its pods finished first.
    running = eventually(lambda: completed(emulation, "running"), timeout=10, what="the first Job complete")
    assert running["status"]["failed"] == 0 and preempted(audit) == []
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
    lone_pod(emulation, "vip", gpus=8, priority_class="high")  # the stock scheduler takes one member of the pair for it
    eventually(lambda: emulation.pods(LONE)["vip"]["spec"].get("nodeName"), timeout=20, what="the vip pod bound")
    eventually(lambda: "gang.rolled_back" in audit.events(), timeout=20, what="the pair rolled back")
    eventually(lambda: emulation.pods() == {}, timeout=20, what="nothing of the pair left holding a GPU")
    assert watch.violations() == []
