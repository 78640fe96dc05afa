"""Table answers: the rows `kubectl get` prints, cell by cell as the real server's printers make them."""

import pytest

from sim.apiserver import APIServer
from sim.kinds import Registry
from sim.server import RunningServer
from sim.tables import age, human_duration, json_path, pod_status, table
from tests import builders
from tests.sim.helpers import http, namespace, node, pod

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
NOW = 1_800_000_000.0
KINDS = Registry()


def stored_pod(phase="Pending", *, gated=False, containers=(), deleting=False, node_name="", ip="") -> dict:
    conditions = [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}] if gated else []
    if phase == "Running":
        conditions.append({"type": "Ready", "status": "True"})
    stored = builders.pod(created="2027-01-15T07:59:00Z", node_name=node_name, phase=phase,
                          containers=[builders.container("c")])
    if deleting:
        stored["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:30Z"
    stored["status"].update(conditions=conditions, containerStatuses=list(containers))
    if ip:
        stored["status"]["podIPs"] = [{"ip": ip}]
    return stored


RUNNING = {"name": "c", "ready": True, "restartCount": 0, "state": {"running": {"startedAt": "2027-01-15T07:59:30Z"}}}
COMPLETED = {"name": "c", "ready": False, "restartCount": 0,
             "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}


@pytest.mark.parametrize("pod_, shown", [
    (stored_pod(gated=True), "SchedulingGated"),
    (stored_pod(), "Pending"),
    (stored_pod("Running", containers=[RUNNING]), "Running"),
    (stored_pod("Succeeded", containers=[COMPLETED]), "Completed"),
    (stored_pod("Running", containers=[RUNNING], deleting=True), "Terminating"),
    (stored_pod("Succeeded", containers=[COMPLETED], deleting=True), "Completed"),
    (stored_pod(containers=[{"name": "c", "state": {"waiting": {"reason": "ContainerCreating"}}}]), "ContainerCreating"),
])
def test_the_status_column_is_the_phase_refined_as_printpod_refines_it(pod_, shown):
    assert pod_status(pod_) == shown


def test_a_pod_row_has_every_column_wide_ones_included():
    running = stored_pod("Running", containers=[RUNNING], node_name="gpu-node-0", ip="10.0.0.2")
    answer = table(KINDS.by_name("pods"), [running], NOW)
    assert [c["name"] for c in answer["columnDefinitions"]] == [
        "Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"]
    assert [c["priority"] for c in answer["columnDefinitions"]] == [0] * 5 + [1] * 4, "-o wide shows priority 1"
    (row,) = answer["rows"]
    assert row["cells"] == ["p", "1/1", "Running", "0", age("2027-01-15T07:59:00Z", NOW), "10.0.0.2", "gpu-node-0",
                            "<none>", "<none>"]
    assert row["object"]["kind"] == "PartialObjectMetadata" and row["object"]["metadata"]["name"] == "p"
    gated = table(KINDS.by_name("pods"), [stored_pod(gated=True)], NOW)["rows"][0]["cells"]
    assert gated[1:3] == ["0/1", "SchedulingGated"] and gated[5:7] == ["<none>", "<none>"]
    succeeded = table(KINDS.by_name("pods"), [stored_pod("Succeeded", containers=[COMPLETED])], NOW)["rows"][0]
    assert succeeded["conditions"][0]["type"] == "Completed"


def test_a_node_row_says_ready_and_cordoned():
    ready = {"metadata": {"name": "n1", "creationTimestamp": "2027-01-15T07:00:00Z",
                          "labels": {"node-role.kubernetes.io/gpu": ""}},
             "spec": {"unschedulable": True},
             "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.36.2"},
                        "addresses": [{"type": "InternalIP", "address": "192.168.0.1"}]}}
    (row,) = table(KINDS.by_name("nodes"), [ready], NOW)["rows"]
    assert row["cells"][:5] == ["n1", "Ready,SchedulingDisabled", "gpu", age("2027-01-15T07:00:00Z", NOW), "v1.36.2"]
    assert row["cells"][5:7] == ["192.168.0.1", "<none>"]
    unknown = {"metadata": {"name": "n2"}, "status": {}}
    assert table(KINDS.by_name("nodes"), [unknown], NOW)["rows"][0]["cells"][1:3] == ["Unknown", "<none>"]


def test_an_event_row_names_its_object_as_kubectl_get_events_prints_it():
    event = {"metadata": {"name": "g.1"}, "involvedObject": {"kind": "Gang", "name": "g"}, "reason": "NoFit",
             "message": "no room ", "type": "Warning", "count": 3, "source": {"component": "gangkeeper-controller"},
             "firstTimestamp": "2027-01-15T07:59:00Z", "lastTimestamp": "2027-01-15T07:59:30Z"}
    (row,) = table(KINDS.by_name("events"), [event], NOW)["rows"]
    assert row["cells"][1:4] == ["Warning", "NoFit", "gang/g"] and row["cells"][5:7] == ["gangkeeper-controller",
                                                                                          "no room"]
    assert row["cells"][8] == 3


def test_custom_resources_get_their_printer_columns_and_a_missing_value_is_null():
    columns = [{"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
               {"name": "Min", "type": "integer", "jsonPath": ".status.minCount"},
               {"name": "Topology", "type": "string", "jsonPath": ".spec.topology.required"},
               {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    gang = {"metadata": {"name": "g", "creationTimestamp": "2027-01-15T07:59:00Z"}, "spec": {"minCount": 2},
            "status": {"phase": "Waiting", "minCount": 2}}
    answer = table(KINDS.by_name("gangs"), [gang], NOW, printer_columns=columns)
    assert [c["name"] for c in answer["columnDefinitions"]] == ["Name", "Phase", "Min", "Topology", "Age"]
    assert answer["rows"][0]["cells"] == ["g", "Waiting", 2, None, age("2027-01-15T07:59:00Z", NOW)]
    plain = table(KINDS.by_name("jobs"), [gang], NOW)
    assert [c["name"] for c in plain["columnDefinitions"]] == ["Name", "Age"]


def test_json_path_and_human_durations():
    assert json_path({"a": {"b": [{"c": 1}]}}, ".a.b[0].c") == 1 and json_path({"a": {}}, ".a.b") is None
    assert [human_duration(s) for s in (-5, 0, 59, 119, 125, 600, 3600 * 5 + 60, 3600 * 30, 86400 * 3 + 3600,
                                        86400 * 400, 86400 * 365 * 3)] == \
        ["<invalid>", "0s", "59s", "119s", "2m5s", "10m", "5h1m", "30h", "3d1h", "400d", "3y"]


def test_the_server_answers_a_table_when_asked_and_json_otherwise(tmp_path):
    api = APIServer(clock=lambda: NOW)
    api.create("namespaces", namespace("ml"))
    api.create("nodes", node("n1"))
    api.create("pods", pod("gated", gates=["gangkeeper.io/gang"]), namespace="ml")
    api.create("gangs", {"apiVersion": "gangkeeper.io/v1alpha1", "kind": "Gang", "metadata": {"name": "g"},
                         "spec": {"minCount": 4}}, namespace="ml")
    with RunningServer(api) as served:
        code, listed = http(served.url, "GET", "/api/v1/namespaces/ml/pods", headers={"Accept": TABLE})
        assert code == 200 and listed["kind"] == "Table" and listed["apiVersion"] == "meta.k8s.io/v1"
        assert listed["rows"][0]["cells"][:3] == ["gated", "0/1", "SchedulingGated"]
        assert listed["metadata"]["resourceVersion"]
        code, one = http(served.url, "GET", "/apis/gangkeeper.io/v1alpha1/namespaces/ml/gangs/g",
                         headers={"Accept": TABLE})
        assert code == 200 and "Phase" in [c["name"] for c in one["columnDefinitions"]], \
            "the Gang CRD's printer columns, read from deploy/base"
        assert http(served.url, "GET", "/api/v1/nodes", headers={"Accept": "application/json"})[1]["kind"] == "NodeList"
        code, refused = http(served.url, "GET", "/api/v1/nodes", headers={"Accept": "application/vnd.kubernetes.protobuf"})
        assert code == 406 and refused["reason"] == "NotAcceptable"
