"""The planner against what a real kube-scheduler v1.36 decided for pinned pods.

Each recording (`tests/fixtures/kube-scheduler-v1.36/`) creates nodes and cluster objects, then
pods one at a time, each pinned to a node, and records whether the scheduler bound it there. Here
every pod is planned as a gated group of one on an index built from the same objects, after the
earlier pods bound as recorded (with the claims the scheduler allocated for them): the planner
must admit exactly the pods the scheduler bound, on their node, and say why of the others.

The five `preemption-*` recordings hold the preemption of `controller.planning.preemption` to the
scheduler's: the earlier pods bound as recorded are lone pods, and the last one, planned as a
group of one, must take exactly the pods the scheduler took (none for `preemptionPolicy: Never`
or against higher priority) and be placed on the node it was pinned to.
"""

import copy
import json

import pytest

from gangkeeper import names
from gangkeeper.controller.cache.index import NODES, PODS, ClusterIndex
from gangkeeper.controller.cache.occupancy import (
    DEVICE_CLASSES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
)
from gangkeeper.controller.model.members import group_of
from gangkeeper.controller.planning.planner import plan_group
from gangkeeper.controller.planning.plans import NoFit, Plan, Topology
from gangkeeper.controller.planning.preemption import preempt
from gangkeeper.controller.reading.nodes import node_from_api
from gangkeeper.controller.reading.pods import member_from_api, pod_facts
from tests.recorded import SCHEDULER

CASES = sorted(path for path in SCHEDULER.glob("*.json") if not path.name.startswith("preemption-"))
PREEMPTIONS = sorted(SCHEDULER.glob("preemption-*.json"))
KINDS = {"DeviceClass": DEVICE_CLASSES, "ResourceSlice": RESOURCE_SLICES, "ResourceClaim": RESOURCE_CLAIMS,
         "ResourceClaimTemplate": RESOURCE_CLAIM_TEMPLATES}

# What the planner's reason names for each refusal, in the scheduler's words or in ours.
WHY = {
    "dra-claim-template-per-pod": "needs 1 device of class gpu.example.com",
    "dra-two-devices-per-pod": "needs 2 devices of class gpu.example.com",
    "dra-shared-claim": "resourceclaim not available on the node",
    "dra-cel-selector": "needs 1 device of class gpu.example.com matching",
    "dra-extended-resource": "example.com/gpu",
    "dra-extended-resource-and-device-plugin": "example.com/gpu",
    "pod-anti-affinity-hostname": "anti-affinity",
    "pod-affinity-zone": "pod affinity",
    "host-port-conflict": "host ports",
    "taints-and-cordon": "no node may run",
    "pod-slots-and-effective-requests": "nvidia.com/gpu",
    "sidecar-sum-init-max": "nvidia.com/gpu",
    "node-selector-plus-pin": "no node may run",
}


def load(path):
    return json.loads(path.read_text())


def identified(pod):
    """The recordings drop uids; a pod's name serves, namespaced."""
    pod = copy.deepcopy(pod)
    pod["metadata"]["uid"] = f"{pod['metadata']['namespace']}-{pod['metadata']['name']}"
    return pod


def gated(pod):
    pod = copy.deepcopy(pod)
    pod["spec"]["schedulingGates"] = [{"name": names.SCHEDULING_GATE}]
    return pod


def bound(pod, node, claims):
    """The pod as the API holds it once bound, naming the claims generated for it."""
    pod = copy.deepcopy(pod)
    pod["spec"]["nodeName"] = node
    pod["status"] = {"phase": "Running", "resourceClaimStatuses": [
        {"name": entry["name"], "resourceClaimName": claim["name"]}
        for entry in pod["spec"].get("resourceClaims") or () if entry.get("resourceClaimTemplateName")
        for claim in claims if entry["name"] in claim["name"]]}
    return pod


def claim_object(record, namespace, node, original=None):
    """A ResourceClaim as the scheduler left it, from the recording's summary of it: the summary
    leaves out the allocation's node selector, which for a node's own devices names that node."""
    claim = copy.deepcopy(original) if original else {"metadata": {"name": record["name"]}, "spec": {}}
    claim["metadata"]["namespace"] = namespace
    if "-extended-resources-" in record["name"]:
        claim["metadata"].setdefault("annotations", {})[names.EXTENDED_RESOURCE_CLAIM_ANNOTATION] = "true"
    if record["allocation"]:
        claim["status"] = {"allocation": {"devices": {"results": [
            {key: result[key] for key in ("request", "driver", "pool", "device")} for result in record["allocation"]]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}},
            "reservedFor": [{"resource": "pods", "name": name} for name in record["reservedFor"]]}
    return claim


def index_of(case):
    index = ClusterIndex()
    index.apply([(NODES, node["metadata"]["name"], node_from_api(node)) for node in case["nodes"]])
    index.apply([(KINDS[obj["kind"]], _key(obj), obj) for obj in case["cluster_objects"] + case["namespaced_objects"]
                 if obj["kind"] != "PriorityClass"])  # the controller reads priorities off the pods
    return index


def _key(obj):
    metadata = obj["metadata"]
    return f"{metadata['namespace']}/{metadata['name']}" if metadata.get("namespace") else metadata["name"]


def replay(case):
    """Each pod's plan (a node, or why not) in creation order, binding the pods the scheduler bound."""
    index = index_of(case)
    namespace = case["namespace"]
    shared = {obj["metadata"]["name"]: obj for obj in case["namespaced_objects"] if obj["kind"] == "ResourceClaim"}
    outcomes = {outcome["pod"]: outcome for outcome in case["outcomes"]}
    decided = []
    for raw in case["pods"]:
        pod = identified(raw)
        member = member_from_api(gated(pod))
        group = group_of((namespace, member.name), [member], 1, 0.0)
        outcome = plan_group(group, index.pool, index.ledger, Topology(), index.occupancy)
        decided.append((member.name, outcome))
        node = outcomes[member.name]["bound_to"]
        if node:
            claims = [c for c in case["resource_claims_after"] if member.name in c["owner"] + c["reservedFor"]]
            objects = [claim_object(c, namespace, node, shared.get(c["name"])) for c in claims]
            index.apply([(RESOURCE_CLAIMS, _key(obj), obj) for obj in objects])
            index.apply([(PODS, f"{namespace}/{member.name}", pod_facts(bound(pod, node, claims)))])
    return decided


@pytest.mark.parametrize("path", CASES, ids=lambda path: path.stem)
def test_the_planner_admits_exactly_what_the_scheduler_bound(path):
    case = load(path)
    outcomes = {outcome["pod"]: outcome for outcome in case["outcomes"]}
    for name, outcome in replay(case):
        recorded = outcomes[name]
        if recorded["bound_to"]:
            assert isinstance(outcome, Plan), f"{name}: the scheduler bound it to {recorded['bound_to']}: {outcome}"
            assert outcome.nodes == {recorded["bound_to"]}
        else:
            assert isinstance(outcome, NoFit), f"{name}: the scheduler refused it ({recorded['message']}): {outcome}"
            assert WHY[case["case"]] in outcome.reason, f"{name}: {outcome.reason}"


@pytest.mark.parametrize("path", PREEMPTIONS, ids=lambda path: path.stem)
def test_the_preemptor_takes_exactly_the_pods_the_scheduler_took(path):
    case = load(path)
    *earlier, last = case["pods"]
    index = index_of(case)
    for raw in earlier:
        pod = identified(raw)
        node = next(o["bound_to"] for o in case["outcomes"] if o["pod"] == pod["metadata"]["name"])
        index.apply([(PODS, f"{case['namespace']}/{pod['metadata']['name']}", pod_facts(bound(pod, node, [])))])
    preemptor = member_from_api(gated(identified(last)))
    group = group_of((case["namespace"], preemptor.name), [preemptor], 1, 0.0)
    assert isinstance(plan_group(group, index.pool, index.ledger, Topology(), index.occupancy), NoFit)
    found = preempt(group, index.preemption_candidates(), index.pool, index.ledger, Topology(), index.occupancy)
    recorded = next(o for o in case["outcomes"] if o["pod"] == preemptor.name)
    taken = sorted(e["pod"] for e in recorded.get("earlier_pods_after", ()) if e["state"] != "present")
    if not taken:
        assert found is None
        return
    assert sorted(victim.members[0].name for victim in found.victims) == taken
    pinned = case["nodes"][0]["metadata"]["name"]
    assert found.plan.nodes == {pinned}


def test_every_recording_is_replayed():
    assert {path.stem for path in CASES} == set(WHY) | {"topology-spread-do-not-schedule",
                                                         "topology-spread-schedule-anyway"}
    assert {path.stem for path in SCHEDULER.glob("*.json")} == {path.stem for path in CASES + PREEMPTIONS}
    assert len(PREEMPTIONS) == 5
