"""Reading only what the informers' transforms read: each transform held to its shape, objects
read through a shape giving the same cache values as whole ones, and JSON off the shape read whole."""

import orjson
import pytest

from gangkeeper import names
from gangkeeper.controller.reading import shapes
from gangkeeper.controller.reading.informer import object_key
from gangkeeper.controller.reading.kube import PODS, Gone, parse_watch_line
from gangkeeper.controller.reading.nodes import node_from_api
from gangkeeper.controller.reading.pods import pod_facts
from tests.controller.builders import node_object, pod_object
from tests.recording import Recorded, recorded_objects


def listed_pod(**changes):
    """A pod as an API server lists it, with what the controller reads and much that it does not."""
    pod = pod_object("worker-0", gated=False, node_name="n1", phase="Running",
                     tolerations=[{"key": GPU_TAINT, "operator": "Exists", "effect": "NoSchedule"}],
                     affinity_terms=[{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}])
    pod["apiVersion"], pod["kind"] = "v1", "Pod"
    metadata = pod["metadata"]
    metadata.update(resourceVersion="42", deletionTimestamp="2025-01-01T00:10:00Z",
                    labels={names.GROUP_LABEL: "train", names.JOB_COMPLETION_INDEX: "0", "app": "train"},
                    ownerReferences=[{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u-job",
                                      "controller": True}],
                    managedFields=[{"manager": "kubelet", "fieldsV1": {f"f:field-{k}": {} for k in range(20)}}])
    metadata["annotations"].update({names.MIN_COUNT_ANNOTATION: "2", names.RELEASED_AT_ANNOTATION:
                                    "2025-01-01T00:01:00Z", names.TOPOLOGY_ANNOTATIONS[0]: "topology/zone"})
    spec = pod["spec"]
    container = spec["containers"][0]
    container.update(image="train:1", env=[{"name": f"VAR_{k}", "value": "x"} for k in range(20)],
                     ports=[{"containerPort": 80, "hostPort": 8080}], volumeMounts=[{"name": "data", "mountPath": "/d"}])
    spec.update(priority=100, preemptionPolicy="Never", volumes=[{"name": "data", "persistentVolumeClaim":
                                                                   {"claimName": "data"}}],
                resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
                topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                            "labelSelector": {"matchLabels": {"app": "train"}}}],
                initContainers=[{"name": "sidecar", "restartPolicy": "Always", "image": "proxy:1",
                                 "resources": {"requests": {"cpu": "1"}}}])
    pod["status"].update(conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                      "message": "0/3 nodes are available"}],
                         resourceClaimStatuses=[{"name": "gpu", "resourceClaimName": "worker-0-gpu-x"}],
                         containerStatuses=[{"name": "main", "ready": True, "image": "train:1"}])
    for key, value in changes.items():
        spec[key] = value
    return pod


GPU_TAINT = "nvidia.com/gpu"
POD_CASES = [listed_pod(), listed_pod(schedulingGates=[{"name": names.SCHEDULING_GATE}], nodeName=None),
             *recorded_objects("Pod")]
NODE_CASES = [node_object("n1", taints=[{"key": GPU_TAINT, "effect": "NoSchedule"}], unschedulable=True, zone="a"),
              *recorded_objects("Node")]


def test_the_recordings_give_each_transform_objects_to_read():
    assert len(POD_CASES) > 50 and len(NODE_CASES) > 10


@pytest.mark.parametrize("transform, shape, cases", [
    (pod_facts, shapes.Pod, POD_CASES), (node_from_api, shapes.Node, NODE_CASES)], ids=["pod_facts", "node_from_api"])
def test_every_key_a_transform_reads_is_in_its_shape(transform, shape, cases):
    """What `Reading` drops, the transform never reads: a key read that the shape does not name
    (or all the keys of a level) would make the controller decide on a field it never received."""
    reads: set = set()
    for obj in cases:
        transform(Recorded(obj, shape, "", reads))
        object_key(Recorded(obj, shape, "", reads))
        (Recorded(obj, shape, "", reads).get("metadata") or {}).get("resourceVersion")  # what the informer reads
    assert reads == set(), "read but not in the shape (controller/reading/shapes.py)"


@pytest.mark.parametrize("reader, transform, cases", [
    (shapes.PODS, pod_facts, POD_CASES), (shapes.NODES, node_from_api, NODE_CASES)], ids=["pods", "nodes"])
def test_an_object_read_through_its_shape_makes_the_same_cache_value(reader, transform, cases):
    page = orjson.dumps({"metadata": {"resourceVersion": "7", "continue": "next"}, "items": cases})
    read = reader.page(page)
    assert read["metadata"] == {"resourceVersion": "7", "continue": "next"}
    assert [transform(obj) for obj in read["items"]] == [transform(obj) for obj in cases]
    events = [reader.event(orjson.dumps({"type": "MODIFIED", "object": obj})) for obj in cases]
    assert [(event["type"], transform(event["object"])) for event in events] == \
        [("MODIFIED", transform(obj)) for obj in cases]


def test_what_no_transform_reads_is_left_out():
    (read,) = shapes.PODS.page(orjson.dumps({"items": [listed_pod()]}))["items"]
    assert "managedFields" not in read["metadata"] and "containerStatuses" not in read["status"]
    assert read["spec"]["containers"] == [{"name": "main", "ports": [{"hostPort": 8080}],
                                           "resources": {"requests": {"cpu": "4", "memory": "64Gi",
                                                                      "nvidia.com/gpu": "8"}}}]
    assert read["spec"]["initContainers"][0] == {"name": "sidecar", "restartPolicy": "Always",
                                                 "resources": {"requests": {"cpu": "1"}}}
    assert read["spec"]["volumes"] == [{"persistentVolumeClaim": {"claimName": "data"}}]
    assert read["status"]["conditions"] == [{"type": "PodScheduled", "reason": "Unschedulable",
                                             "message": "0/3 nodes are available"}]


def test_an_object_off_the_shape_is_read_whole():
    pod = listed_pod(containers=None)  # null where the shape expects a list
    assert shapes.PODS.page(orjson.dumps({"items": [pod]})) == {"items": [pod]}


def test_a_watch_line_that_is_no_event_is_refused_as_the_client_refuses_it():
    for line in (b"[1]", b"null", b"1", b'"x"', b'{"type": "ADDED", "object": [1]}'):
        with pytest.raises(ValueError, match="not a watch event"):
            parse_watch_line(line, shapes.PODS.event)


def test_json_nested_deeper_than_the_shapes_decode_is_read_whole():
    deep = b'{"items": [{"metadata": {"labels": {"a": ' + b"[" * 1000 + b"]" * 1000 + b"}}}]}"
    value, depth = shapes.PODS.page(deep)["items"][0]["metadata"]["labels"]["a"], 1
    while value:  # walked, not compared: comparing lists this deep exceeds Python's own recursion limit
        (value,), depth = value, depth + 1
    assert depth == 1000


def test_an_error_event_is_read_whole_and_malformed_json_is_refused():
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410, "reason": "Expired",
              "metadata": {}, "message": "too old resource version"}
    assert shapes.PODS.event(orjson.dumps({"type": "ERROR", "object": status})) == \
        {"type": "ERROR", "object": status}
    with pytest.raises(ValueError):
        shapes.PODS.page(b'{"items": [')


# --- over HTTP with the real client ---------------------------------------------------------

def test_list_and_watch_read_through_the_shape(api, served, kube):
    api.create("namespaces", {"metadata": {"name": "team"}})
    api.create("priorityclasses", {"metadata": {"name": "training"}, "value": 100, "preemptionPolicy": "Never"})
    created = listed_pod()
    del created["spec"]["priority"], created["spec"]["preemptionPolicy"]  # the server's to set, from the class
    resources = created["spec"]["containers"][0]["resources"]
    resources["limits"] = {GPU_TAINT: resources["requests"][GPU_TAINT]}  # the server refuses a GPU without a limit
    api.create("pods", {**created, "spec": {**created["spec"], "priorityClassName": "training"}})
    start = str(api.store.resource_version)
    items, _ = kube.list(PODS, reading=shapes.PODS)
    assert items and all("managedFields" not in item["metadata"] for item in items)
    assert all("managedFields" in obj["metadata"] for obj in api.list("pods")), "served whole, read through the shape"
    api.patch("pods", "worker-0", {"status": {"phase": "Succeeded"}}, namespace="team", subresource="status")
    api.create("nodes", node_object("n1"))
    served.faults.act_on_watch(api.kind(PODS.name), "expire")
    seen = []
    with pytest.raises(Gone):  # the ERROR event, read whole, is still the typed error of its Status
        for kind, obj in kube.watch(PODS, start, 30, reading=shapes.PODS):
            seen.append((kind, obj["status"]["phase"], obj["spec"]["priority"], "managedFields" in obj["metadata"]))
    assert seen == [("MODIFIED", "Succeeded", 100, False)]
