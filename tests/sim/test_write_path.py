"""The HTTP write path's economies keep the answers the same: one encoding of a watch event serves
every watcher as the event type it must see, JSON is written as before where orjson refuses it,
and a patch never shares an object with its caller."""

import json
import urllib.parse
from http.client import HTTPConnection

import pytest

from sim.apiserver import APIServer
from sim.patching import apply_json_patch
from sim.server import RunningServer, _EventLines
from sim.store import Change, to_json
from tests.sim.helpers import namespace, pod


@pytest.fixture()
def api():
    server = APIServer()
    server.create("namespaces", namespace("ml"))
    return server


@pytest.fixture()
def served(api):
    with RunningServer(api) as running:
        yield running


def _address(served) -> tuple[str, int]:
    url = urllib.parse.urlsplit(served.url)
    return url.hostname, url.port


def _events(served, query: str, count: int) -> list[tuple[str, str]]:
    connection = HTTPConnection(*_address(served), timeout=5)
    connection.request("GET", f"/api/v1/namespaces/ml/pods?watch=true&resourceVersion=1&{query}")
    response = connection.getresponse()
    events = [json.loads(response.readline()) for _ in range(count)]  # http.client reads the chunks
    connection.close()
    return [(e["type"], e["object"]["metadata"]["name"]) for e in events]


def test_one_change_is_shown_to_each_watcher_as_its_selector_sees_it(api, served):
    api.create("pods", pod("a", labels={"tier": "low"}), namespace="ml")
    api.patch("pods", "a", {"metadata": {"labels": {"tier": "high"}}}, namespace="ml")
    assert _events(served, "", 2) == [("ADDED", "a"), ("MODIFIED", "a")]
    assert _events(served, "labelSelector=tier%3Dhigh", 1) == [("ADDED", "a")]
    assert _events(served, "labelSelector=tier%3Dlow", 2) == [("ADDED", "a"), ("DELETED", "a")]
    assert _events(served, "", 2) == [("ADDED", "a"), ("MODIFIED", "a")]


def test_json_is_written_as_the_json_module_writes_it_where_orjson_refuses():
    assert to_json({1: "one", "big": 2 ** 70}) == json.dumps({1: "one", "big": 2 ** 70}, separators=(",", ":")).encode()
    assert json.loads(to_json({"a": [1, "é", None, 1.5]})) == {"a": [1, "é", None, 1.5]}


def test_a_json_patch_shares_nothing_with_its_object_or_its_operations():
    obj = {"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"list": [{"k": 1}]}}
    value = {"nested": ["v"]}
    patched = apply_json_patch(obj, [{"op": "add", "path": "/spec/extra", "value": value},
                                     {"op": "copy", "from": "/spec/list", "path": "/spec/again"}])
    patched["spec"]["extra"]["nested"].append("changed")
    patched["spec"]["again"][0]["k"] = 2
    patched["metadata"]["labels"]["x"] = "2"
    assert value == {"nested": ["v"]}
    assert obj == {"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"list": [{"k": 1}]}}
    assert patched["spec"]["list"] == [{"k": 1}]


def test_the_latest_events_are_encoded_once_and_only_the_latest_are_kept():
    kind = APIServer().kinds.by_name("pods")
    lines = _EventLines(kept=2)
    changes = [Change(rv, kind, "MODIFIED", pod(f"p{rv}")) for rv in (1, 2, 3)]
    first = lines.line(changes[0], "MODIFIED")
    assert lines.line(changes[0], "MODIFIED") is first  # the same bytes for the next watcher
    assert json.loads(first) == {"type": "MODIFIED", "object": pod("p1")}
    assert json.loads(lines.line(changes[0], "DELETED"))["type"] == "DELETED"
    lines.line(changes[1], "MODIFIED")
    lines.line(changes[2], "MODIFIED")
    assert lines.line(changes[0], "MODIFIED") is not first  # forgotten: encoded again
