"""The emulated kube-scheduler replays what a real kube-scheduler v1.36 decided (fixtures/kube-scheduler-v1.36).

Each case's nodes and objects (PriorityClasses, DeviceClasses, ResourceSlices, ResourceClaims,
ResourceClaimTemplates) go into an emulated API server with the default components; the pods are
created one at a time, as recorded, and the cluster settles after each (the scheduler and the
resourceclaim controller do their work; the clock stands still, so no kubelet ends a pod, as
none did in the recordings).

Every pod's outcome must be the recorded one: the node it was bound to, or the Unschedulable
message word for word, the filters' part and what the PostFilter plugins add (DynamicResources'
verdict, DefaultPreemption's), and for a refused pod its `status.nominatedNodeName`. Where the
recording says what became of the earlier pods when a pod came (the preemption cases), each must
be present, terminating or deleted as recorded — the victims chosen — and carry the recorded
DisruptionTarget condition (type, status, reason, message, observedGeneration) or none. Then
the ResourceClaims: names (up to their random suffix), owners, allocated devices (request,
driver, pool, device) and `reservedFor`; and the claim the scheduler made for extended
resources, as the pod's `status.extendedResourceClaimStatus` names it.
"""

import copy
import json
import re
from dataclasses import dataclass

import pytest

from sim.api import APIError
from sim.apiserver import APIServer
from sim.clock import VirtualClock
from sim.cluster import emulated_cluster
from tests.recorded import SCHEDULER

CASES = sorted(SCHEDULER.glob("*.json"))
SERVER_OWNED = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields")
RESOURCES = {"PriorityClass": "priorityclasses", "DeviceClass": "deviceclasses", "ResourceSlice": "resourceslices",
             "ResourceClaim": "resourceclaims", "ResourceClaimTemplate": "resourceclaimtemplates"}
CONDITION_FIELDS = ("type", "status", "reason", "message", "observedGeneration")
SUFFIX = re.compile(r"-[bcdfghjklmnpqrstvwxz2456789]{5}$")


@dataclass(frozen=True)
class Outcome:
    pod: str
    bound_to: str | None
    message: str | None
    nominated: str | None
    extended_claim: dict | None  # status.extendedResourceClaimStatus
    earlier: tuple[tuple[str, str, dict | None], ...]  # (pod, present/terminating/deleted, DisruptionTarget)


def as_sent(obj: dict) -> dict:
    """An object as the API returned it, stripped back to what a client sends."""
    obj = copy.deepcopy(obj)
    for key in SERVER_OWNED:
        obj["metadata"].pop(key, None)
    if obj.get("kind") != "Node":
        obj.pop("status", None)
    return obj


def load(path):
    return json.loads(path.read_text())


def disruption_target(pod: dict) -> dict | None:
    condition = next((c for c in pod["status"].get("conditions") or () if c["type"] == "DisruptionTarget"), None)
    return None if condition is None else {k: condition.get(k) for k in CONDITION_FIELDS}


def state_of(api: APIServer, name: str, namespace: str) -> tuple[str, str, dict | None]:
    try:
        pod = api.get("pods", name, namespace=namespace)
    except APIError as error:
        assert error.code == 404
        return name, "deleted", None
    return name, "terminating" if pod["metadata"].get("deletionTimestamp") else "present", disruption_target(pod)


def replay(case: dict) -> tuple[APIServer, list[Outcome]]:
    clock = VirtualClock()
    api = APIServer(clock=clock.now)
    namespace = case["namespace"]
    api.create("namespaces", {"metadata": {"name": namespace}})
    for node in case["nodes"]:
        api.create("nodes", as_sent(node))
    for obj in case["cluster_objects"] + case["namespaced_objects"]:
        api.create(RESOURCES[obj["kind"]], as_sent(obj), namespace=obj["metadata"].get("namespace"))
    cluster = emulated_cluster(api, clock)
    outcomes: list[Outcome] = []
    for pod in case["pods"]:
        api.create("pods", as_sent(pod), namespace=namespace)
        cluster.settle()
        stored = api.get("pods", pod["metadata"]["name"], namespace=namespace)
        refusal = next((c["message"] for c in stored["status"].get("conditions") or ()
                        if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"), None)
        earlier = tuple(state_of(api, o.pod, namespace) for o in outcomes)
        outcomes.append(Outcome(pod["metadata"]["name"], stored["spec"].get("nodeName"), refusal,
                                stored["status"].get("nominatedNodeName"),
                                stored["status"].get("extendedResourceClaimStatus"), earlier))
    cluster.close()
    return api, outcomes


def claim_summary(claim: dict) -> tuple:
    """(name without its random suffix when generated, owners, devices, reservedFor), as recorded."""
    owners = tuple(r["name"] for r in claim["metadata"].get("ownerReferences") or ())
    name = SUFFIX.sub("", claim["metadata"]["name"]) if owners else claim["metadata"]["name"]
    allocation = (claim.get("status") or {}).get("allocation")
    devices = None if allocation is None else tuple(
        (r["request"], r["driver"], r["pool"], r["device"]) for r in allocation["devices"]["results"])
    return name, owners, devices, tuple(r["name"] for r in (claim.get("status") or {}).get("reservedFor") or ())


def recorded_claim(claim: dict) -> tuple:
    name = SUFFIX.sub("", claim["name"]) if claim["owner"] else claim["name"]
    devices = None if claim["allocation"] is None else tuple(
        (r["request"], r["driver"], r["pool"], r["device"]) for r in claim["allocation"])
    return name, tuple(claim["owner"]), devices, tuple(claim["reservedFor"])


@pytest.fixture(scope="module", params=CASES, ids=lambda p: p.stem)
def replayed(request):
    case = load(request.param)
    api, outcomes = replay(case)
    return case, api, outcomes


def test_every_pod_is_bound_where_the_real_scheduler_bound_it_or_refused_with_its_words(replayed):
    case, _, outcomes = replayed
    expected = [(o["pod"], o["bound_to"], o.get("message")) for o in case["outcomes"]]
    assert [(o.pod, o.bound_to, o.message) for o in outcomes] == expected


def test_a_refused_pod_is_nominated_where_the_real_scheduler_nominated_it(replayed):
    case, _, outcomes = replayed
    expected = [(o["pod"], o["nominatedNodeName"]) for o in case["outcomes"] if "nominatedNodeName" in o]
    assert [(o.pod, o.nominated) for o in outcomes if o.bound_to is None] == expected


def test_the_earlier_pods_are_left_preempted_or_alone_as_recorded(replayed):
    case, _, outcomes = replayed
    emulated = {o.pod: o.earlier for o in outcomes}
    for outcome in case["outcomes"]:
        if "earlier_pods_after" in outcome:
            expected = tuple((p["pod"], p["state"], None if p.get("DisruptionTarget") is None else
                              {k: p["DisruptionTarget"].get(k) for k in CONDITION_FIELDS})
                             for p in outcome["earlier_pods_after"])
            assert emulated[outcome["pod"]] == expected, outcome["pod"]


def test_the_claims_afterwards_hold_the_recorded_devices_for_the_recorded_pods(replayed):
    case, api, _ = replayed
    emulated = sorted(claim_summary(c) for c in api.list("resourceclaims", namespace=case["namespace"]))
    assert emulated == sorted(recorded_claim(c) for c in case["resource_claims_after"])


def test_the_pods_name_the_claim_made_for_their_extended_resources(replayed):
    case, api, outcomes = replayed
    for outcome, emulated in zip(case["outcomes"], outcomes, strict=True):
        recorded = outcome.get("extendedResourceClaimStatus")
        status = emulated.extended_claim
        if recorded is None:
            assert status is None, outcome["pod"]
            continue
        assert status["requestMappings"] == recorded["requestMappings"]
        assert SUFFIX.sub("", status["resourceClaimName"]) == SUFFIX.sub("", recorded["resourceClaimName"])
        api.get("resourceclaims", status["resourceClaimName"], namespace=case["namespace"])


def test_every_case_preemption_included_is_replayed():
    assert len(CASES) == 20
    assert {load(p)["case"] for p in CASES} >= {
        "dra-shared-claim", "pod-affinity-zone", "topology-spread-do-not-schedule", "preemption-pinned-high-priority",
        "preemption-graceful-victims", "preemption-minimal-victims", "preemption-policy-never",
        "preemption-not-of-higher"}
