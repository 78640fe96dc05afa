"""What the kube-scheduler checks for a pinned pod, end to end: the real controller over HTTP plans
with devices (DRA), pod affinity, topology spread and host ports, the emulated scheduler enforces
the same rules (replayed against a real scheduler in tests/sim/test_recorded_scheduler.py), and
`sim.invariants` checks every change. No group is rolled back: what is released binds."""

import copy
from collections import Counter

import pytest

from gangkeeper import names
from gangkeeper.controller.deciding.settings import Settings
from sim.names import ZONE_LABEL
from sim.spec import submissions
from tests import builders
from tests.controller_e2e.emulation import NS, eventually

pytestmark = pytest.mark.e2e

HOSTNAME = "kubernetes.io/hostname"
QUICK = Settings(bind_timeout_seconds=5.0, rollback_backoff_seconds=0.5)


def job(spec, **template_spec):
    """The spec's one Job in the enforced namespace, its pods carrying `template_spec` too (and the
    label `app` = its name)."""
    (submission,) = submissions(spec)
    manifest = copy.deepcopy(submission.manifest)
    manifest["metadata"]["namespace"] = NS
    template = manifest["spec"]["template"]
    template["metadata"].setdefault("labels", {})["app"] = manifest["metadata"]["name"]
    template["spec"].update(template_spec)
    return manifest


def bound(emulation):
    return {name: pod["spec"].get("nodeName") for name, pod in emulation.pods().items() if pod["spec"].get("nodeName")}


def all_bound(emulation, count):
    """Where each pod is bound, once `count` of them are."""
    return eventually(lambda: bound(emulation) if len(bound(emulation)) == count else None, timeout=30,
                      what=f"{count} pods bound")


def zone_of(emulation, node):
    return emulation.api.get("nodes", node)["metadata"]["labels"].get(ZONE_LABEL)


# --- DRA ------------------------------------------------------------------------------------------

TEMPLATE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "one-gpu"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1}}]}}}}


def claiming_pod(name, group, size):
    main = builders.container(requests={"cpu": "1"})
    main["resources"]["claims"] = [{"name": "gpu"}]
    return builders.pod(name, namespace=None, labels={names.GROUP_LABEL: group},
                        annotations={names.MIN_COUNT_ANNOTATION: str(size)}, containers=[main], restartPolicy="Never",
                        resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}])


def test_a_dra_group_larger_than_the_devices_waits_with_nothing_bound_while_a_smaller_one_binds(cluster):
    emulation, watch, _, _ = cluster("""
nodes: [{count: 1, gpusPerNode: 0, devices: {count: 4, driver: gpu.example.com}}]
""", min_count=lambda group: {"large": 6, "small": 2}.get(group, 1))
    emulation.api.create("resourceclaimtemplates", TEMPLATE, namespace=NS)
    for i in range(6):
        emulation.api.create("pods", claiming_pod(f"large-{i}", "large", 6), namespace=NS)
    for i in range(2):
        emulation.api.create("pods", claiming_pod(f"small-{i}", "small", 2), namespace=NS)
    _, audit = emulation.controller(QUICK)
    eventually(lambda: set(bound(emulation)) == {"small-0", "small-1"}, timeout=30, what="the small group bound")
    admitted = eventually(lambda: next((c for g in emulation.api.list("gangs", namespace=NS) if g["metadata"]["name"] == "large"
                                        for c in g["status"].get("conditions") or () if c["reason"] == "NoFit"), None),
                          timeout=30, what="the large group's NoFit")
    assert "needs 6 devices of class gpu.example.com on one node" in admitted["message"]
    assert not any(name.startswith("large") for name in bound(emulation))
    claims = [c for c in emulation.api.list("resourceclaims", namespace=NS) if (c.get("status") or {}).get("allocation")]
    assert sorted(c["metadata"]["name"].rsplit("-", 2)[0] for c in claims) == ["small-0", "small-1"]
    assert "gang.rolled_back" not in audit.events()
    assert watch.violations() == []


def test_gpus_served_only_through_a_device_class_are_admitted_when_the_devices_suffice(cluster):
    emulation, watch, spec, _ = cluster("""
nodes: [{count: 1, gpusPerNode: 0, devices: {count: 8, driver: gpu.nvidia.com, extendedResourceName: nvidia.com/gpu}}]
workloads: [{kind: Job, name: ext, namespace: ml, size: 2, gpusPerPod: 4, durationSeconds: 1}]
""", min_count=2)
    emulation.api.create("jobs", job(spec), namespace=NS)
    _, audit = emulation.controller(QUICK)
    eventually(lambda: emulation.api.get("jobs", "ext", namespace=NS)["status"].get("succeeded") == 2, timeout=30,
               what="the Job completed")
    assert "gang.rolled_back" not in audit.events()
    assert watch.violations() == []


# --- the pods around a member ------------------------------------------------------------------------

def test_a_job_with_required_anti_affinity_binds_on_distinct_nodes_without_a_rollback(cluster):
    emulation, watch, spec, _ = cluster("""
nodes: [{count: 3, gpusPerNode: 8}]
workloads: [{kind: Job, name: aa, namespace: ml, size: 2, gpusPerPod: 4, durationSeconds: 30}]
""", min_count=2)
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "aa"}}, "topologyKey": HOSTNAME}]}}
    emulation.api.create("jobs", job(spec, affinity=anti), namespace=NS)
    _, audit = emulation.controller(QUICK)
    placed = all_bound(emulation, 2)
    assert len(set(placed.values())) == 2
    assert "gang.rolled_back" not in audit.events()
    assert watch.violations() == []


def test_a_job_with_a_zone_spread_constraint_is_placed_within_its_skew(cluster):
    emulation, watch, spec, _ = cluster("""
nodes:
  - {count: 2, gpusPerNode: 8, labels: {topology.kubernetes.io/zone: a}}
  - {count: 2, gpusPerNode: 8, labels: {topology.kubernetes.io/zone: b}}
workloads: [{kind: Job, name: spread, namespace: ml, size: 4, gpusPerPod: 2, durationSeconds: 30}]
""", min_count=4)
    constraint = [{"maxSkew": 1, "topologyKey": ZONE_LABEL, "whenUnsatisfiable": "DoNotSchedule",
                   "labelSelector": {"matchLabels": {"app": "spread"}}}]
    emulation.api.create("jobs", job(spec, topologySpreadConstraints=constraint), namespace=NS)
    _, audit = emulation.controller(QUICK)
    placed = all_bound(emulation, 4)
    zones = Counter(zone_of(emulation, node) for node in placed.values())
    assert zones == {"a": 2, "b": 2}
    assert "gang.rolled_back" not in audit.events()
    assert watch.violations() == []


def test_members_asking_one_host_port_land_on_distinct_nodes(cluster):
    emulation, watch, spec, _ = cluster("""
nodes: [{count: 3, gpusPerNode: 8}]
workloads: [{kind: Job, name: ports, namespace: ml, size: 2, gpusPerPod: 1, durationSeconds: 30}]
""", min_count=2)
    manifest = job(spec)
    manifest["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 29500, "hostPort": 29500}]
    emulation.api.create("jobs", manifest, namespace=NS)
    _, audit = emulation.controller(QUICK)
    placed = all_bound(emulation, 2)
    assert len(set(placed.values())) == 2
    assert "gang.rolled_back" not in audit.events()
    assert watch.violations() == []


def test_the_same_job_without_its_anti_affinity_is_packed_on_one_node(cluster):
    """The rule is what spreads the members above, not the planner's packing."""
    emulation, watch, spec, _ = cluster("""
nodes: [{count: 3, gpusPerNode: 8}]
workloads: [{kind: Job, name: packed, namespace: ml, size: 2, gpusPerPod: 4, durationSeconds: 30}]
""", min_count=2)
    emulation.api.create("jobs", job(spec), namespace=NS)
    emulation.controller(QUICK)
    placed = all_bound(emulation, 2)
    assert len(set(placed.values())) == 1
    assert watch.violations() == []
