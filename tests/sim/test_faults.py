"""Faults the HTTP front end injects when a test scripts them: one request answered as told, an
open watch sent a bookmark, ended with 410 or dropped mid-chunk; and the requests as they arrived."""

import http.client
import json

import pytest

from sim.apiserver import APIServer
from sim.server import RunningServer
from tests.sim.helpers import http as request
from tests.sim.helpers import namespace, pod

EXPIRED = {"kind": "Status", "code": 410, "reason": "Expired"}


@pytest.fixture()
def api():
    server = APIServer()
    server.create("namespaces", namespace("ml"))
    return server


@pytest.fixture()
def served(api):
    with RunningServer(api) as running:
        yield running


def watch(served, query: str) -> list[dict]:
    """Every event of a watch stream of pods, until the server ends it (a dropped connection raises)."""
    connection = http.client.HTTPConnection(served.url.removeprefix("http://"), timeout=10)
    connection.request("GET", f"/api/v1/pods?watch=1&{query}")
    answer = connection.getresponse()
    try:
        return [json.loads(line) for line in iter(answer.readline, b"")]
    finally:
        connection.close()


def test_a_scripted_answer_is_sent_once_to_the_next_request_of_its_verb_on_its_path(served):
    served.faults.answer_next("get", "/api/v1/namespaces/ml", 429, {"kind": "Status", "code": 429},
                              {"Retry-After": "3"})
    assert request(served.url, "GET", "/api/v1/namespaces")[0] == 200, "another verb on another path: served"
    connection = http.client.HTTPConnection(served.url.removeprefix("http://"), timeout=10)
    connection.request("GET", "/api/v1/namespaces/ml")
    answer = connection.getresponse()
    assert (answer.status, answer.getheader("Retry-After"), json.loads(answer.read())) == \
        (429, "3", {"kind": "Status", "code": 429})
    assert request(served.url, "GET", "/api/v1/namespaces/ml")[0] == 200, "once"


def test_requests_are_kept_as_they_arrived_with_their_verb(api, served):
    request(served.url, "GET", "/api/v1/namespaces/ml")
    request(served.url, "GET", "/api/v1/pods?limit=2")
    request(served.url, "PATCH", "/api/v1/namespaces/ml", {"metadata": {"labels": {"a": "b"}}},
            "application/merge-patch+json")
    served.faults.act_on_watch(api.kind("pods"), "expire")
    watch(served, "timeoutSeconds=30")
    assert served.requests == [("get", "/api/v1/namespaces/ml", {}), ("list", "/api/v1/pods", {"limit": "2"}),
                               ("patch", "/api/v1/namespaces/ml", {}),
                               ("watch", "/api/v1/pods", {"watch": "1", "timeoutSeconds": "30"})]


def test_acts_on_a_watch_follow_the_events_waiting_for_it_in_the_order_given(api, served):
    start = api.store.resource_version
    api.create("pods", pod("a"), namespace="ml")
    pods = api.kind("pods")
    served.faults.act_on_watch(pods, "bookmark")
    served.faults.act_on_watch(pods, "expire")
    events = watch(served, f"resourceVersion={start}&allowWatchBookmarks=true")
    assert [(event["type"], event["object"]["metadata"].get("name")) for event in events] == \
        [("ADDED", "a"), ("BOOKMARK", None), ("ERROR", None)]
    rv = str(api.store.resource_version)
    assert events[1]["object"]["metadata"]["resourceVersion"] == rv
    assert {key: events[2]["object"][key] for key in ("code", "reason", "message")} == \
        {"code": 410, "reason": "Expired", "message": f"too old resource version: {rv} ({rv})"}


def test_a_bookmark_is_sent_only_to_a_watch_that_allows_them(api, served):
    pods = api.kind("pods")
    served.faults.act_on_watch(pods, "bookmark")
    served.faults.act_on_watch(pods, "expire")
    assert [event["type"] for event in watch(served, f"resourceVersion={api.store.resource_version}")] == ["ERROR"]


def test_a_cut_watch_loses_its_connection_in_the_middle_of_a_chunk(api, served):
    served.faults.act_on_watch(api.kind("pods"), "cut")
    with pytest.raises(http.client.HTTPException):
        watch(served, f"resourceVersion={api.store.resource_version}")


def test_an_act_that_is_none_of_the_three_is_refused(api, served):
    with pytest.raises(ValueError, match="'close' is none of bookmark, expire, cut"):
        served.faults.act_on_watch(api.kind("pods"), "close")
