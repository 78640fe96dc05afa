"""Every answer recorded from a real kube-apiserver v1.36 (fixtures/.../api/), reproduced over HTTP."""

import json
import urllib.parse
from http.client import HTTPConnection

import pytest

from sim.apiserver import APIServer
from sim.server import RunningServer
from tests.sim.helpers import fixture, http, mask_hunks, recorded_pod, without_volatile

NS = "ml-training"
PODS = f"/api/v1/namespaces/{NS}/pods"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
PIN_2 = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-node-2"]}]}]}}}


@pytest.fixture()
def cluster():
    """The recorded scenario: three gated training pods in an enforced namespace, created in this order."""
    api = APIServer()
    api.create("namespaces", {"metadata": {"name": NS, "labels": {"gangkeeper.io/enforce": "true"}}})
    for name in ("pytorch-dist-master-0", "pytorch-dist-worker-0", "trainer-workers-0-0-x7k2p"):
        api.create("pods", recorded_pod(name), namespace=NS)
    with RunningServer(api) as server:
        yield server


def assert_recorded(name: str, status: int, body: dict) -> None:
    recorded = fixture(f"api/{name}.json")
    assert status == recorded["status"]
    assert without_volatile(body) == without_volatile(recorded["body"])


def test_add_gate_after_create(cluster):
    status, body = http(cluster.url, "PATCH", f"{PODS}/pytorch-dist-worker-0",
                        [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": "x.io/late"}}], JSON_PATCH)
    assert_recorded("add-gate-after-create", status, body)


def test_set_nodename_by_patch(cluster):
    status, body = http(cluster.url, "PATCH", f"{PODS}/pytorch-dist-worker-0", {"spec": {"nodeName": "gpu-node-2"}},
                        MERGE_PATCH)
    recorded = fixture("api/set-nodename-by-patch.json")
    assert status == recorded["status"]
    assert mask_hunks(json.dumps(body)) == mask_hunks(json.dumps(recorded["body"]))


def test_jsonpatch_test_stale_rv(cluster):
    status, body = http(cluster.url, "PATCH", f"{PODS}/pytorch-dist-worker-0", [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
        {"op": "add", "path": "/metadata/annotations", "value": {"gangkeeper.io/reserved-node": "gpu-node-1"}}],
        JSON_PATCH)
    assert_recorded("jsonpatch-test-stale-rv", status, body)


def test_mergepatch_stale_rv(cluster):
    status, body = http(cluster.url, "PATCH", f"{PODS}/pytorch-dist-worker-0",
                        {"metadata": {"resourceVersion": "1", "annotations": {"x": "y"}}}, MERGE_PATCH)
    assert_recorded("mergepatch-stale-rv", status, body)


def test_affinity_set_while_gated(cluster):
    http(cluster.url, "PATCH", f"{PODS}/pytorch-dist-worker-0", {"metadata": {"annotations": {"bump": "1"}}},
         MERGE_PATCH)
    status, body = http(cluster.url, "PATCH", f"{PODS}/pytorch-dist-worker-0",
                        [{"op": "add", "path": "/spec/affinity", "value": PIN_2}], JSON_PATCH)
    recorded = fixture("api/affinity-set-while-gated.json")
    assert status == recorded["status"]
    for part in ("spec", "status"):
        assert without_volatile(body[part]) == without_volatile(recorded["body"][part])
    assert body["metadata"]["generation"] == recorded["body"]["metadata"]["generation"]
    assert body["metadata"]["annotations"] == recorded["body"]["metadata"]["annotations"]


def test_affinity_change_while_gated(cluster):
    http(cluster.url, "PATCH", f"{PODS}/pytorch-dist-worker-0", [{"op": "add", "path": "/spec/affinity", "value": PIN_2}],
         JSON_PATCH)
    status, body = http(cluster.url, "PATCH", f"{PODS}/pytorch-dist-worker-0", [{
        "op": "replace", "value": "gpu-node-1",
        "path": "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0"
                "/matchFields/0/values/0"}], JSON_PATCH)
    assert_recorded("affinity-change-while-gated", status, body)


def _bind_master(cluster) -> None:
    http(cluster.url, "PATCH", f"{PODS}/pytorch-dist-master-0", {"spec": {"schedulingGates": None}}, MERGE_PATCH)
    status, _ = http(cluster.url, "POST", f"{PODS}/pytorch-dist-master-0/binding", {
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "pytorch-dist-master-0"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-node-1"}})
    assert status == 201


def test_nodeselector_on_bound_pod(cluster):
    _bind_master(cluster)
    status, body = http(cluster.url, "PATCH", f"{PODS}/pytorch-dist-master-0", {"spec": {"nodeSelector": {"x": "y"}}},
                        MERGE_PATCH)
    recorded = fixture("api/nodeselector-on-bound-pod.json")
    assert status == recorded["status"]
    assert mask_hunks(json.dumps(body)) == mask_hunks(json.dumps(recorded["body"]))


def test_bind_already_bound(cluster):
    _bind_master(cluster)
    status, body = http(cluster.url, "POST", f"{PODS}/pytorch-dist-master-0/binding", {
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "pytorch-dist-master-0"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-node-2"}})
    assert_recorded("bind-already-bound", status, body)


def test_get_missing(cluster):
    assert_recorded("get-missing", *http(cluster.url, "GET", f"{PODS}/nope"))


def test_create_gated_with_nodename(cluster):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gn"},
           "spec": {"nodeName": "gpu-node-1", "schedulingGates": [{"name": "a.io/b"}],
                    "containers": [{"name": "c", "image": "busybox"}]}}
    assert_recorded("create-gated-with-nodename", *http(cluster.url, "POST", PODS, pod))


def test_create_duplicate(cluster):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1"},
           "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    assert http(cluster.url, "POST", PODS, pod)[0] == 201
    assert_recorded("create-duplicate", *http(cluster.url, "POST", PODS, pod))


def test_list_bad_selector(cluster):
    selector = urllib.parse.quote("gangkeeper.io/group in (")
    assert_recorded("list-bad-selector", *http(cluster.url, "GET", f"{PODS}?labelSelector={selector}"))


def test_watch_from_rv_1(cluster):
    address = urllib.parse.urlsplit(cluster.url)
    connection = HTTPConnection(address.hostname, address.port, timeout=10)
    connection.request("GET", f"{PODS}?watch=1&resourceVersion=1&timeoutSeconds=1")
    reply = connection.getresponse()
    assert reply.status == 200
    assert reply.getheader("Transfer-Encoding") == "chunked"
    events = [json.loads(line) for line in reply.read().splitlines() if line]
    recorded = fixture("api/watch-from-rv-1.json")["body"]
    assert [e["type"] for e in events] == [e["type"] for e in recorded]
    for got, want in zip(events, recorded):
        assert set(got) == set(want)
        assert without_volatile(got["object"]) == without_volatile(want["object"])
