import json

import pytest

from gangkeeper import integrations, names
from gangkeeper.controller.reading.kube import (
    GANGS,
    JSON_PATCH,
    NODES,
    PODS,
    PYTORCHJOBS,
    RESOURCES,
    AlreadyExists,
    Backoff,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    Kube,
    NotFound,
    Rejected,
    ServerError,
    Throttled,
    classify,
    error_from,
    load,
    parse_watch_line,
    retry_after_seconds,
    split_lines,
)
from gangkeeper.integrations import gang, native_pod_group, pytorchjob
from sim.kubeconfig import write_kubeconfig
from sim.server import RunningServer
from tests.builders import pod
from tests.recorded import API

FIXTURES = API


def fixture(name):
    return json.loads((FIXTURES / f"{name}.json").read_text())


# --- classification of real answers (pure) ---------------------------------------------------

EXPECTED = {
    "jsonpatch-test-stale-rv": Conflict,
    "mergepatch-stale-rv": Conflict,
    "bind-already-bound": Conflict,
    "create-duplicate": AlreadyExists,
    "add-gate-after-create": Invalid,
    "affinity-change-while-gated": Invalid,
    "set-nodename-by-patch": Invalid,
    "nodeselector-on-bound-pod": Invalid,
    "create-gated-with-nodename": Invalid,
    "get-missing": NotFound,
    "list-bad-selector": Rejected,
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_recorded_refusal_is_classified(name):
    recorded = fixture(name)
    assert classify(recorded["status"], recorded["body"]) is EXPECTED[name]


def test_the_table_covers_every_recorded_refusal():
    refusals = {p.stem for p in FIXTURES.glob("*.json") if json.loads(p.read_text())["status"] >= 400}
    assert refusals == set(EXPECTED)


def test_a_failed_patch_test_is_a_conflict_only_in_its_exact_shape():
    body = fixture("jsonpatch-test-stale-rv")["body"]
    assert classify(422, body) is Conflict
    assert classify(422, {**body, "details": {"causes": [{"field": "metadata.labels"}]}}) is Invalid
    assert classify(422, {**body, "message": "Pod \"p\" is invalid"}) is Invalid
    assert classify(400, body) is Rejected


@pytest.mark.parametrize("status, kind, temporary", [
    (403, Forbidden, False), (404, NotFound, False), (410, Gone, False), (401, Rejected, False),
    (415, Rejected, False), (409, Conflict, False), (429, Throttled, True), (500, ServerError, True),
    (503, ServerError, True), (504, ServerError, True), (0, ServerError, True),
])
def test_status_codes(status, kind, temporary):
    assert classify(status, None) is kind
    assert kind.temporary is temporary


def test_error_from_keeps_the_status_body():
    error = error_from(422, json.dumps(fixture("add-gate-after-create")["body"]).encode())
    assert isinstance(error, Invalid) and error.reason == "Invalid"
    assert error.body["details"]["causes"][0]["field"] == "spec.schedulingGates[1].name"


def test_error_from_a_body_that_is_not_a_status():
    error = error_from(502, b"<html>Bad Gateway</html>")
    assert isinstance(error, ServerError) and "Bad Gateway" in error.message


@pytest.mark.parametrize("header, body, seconds", [
    ("3", None, 3.0), (" 7 ", None, 7.0), (None, {"details": {"retryAfterSeconds": 2}}, 2.0),
    ("Wed, 21 Oct 2026 07:28:00 GMT", {"details": {"retryAfterSeconds": 1}}, 1.0),
    ("soon", None, None), (None, {"details": {}}, None), (None, None, None),
])
def test_retry_after(header, body, seconds):
    assert retry_after_seconds(header, body) == seconds


# --- backoff, watch lines, paths (pure) ------------------------------------------------------

def test_backoff_doubles_up_to_the_cap_and_resets():
    backoff = Backoff(initial=1, cap=10, random=lambda: 0.0)
    assert [backoff.next() for _ in range(6)] == [1, 2, 4, 8, 10, 10]
    backoff.reset()
    assert backoff.next() == 1


def test_backoff_jitter_stays_between_half_and_whole_delay():
    assert Backoff(initial=4, cap=30, random=lambda: 0.999999).next() == pytest.approx(2, abs=1e-5)
    assert all(0.4 <= Backoff(initial=0.8).next() <= 0.8 for _ in range(100))


def test_lines_are_joined_across_chunks_and_blank_lines_skipped():
    chunks = [b'{"a":', b'1}\n\n{"b"', b':2}\n{"c":3}']
    assert list(split_lines(chunks)) == [b'{"a":1}', b'{"b":2}', b'{"c":3}']


def test_recorded_watch_events_parse():
    events = fixture("watch-from-rv-1")["body"]
    stream = b"".join(json.dumps(e).encode() + b"\n" for e in events)
    parsed = [parse_watch_line(line) for line in split_lines([stream[i:i + 100] for i in range(0, len(stream), 100)])]
    assert [kind for kind, _ in parsed] == ["ADDED"] * 3
    assert [obj["metadata"]["resourceVersion"] for _, obj in parsed] == ["224", "225", "226"]


@pytest.mark.parametrize("line", [b"not json", b"[1,2]", b'{"type":"ADDED"}', b'{"type":1,"object":{}}',
                                  b'{"type":"ADDED","object":[]}'])
def test_malformed_watch_lines(line):
    with pytest.raises(ValueError):
        parse_watch_line(line)


def test_paths():
    assert PODS.path("ml", "p", "binding") == "/api/v1/namespaces/ml/pods/p/binding"
    assert NODES.path("ignored", "n1") == "/api/v1/nodes/n1"
    assert GANGS.path("ml", "g", "status") == "/apis/gangkeeper.io/v1alpha1/namespaces/ml/gangs/g/status"
    assert PYTORCHJOBS.path() == "/apis/kubeflow.org/v1/pytorchjobs"
    native = native_pod_group.RESOURCE
    assert (native.group, native.version) == names.NATIVE_POD_GROUP_API[:2]
    assert {"pods", "gangs.gangkeeper.io", "podgroups.scheduling.volcano.sh", "leases.coordination.k8s.io"} \
        <= set(RESOURCES)


def test_the_workload_resources_are_the_integrations_own():
    assert all(RESOURCES[resource.name] is resource for resource in integrations.RESOURCES)
    assert GANGS is gang.RESOURCE and PYTORCHJOBS is pytorchjob.RESOURCE


# --- over HTTP with the real client, against the emulated API server -------------------------

def created(api, *pods):
    for obj in pods:
        api.create("pods", obj)
    return api.store.resource_version


def lists(served):
    return [request.query for request in served.requests if request.verb == "list"]


def test_list_reads_every_page(api, served, kube):
    rv = created(api, *(pod(f"p{i}") for i in range(5)))
    items, resource_version = kube.with_options(page_size=2).list(PODS, "ml")
    assert [i["metadata"]["name"] for i in items] == [f"p{i}" for i in range(5)]
    assert resource_version == str(rv)
    assert [query.get("limit") for query in lists(served)] == ["2", "2", "2"]


def test_an_expired_continuation_lists_again_in_one_request(api, served, kube):
    created(api, pod("p"))
    served.faults.answer_next("list", "/api/v1/pods", 410, {"kind": "Status", "code": 410, "reason": "Expired"})
    items, _ = kube.list(PODS, label_selector="a=b")
    assert items == []
    assert [request.query for request in served.requests] == [{"labelSelector": "a=b", "limit": "500"},
                                                               {"labelSelector": "a=b"}]


def test_get_create_patch_delete(kube):
    made = kube.create(PODS, "ml", pod("p", labels={"app": "x"}))
    with pytest.raises(AlreadyExists):
        kube.create(PODS, "ml", pod("p"))
    patched = kube.patch(PODS, "ml", "p", {"metadata": {"resourceVersion": made["metadata"]["resourceVersion"],
                                                        "labels": {"app": "y"}}})
    assert kube.get(PODS, "ml", "p")["metadata"]["labels"] == {"app": "y"} == patched["metadata"]["labels"]
    with pytest.raises(Conflict):  # stale resourceVersion
        kube.patch(PODS, "ml", "p", {"metadata": {"resourceVersion": made["metadata"]["resourceVersion"]}})
    with pytest.raises(Conflict):  # another object of the same name
        kube.delete(PODS, "ml", "p", uid="not-the-uid")
    kube.delete(PODS, "ml", "p", uid=made["metadata"]["uid"])
    with pytest.raises(NotFound):
        kube.get(PODS, "ml", "p")


def test_recorded_refusals_arrive_as_typed_errors(served, kube):
    path = "/api/v1/namespaces/ml/pods/p"
    served.faults.answer_next("patch", path, 422, fixture("jsonpatch-test-stale-rv")["body"])
    with pytest.raises(Conflict):
        kube.patch(PODS, "ml", "p", [{"op": "test", "path": "/metadata/resourceVersion", "value": "1"}], JSON_PATCH)
    served.faults.answer_next("patch", path, 422, fixture("add-gate-after-create")["body"])
    with pytest.raises(Invalid) as refused:
        kube.patch(PODS, "ml", "p", [{"op": "add", "path": "/spec/schedulingGates/-", "value": {}}], JSON_PATCH)
    assert refused.value.body["details"]["causes"][0]["reason"] == "FieldValueForbidden"
    assert [request.verb for request in served.requests] == ["patch", "patch"]


def test_a_json_patch_must_be_a_list():
    with pytest.raises(ValueError, match="list of operations"):
        Kube.patch(None, PODS, "ml", "p", {"op": "add"}, JSON_PATCH)


def test_throttling_honours_retry_after(api, served, kube, sleeps):
    created(api, pod("p"))
    served.faults.answer_next("get", "/api/v1/namespaces/ml/pods/p", 429, {"kind": "Status", "code": 429},
                              {"Retry-After": "3"})
    assert kube.get(PODS, "ml", "p")["metadata"]["name"] == "p"
    assert sleeps == [3.0]


def test_server_errors_are_retried_with_backoff_then_raised(served, kube, sleeps):
    for _ in range(5):
        served.faults.answer_next("get", "/api/v1/nodes/n", 500, {"kind": "Status", "code": 500,
                                                                   "reason": "InternalError"})
    with pytest.raises(ServerError):
        kube.with_options(retries=4).get(NODES, None, "n")
    assert len(sleeps) == 4 and all(0 < s <= 10 for s in sleeps)
    assert sum(1 for request in served.requests if request.path == "/api/v1/nodes/n") == 5


def test_no_answer_is_a_temporary_error(api, tmp_path):
    with RunningServer(api) as gone:
        config = write_kubeconfig(tmp_path / "kubeconfig", gone.url, "token")
    with pytest.raises(ServerError) as failed:
        load(str(config), retries=0).get(PODS, "ml", "p")
    assert failed.value.status == 0 and failed.value.temporary


def test_patch_status_goes_to_the_subresource(api, served, kube):
    api.create(GANGS.name, {"metadata": {"name": "g", "namespace": "ml"}})
    kube.patch_status(GANGS, "ml", "g", {"status": {"phase": "Waiting"}})
    assert served.requests[-1][:2] == ("patch", "/apis/gangkeeper.io/v1alpha1/namespaces/ml/gangs/g/status")
    assert api.get(GANGS.name, "g", namespace="ml")["status"] == {"phase": "Waiting"}


def test_served_follows_discovery_and_caches_it(api, served, tmp_path):
    now = [0.0]
    client = load(str(write_kubeconfig(tmp_path / "kc", served.url, "token")), clock=lambda: now[0],
                  discovery_ttl=60)
    assert client.served("", "v1", "pods")
    assert not client.served(*names.PYTORCHJOB_API)
    api.kinds.serve(PYTORCHJOBS.name)
    assert not client.served(*names.PYTORCHJOB_API)  # cached
    now[0] = 60.0
    assert client.served(*names.PYTORCHJOB_API)
    assert not client.served("kubeflow.org", "v1", "tfjobs")
    assert sum(1 for request in served.requests if request.path == "/apis/kubeflow.org/v1") == 2


def test_watch_streams_events_bookmarks_and_raises_410(api, served, kube):
    start = str(created(api, pod("a")))
    created(api, pod("b"))
    pods = api.kind(PODS.name)
    served.faults.act_on_watch(pods, "bookmark")
    served.faults.act_on_watch(pods, "expire")
    seen = []
    with pytest.raises(Gone):
        for kind, obj in kube.watch(PODS, start, 30):
            seen.append((kind, obj["metadata"].get("name")))
    assert seen == [("ADDED", "b"), ("BOOKMARK", None)]
    assert served.requests[-1].query["allowWatchBookmarks"] == "true"


def test_a_cut_watch_is_a_temporary_error(api, served, kube):
    served.faults.act_on_watch(api.kind(PODS.name), "cut")
    with pytest.raises(ServerError):
        list(kube.watch(PODS, str(api.store.resource_version), 30))


def test_a_watch_refused_with_410(served, kube):
    served.faults.answer_next("watch", "/api/v1/pods", 410, {"kind": "Status", "code": 410, "reason": "Expired"})
    with pytest.raises(Gone):
        kube.watch(PODS, "1", 30)


def test_a_watch_ends_when_the_server_ends_it(api, kube):
    rv = str(api.store.resource_version)
    assert list(kube.watch(PODS, rv, 1)) == [("BOOKMARK", {"kind": "Pod", "apiVersion": "v1",
                                                           "metadata": {"resourceVersion": rv}})], \
        "nothing changed: the bookmark the idle stream sends, then its end"


def test_list_transforms_page_by_page_and_drops_none(api, kube):
    created(api, *(pod(f"p{i}") for i in range(5)))
    names_kept, _ = kube.with_options(page_size=2).list(
        PODS, transform=lambda obj: None if obj["metadata"]["name"] == "p3" else obj["metadata"]["name"])
    assert names_kept == ["p0", "p1", "p2", "p4"]


def test_an_eviction_names_the_pod_and_its_uid_and_a_budgets_refusal_is_not_retried(served, kube, sleeps):
    path = "/api/v1/namespaces/ml/pods/p/eviction"
    served.faults.answer_next("create", path, 201, {"kind": "Status", "apiVersion": "v1", "status": "Success",
                                                    "code": 201})
    kube.evict("ml", "p", "uid-p")
    assert served.requests[-1][:2] == ("create", path)
    refusal = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 429, "reason": "TooManyRequests",
               "message": "Cannot evict pod as it would violate the pod's disruption budget.",
               "details": {"causes": [{"reason": "DisruptionBudget",
                                       "message": "The disruption budget web needs 2 healthy pods and has 2 currently"}]}}
    served.faults.answer_next("create", path, 429, refusal)
    with pytest.raises(Throttled) as refused:
        kube.evict("ml", "p", "uid-p")
    assert "disruption budget" in str(refused.value) and sleeps == []


def test_the_resource_versions_of_a_group_are_read_by_label_and_a_list_without_items_is_a_bad_answer(api, served,
                                                                                                     kube):
    created(api, pod("a", labels={"app": "x"}), pod("b", labels={"app": "y"}))
    versions = kube.resource_versions(PODS, "ml", "app=x")
    assert list(versions) == ["a"] and versions["a"] == api.get("pods", "a", namespace="ml")["metadata"][
        "resourceVersion"]
    served.faults.answer_next("list", "/api/v1/namespaces/ml/pods", 200, {"kind": "Status"})
    with pytest.raises(ServerError) as bad:
        kube.resource_versions(PODS, "ml", "app=x")
    assert bad.value.reason == "BadResponse"
