"""What `kubectl delete`, `kubectl wait` and `kubectl describe` ask of lists and watches: watch-list
(`sendInitialEvents`, the bookmark that ends the initial events) and the Events' field selectors."""

import json
from http.client import HTTPConnection

import pytest

from sim.apiserver import APIServer
from sim.server import INITIAL_EVENTS_END, RunningServer
from tests.sim.helpers import http, namespace, pod

WATCH_LIST = "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"


@pytest.fixture()
def api():
    server = APIServer()
    server.create("namespaces", namespace("ml"))
    return server


@pytest.fixture()
def served(api):
    with RunningServer(api) as running:
        yield running


def events(served, path: str, count: int) -> list[dict]:
    """The first `count` events of a watch stream."""
    connection = HTTPConnection(served.url.removeprefix("http://"), timeout=10)
    connection.request("GET", path)
    answer = connection.getresponse()
    assert answer.status == 200
    try:
        return [json.loads(answer.readline()) for _ in range(count)]
    finally:
        connection.close()


def test_one_change_is_shown_to_each_watcher_as_its_selector_sees_it(api, served):
    """One encoding of a watch event serves every watcher, each as the event type it must see."""
    api.create("pods", pod("a", labels={"tier": "low"}), namespace="ml")
    api.patch("pods", "a", {"metadata": {"labels": {"tier": "high"}}}, namespace="ml")

    def shown(selector: str, count: int) -> list[tuple[str, str]]:
        path = f"/api/v1/namespaces/ml/pods?watch=true&resourceVersion=1&{selector}"
        return [(e["type"], e["object"]["metadata"]["name"]) for e in events(served, path, count)]

    assert shown("", 2) == [("ADDED", "a"), ("MODIFIED", "a")]
    assert shown("labelSelector=tier%3Dhigh", 1) == [("ADDED", "a")]
    assert shown("labelSelector=tier%3Dlow", 2) == [("ADDED", "a"), ("DELETED", "a")]
    assert shown("", 2) == [("ADDED", "a"), ("MODIFIED", "a")]


def test_a_watch_list_sends_the_objects_then_the_bookmark_that_ends_them(api, served):
    api.create("pods", pod("a"), namespace="ml")
    api.create("pods", pod("b"), namespace="ml")
    _, listed = http(served.url, "GET", "/api/v1/namespaces/ml/pods")
    stale = int(listed["metadata"]["resourceVersion"]) - 1
    added, also, bookmark = events(served, f"/api/v1/namespaces/ml/pods?{WATCH_LIST}&resourceVersion={stale}", 3)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in (added, also)] == [("ADDED", "a"), ("ADDED", "b")], \
        "every object, whatever resourceVersion is named (NotOlderThan)"
    assert bookmark["type"] == "BOOKMARK" and bookmark["object"]["kind"] == "Pod"
    assert bookmark["object"]["metadata"] == {"resourceVersion": listed["metadata"]["resourceVersion"],
                                              "annotations": {INITIAL_EVENTS_END: "true"}}


def test_a_watch_list_of_an_object_that_is_gone_ends_its_initial_events_at_once(api, served):
    """`kubectl delete` waits for the pod with a watch-list on its name: none, then the bookmark."""
    (bookmark,) = events(served, f"/api/v1/namespaces/ml/pods?{WATCH_LIST}&fieldSelector=metadata.name%3Dgone", 1)
    assert bookmark["type"] == "BOOKMARK" and bookmark["object"]["metadata"]["annotations"] == {
        INITIAL_EVENTS_END: "true"}


def test_changes_after_the_initial_events_follow_them(api, served):
    api.create("pods", pod("a"), namespace="ml")
    connection = HTTPConnection(served.url.removeprefix("http://"), timeout=10)
    connection.request("GET", f"/api/v1/namespaces/ml/pods?{WATCH_LIST}")
    answer = connection.getresponse()
    try:
        assert [json.loads(answer.readline())["type"] for _ in range(2)] == ["ADDED", "BOOKMARK"]
        api.patch("pods", "a", {"metadata": {"labels": {"seen": "yes"}}}, namespace="ml")
        changed = json.loads(answer.readline())
        assert changed["type"] == "MODIFIED" and changed["object"]["metadata"]["labels"] == {"seen": "yes"}
    finally:
        connection.close()


def test_send_initial_events_false_starts_from_now_without_them(api, served):
    api.create("pods", pod("a"), namespace="ml")
    connection = HTTPConnection(served.url.removeprefix("http://"), timeout=10)
    connection.request("GET", "/api/v1/namespaces/ml/pods?watch=1&sendInitialEvents=false"
                              "&resourceVersionMatch=NotOlderThan")
    answer = connection.getresponse()
    try:
        api.create("pods", pod("b"), namespace="ml")
        first = json.loads(answer.readline())
        assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "b")
    finally:
        connection.close()


def test_watch_list_options_are_refused_as_the_real_server_refuses_them(served):
    code, refused = http(served.url, "GET", "/api/v1/pods?watch=1&sendInitialEvents=true")
    assert code == 422 and refused["message"] == ('ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: '
                                                  'Forbidden: sendInitialEvents requires setting resourceVersionMatch '
                                                  'to NotOlderThan')
    code, refused = http(served.url, "GET", "/api/v1/pods?watch=1&resourceVersionMatch=NotOlderThan")
    assert code == 422 and "resourceVersionMatch is forbidden for watch unless sendInitialEvents" in refused["message"]


def event(name: str, kind: str, object_name: str, uid: str) -> dict:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
            "involvedObject": {"apiVersion": "v1", "kind": kind, "name": object_name, "namespace": "ml", "uid": uid},
            "reason": "Released", "message": "m", "type": "Normal", "source": {"component": "gangkeeper-controller"}}


def test_events_are_selected_by_their_involved_object_as_kubectl_describe_asks(api, served):
    api.create("events", event("p.1", "Pod", "p", "uid-p"), namespace="ml")
    api.create("events", event("p.2", "Pod", "p", "uid-old-p"), namespace="ml")
    api.create("events", event("g.1", "Gang", "g", "uid-g"), namespace="ml")
    describe = ("involvedObject.name%3Dp,involvedObject.namespace%3Dml,involvedObject.kind%3DPod,"
                "involvedObject.uid%3Duid-p")
    code, found = http(served.url, "GET", f"/api/v1/namespaces/ml/events?fieldSelector={describe}")
    assert code == 200 and [e["metadata"]["name"] for e in found["items"]] == ["p.1"]
    code, found = http(served.url, "GET", "/api/v1/events?fieldSelector=source%3Dgangkeeper-controller,"
                                          "involvedObject.kind!%3DPod")
    assert code == 200 and [e["metadata"]["name"] for e in found["items"]] == ["g.1"]
    code, refused = http(served.url, "GET", "/api/v1/events?fieldSelector=involvedObject.colour%3Dred")
    assert code == 400 and "field label not supported: involvedObject.colour" in refused["message"]
