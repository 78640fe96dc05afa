"""Topology rules end to end (issue 13): Jobs whose pods declare `gangkeeper.io/topology-*`, the
real controller over HTTP on an emulated cluster whose nodes are labelled in zones, racks and
NVLink cliques (the spec's node `topology`), the emulated scheduler binding what is pinned, and
`sim.invariants` checking every change."""

from collections import Counter

import pytest

from gangkeeper import names
from gangkeeper.controller.deciding.settings import Settings
from sim.api import APIError
from tests.controller_e2e.emulation import NS, eventually

pytestmark = pytest.mark.e2e

ZONE, RACK, CLIQUE = "topology.kubernetes.io/zone", "example.com/rack", "nvidia.com/gpu.clique"
QUICK = Settings(bind_timeout_seconds=5.0, rollback_backoff_seconds=0.5)
LONE = "apps"  # a namespace gangkeeper does not enforce


def bound(emulation) -> dict[str, str]:
    return {name: pod["spec"]["nodeName"] for name, pod in emulation.pods().items() if pod["spec"].get("nodeName")}


def all_bound(emulation, count: int) -> dict[str, str]:
    return eventually(lambda: bound(emulation) if len(bound(emulation)) == count else None, timeout=30,
                      what=f"{count} pods bound")


def placed_once_bound(cluster, spec: str, count: int):
    """The spec's cluster and workloads with the controller running; once `count` pods are bound:
    the emulation, the invariants' watch and pod → node."""
    emulation, watch, _, _ = cluster(spec, min_count=count, submit=True)
    emulation.controller(QUICK)
    return emulation, watch, all_bound(emulation, count)


def labels_of(emulation, label: str, nodes) -> Counter:
    node_labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in emulation.api.list("nodes")}
    return Counter(node_labels[node].get(label) for node in nodes)


def no_fit(emulation, prefix: str) -> dict | None:
    """The NoFit condition of the Gang of the Job named `prefix`, once there is one."""
    for gang in emulation.api.list("gangs", namespace=NS):
        if gang["metadata"]["name"].startswith(prefix):
            for condition in (gang.get("status") or {}).get("conditions") or ():
                if condition.get("reason") == "NoFit":
                    return condition
    return None


def test_a_required_zone_group_lands_in_the_only_zone_with_room(cluster):
    emulation, watch, placed = placed_once_bound(cluster, f"""
nodes:
  - {{count: 2, gpusPerNode: 4, labels: {{{ZONE}: a}}}}
  - {{count: 3, gpusPerNode: 8, labels: {{{ZONE}: b}}}}
  - {{count: 2, gpusPerNode: 8, namePrefix: bare}}
workloads:
  - {{kind: Job, name: train, namespace: {NS}, size: 3, gpusPerPod: 8, topology: {{required: {ZONE}}}}}
""", 3)
    assert labels_of(emulation, ZONE, placed.values()) == {"b": 3}
    assert watch.violations() == []


def test_a_group_that_fits_the_cluster_but_no_zone_waits_and_its_gang_names_the_zones(cluster):
    emulation, watch, _, _ = cluster(f"""
nodes:
  - {{count: 2, gpusPerNode: 8, labels: {{{ZONE}: a}}}}
  - {{count: 2, gpusPerNode: 8, labels: {{{ZONE}: b}}}}
workloads:
  - {{kind: Job, name: train, namespace: {NS}, size: 3, gpusPerPod: 8, topology: {{required: {ZONE}}}}}
""", min_count=3, submit=True)
    emulation.controller(QUICK)
    condition = eventually(lambda: no_fit(emulation, "train"), timeout=30, what="the Gang's NoFit")
    assert condition["message"].startswith(
        f"required {ZONE}: needs 24 nvidia.com/gpu in one zone; a: 16 free, b: 16 free"), condition["message"]
    assert bound(emulation) == {}, "nothing partly placed"
    assert watch.violations() == []


def test_a_preferred_rack_group_packs_into_one_rack_when_one_fits(cluster):
    # Without the rule the group would take the first nodes by name, over both racks.
    emulation, watch, placed = placed_once_bound(cluster, f"""
nodes:
  - {{count: 2, gpusPerNode: 8, namePrefix: a, labels: {{{ZONE}: z}}, topology: [{{label: {RACK}, nodes: 2}}]}}
  - {{count: 3, gpusPerNode: 8, namePrefix: b, labels: {{{ZONE}: z}}, topology: [{{label: {RACK}, nodes: 3}}]}}
workloads:
  - {{kind: Job, name: train, namespace: {NS}, size: 3, gpusPerPod: 8, topology: {{preferred: {RACK}}}}}
""", 3)
    assert labels_of(emulation, RACK, placed.values()) == {"rack-1": 3}
    assert watch.violations() == []


def test_required_zone_with_preferred_rack_honours_both(cluster):
    # Zone a is the tighter zone, where the cluster's own preference would put the group over two
    # racks; only rack-2 of zone b holds it whole.
    emulation, watch, placed = placed_once_bound(cluster, f"""
nodes:
  - {{count: 4, gpusPerNode: 8, namePrefix: a,
     topology: [{{label: {ZONE}, nodes: 4, values: [a]}}, {{label: {RACK}, nodes: 2}}]}}
  - {{count: 3, gpusPerNode: 8, namePrefix: b, labels: {{{ZONE}: b}}, topology: [{{label: {RACK}, nodes: 3}}]}}
  - {{count: 2, gpusPerNode: 8, namePrefix: c, labels: {{{ZONE}: b}}, topology: [{{label: {RACK}, nodes: 2}}]}}
workloads:
  - {{kind: Job, name: train, namespace: {NS}, size: 3, gpusPerPod: 8,
     topology: {{required: {ZONE}, preferred: {RACK}}}}}
""", 3)
    assert labels_of(emulation, ZONE, placed.values()) == {"b": 3}
    assert labels_of(emulation, RACK, placed.values()) == {"rack-2": 3}
    assert watch.violations() == []


def test_a_16_member_group_in_slices_of_4_puts_each_slice_in_one_clique(cluster):
    # Five NVLink cliques of two 8-GPU nodes, four 4-GPU members each; a lone pod takes half a
    # node first, so the partly used clique holds only three: plain packing would start there.
    emulation, watch, _, _ = cluster(f"""
nodes:
  - {{count: 10, gpusPerNode: 8, topology: [{{label: {CLIQUE}, nodes: 2, prefix: nvl}}]}}
workloads:
  - {{kind: Job, name: train, namespace: {NS}, size: 16, gpusPerPod: 4, submitSeconds: 1,
     topology: {{sliceRequired: {CLIQUE}, sliceSize: 4}}}}
""", min_count=16, submit=True)
    emulation.api.create("namespaces", {"metadata": {"name": LONE}})
    emulation.api.create("pods", {"metadata": {"name": "lone"}, "spec": {
        "nodeSelector": {"kubernetes.io/hostname": "node-0"},
        "containers": [{"name": "c", "image": "busybox:1.36",
                        "resources": {"limits": {"nvidia.com/gpu": "4", "cpu": "1", "memory": "1Gi"}}}]}},
        namespace=LONE)
    eventually(lambda: emulation.pods(LONE)["lone"]["spec"].get("nodeName"), what="the lone pod bound")
    emulation.controller(QUICK)
    placed = all_bound(emulation, 16)
    pods = emulation.pods()
    index = {name: int(pods[name]["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]) for name in placed}
    node_clique = {n["metadata"]["name"]: n["metadata"]["labels"][CLIQUE] for n in emulation.api.list("nodes")}
    per_slice: dict[int, set[str]] = {}
    for name, node in placed.items():
        per_slice.setdefault(index[name] // 4, set()).add(node_clique[node])
    assert sorted(per_slice) == [0, 1, 2, 3] and all(len(c) == 1 for c in per_slice.values()), per_slice
    assert "nvl-0" not in set().union(*per_slice.values()), "the clique with room for three holds no slice"
    assert watch.violations() == []


def test_a_gangs_spec_topology_works_like_the_annotations(cluster):
    # Plain pods of the explicit group gx, which says nothing of topology; its Gang requires one zone.
    emulation, watch, _, _ = cluster(f"""
nodes:
  - {{count: 2, gpusPerNode: 4, labels: {{{ZONE}: a}}}}
  - {{count: 3, gpusPerNode: 8, labels: {{{ZONE}: b}}}}
  - {{count: 2, gpusPerNode: 8, namePrefix: bare}}
workloads:
  - {{kind: Pod, name: gx, namespace: {NS}, size: 3, gpusPerPod: 8, submitSeconds: 1}}
""", min_count=3, submit=True)
    emulation.api.create("gangs", {"apiVersion": "gangkeeper.io/v1alpha1", "kind": "Gang", "metadata": {"name": "gx"},
                                   "spec": {"minCount": 3, "topology": {"required": ZONE}}}, namespace=NS)
    emulation.controller(QUICK)
    placed = all_bound(emulation, 3)
    assert labels_of(emulation, ZONE, placed.values()) == {"b": 3}
    assert watch.violations() == []


def refusal(call) -> str:
    with pytest.raises(APIError) as error:
        call()
    return error.value.status["message"]


def test_invalid_declarations_are_refused_naming_the_field_and_what_is_accepted(cluster):
    emulation, watch, _, _ = cluster("nodes: [{count: 1, gpusPerNode: 8}]", min_count=2)
    pod = {"metadata": {"name": "p", "labels": {names.GROUP_LABEL: "g"},
                        "annotations": {names.MIN_COUNT_ANNOTATION: "2",
                                        names.TOPOLOGY_REQUIRED_ANNOTATION: "Not A Key!"}},
           "spec": {"containers": [{"name": "c", "image": "busybox:1.36",
                                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    said = refusal(lambda: emulation.api.create("pods", pod, namespace=NS))
    assert f"metadata.annotations[{names.TOPOLOGY_REQUIRED_ANNOTATION}]" in said and "Not A Key!" in said
    assert "label key" in said, said
    pod["metadata"]["annotations"] = {names.MIN_COUNT_ANNOTATION: "6", names.TOPOLOGY_SLICE_REQUIRED_ANNOTATION: CLIQUE,
                                      names.TOPOLOGY_SLICE_SIZE_ANNOTATION: "4"}
    said = refusal(lambda: emulation.api.create("pods", pod, namespace=NS))
    assert f"metadata.annotations[{names.TOPOLOGY_SLICE_SIZE_ANNOTATION}]" in said and "not a multiple" in said, said
    gang = {"apiVersion": "gangkeeper.io/v1alpha1", "kind": "Gang", "metadata": {"name": "g"},
            "spec": {"minCount": 2, "topology": {"sliceRequired": CLIQUE}}}
    said = refusal(lambda: emulation.api.create("gangs", gang, namespace=NS))
    assert "spec.topology.sliceSize" in said, said
    assert emulation.pods() == {} and emulation.api.list("gangs", namespace=NS) == []
    assert watch.violations() == []
