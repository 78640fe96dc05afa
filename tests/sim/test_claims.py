"""The emulated resourceclaim controller, with the scheduler, on the emulated API server."""

import pytest

from sim.claims import ClaimController, generate_name
from sim.cluster import Cluster
from sim.scheduler import Scheduler
from sim.spec import load, node_manifests
from tests import builders

NS = "ml"
CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
         "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}
TEMPLATE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": NS},
            "spec": {"metadata": {"labels": {"team": "a"}, "annotations": {"note": "from-template"}},
                     "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                         "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1}}]}}}}
SUFFIX = r"[bcdfghjklmnpqrstvwxz2456789]{5}"


def gpu_slice(node, devices=1):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpus"},
            "spec": {"driver": "gpu.example.com", "nodeName": node, "pool": {"name": node, "generation": 1,
                                                                             "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}"} for i in range(devices)]}}


def pod(name, *, template="one-gpu", claim=None, gates=(), node_name=None):
    """A pod whose container uses the claim `gpu`: its own from `template`, or the shared `claim`."""
    entry = {"name": "gpu", **({"resourceClaimName": claim} if claim else {"resourceClaimTemplateName": template})}
    main = builders.container(image="busybox:1.36", resources={"claims": [{"name": "gpu"}]})
    return builders.pod(name, namespace=NS, gates=gates, node_name=node_name, containers=[main],
                        resourceClaims=[entry])


@pytest.fixture
def api(api):
    """The shared API server (tests/sim/conftest.py), with two nodes of GPUs as DRA devices."""
    for node in node_manifests(load("nodes: [{count: 2, gpusPerNode: 0}]")):
        api.create("nodes", node)
        api.create("resourceslices", gpu_slice(node["metadata"]["name"]))
    api.create("deviceclasses", CLASS)
    return api


def run(api, clock, *, template=True):
    if template:
        api.create("resourceclaimtemplates", TEMPLATE, namespace=NS)
    return Cluster(api, clock, [Scheduler(api), ClaimController(api)])


def claims(api):
    return {c["metadata"]["name"]: c for c in api.list("resourceclaims", namespace=NS)}


def test_a_gated_pod_gets_its_claim_from_the_template_at_once(api, clock):
    cluster = run(api, clock)
    api.create("pods", pod("p0", gates=("gangkeeper.io/gang",)), namespace=NS)
    cluster.settle()
    [(name, claim)] = claims(api).items()
    stored = api.get("pods", "p0", namespace=NS)
    assert stored["status"]["resourceClaimStatuses"] == [{"name": "gpu", "resourceClaimName": name}]
    assert claim["metadata"]["name"].startswith("p0-gpu-") and len(name) == len("p0-gpu-") + 5
    assert claim["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "p0",
                                                     "uid": stored["metadata"]["uid"], "controller": True,
                                                     "blockOwnerDeletion": True}]
    assert claim["metadata"]["annotations"] == {"note": "from-template", "resource.kubernetes.io/pod-claim-name": "gpu"}
    assert claim["metadata"]["labels"] == {"team": "a"}
    assert claim["spec"] == TEMPLATE["spec"]["spec"] and claim["status"] == {}
    assert "generation" not in claim["metadata"]
    assert stored["spec"].get("nodeName") is None, "still gated"


def test_long_names_are_cut_in_proportion():
    assert generate_name("p0", "gpu") == "p0-gpu-"
    name = generate_name("a" * 60, "b" * 20)
    assert name == "a" * 41 + "-" + "b" * 13 and len(name) <= 57


def test_a_claim_waits_for_its_template_and_the_pod_for_its_claim(api, clock):
    cluster = run(api, clock, template=False)
    api.create("pods", pod("p0"), namespace=NS)
    cluster.settle()
    assert not claims(api) and "conditions" not in api.get("pods", "p0", namespace=NS)["status"]
    api.create("resourceclaimtemplates", TEMPLATE, namespace=NS)
    cluster.settle()
    [claim] = claims(api).values()
    assert api.get("pods", "p0", namespace=NS)["spec"]["nodeName"] == "node-0"
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["p0"]
    assert claim["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]


def test_a_claim_the_pod_already_owns_is_recorded_instead_of_made_again(api, clock):
    created = api.create("pods", pod("p0", gates=("x.io/hold",)), namespace=NS)
    owned = dict(TEMPLATE["spec"], metadata={
        "name": "p0-gpu-early", "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p0", "uid": created["metadata"]["uid"],
                             "controller": True}]})
    api.create("resourceclaims", owned, namespace=NS)
    run(api, clock).settle()
    assert set(claims(api)) == {"p0-gpu-early"}
    assert api.get("pods", "p0", namespace=NS)["status"]["resourceClaimStatuses"] == [
        {"name": "gpu", "resourceClaimName": "p0-gpu-early"}]


def test_the_claims_of_a_deleted_pod_go_and_free_their_device(api, clock):
    cluster = run(api, clock)
    for name in ("p0", "p1", "p2"):
        api.create("pods", pod(name), namespace=NS)
    cluster.settle()
    bound = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in api.list("pods", namespace=NS)}
    assert sorted(n for n in bound.values() if n) == ["node-0", "node-1"] and bound["p2"] is None
    first = next(name for name, node in bound.items() if node)
    api.delete("pods", first, namespace=NS, grace_period_seconds=0)
    cluster.settle()
    assert not [c for c in claims(api) if c.startswith(f"{first}-")], "deallocated, unprotected, collected"
    assert api.get("pods", "p2", namespace=NS)["spec"]["nodeName"] == bound[first]


def test_a_finished_pod_releases_its_claim_which_is_then_deleted(api, clock):
    cluster = run(api, clock)
    api.create("pods", pod("p0"), namespace=NS)
    cluster.settle()
    api.patch("pods", "p0", {"status": {"phase": "Succeeded"}}, namespace=NS, subresource="status")
    cluster.settle()
    assert not claims(api)
    assert api.get("pods", "p0", namespace=NS)["status"]["phase"] == "Succeeded"


def test_a_shared_claim_stays_allocated_while_one_of_its_pods_runs(api, clock):
    cluster = run(api, clock)
    api.create("resourceclaims", dict(TEMPLATE["spec"], metadata={"name": "shared"}), namespace=NS)
    for name in ("p0", "p1"):
        api.create("pods", pod(name, claim="shared"), namespace=NS)
    cluster.settle()
    shared = claims(api)["shared"]
    assert [r["name"] for r in shared["status"]["reservedFor"]] == ["p0", "p1"]
    [node] = {api.get("pods", n, namespace=NS)["spec"]["nodeName"] for n in ("p0", "p1")}
    api.patch("pods", "p0", {"status": {"phase": "Succeeded"}}, namespace=NS, subresource="status")
    cluster.settle()
    shared = claims(api)["shared"]
    assert [r["name"] for r in shared["status"]["reservedFor"]] == ["p1"]
    assert shared["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [node]
    api.patch("pods", "p1", {"status": {"phase": "Failed"}}, namespace=NS, subresource="status")
    cluster.settle()
    shared = claims(api)["shared"]
    assert shared["status"] == {} and "finalizers" not in shared["metadata"], "kept: it is not made for a pod"


def test_a_pod_bound_without_the_scheduler_gets_its_allocated_claim_reserved(api, clock):
    cluster = run(api, clock)
    api.create("resourceclaims", dict(TEMPLATE["spec"], metadata={"name": "shared"}), namespace=NS)
    api.create("pods", pod("p0", claim="shared"), namespace=NS)
    cluster.settle()
    api.create("pods", pod("direct", claim="shared", node_name="node-1"), namespace=NS)
    cluster.settle()
    assert [r["name"] for r in claims(api)["shared"]["status"]["reservedFor"]] == ["p0", "direct"]
