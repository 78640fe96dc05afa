"""The HTTP write path's economies keep the answers the same: JSON is written as before where orjson
refuses it, a patch never shares an object with its caller, and watch events are encoded once for
every watcher (tests/sim/test_watch_list.py shows each watcher its own event type of one change)."""

import json

from sim.apiserver import APIServer
from sim.patching import apply_json_patch
from sim.server import _EventLines
from sim.store import Change, to_json
from tests.sim.helpers import pod


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
