"""The in-process Kube subset: the Executor's calls reach the emulated API, refusals become typed errors."""

import pytest

from gangkeeper.controller.reading.kube import EVENTS, JSON_PATCH, PODS, AlreadyExists, Conflict, NotFound
from sim.apiserver import APIServer
from study.adapter import CONTROLLER, InProcessKube


@pytest.fixture()
def kube():
    api = APIServer()
    api.create("namespaces", {"metadata": {"name": "ml"}})
    api.create("pods", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}],
                                                            "schedulingGates": [{"name": "x"}]}}, namespace="ml")
    return InProcessKube(api)


def test_writes_go_through_as_the_controller(kube):
    answer = kube.patch(PODS, "ml", "p", {"metadata": {"annotations": {"a": "b"}}})
    assert answer["metadata"]["annotations"] == {"a": "b"}
    assert kube.create(EVENTS, "ml", {"metadata": {"name": "e"}, "reason": "R"})["metadata"]["name"] == "e"
    assert CONTROLLER.username.endswith(":gangkeeper-controller")


def test_refusals_are_the_controllers_typed_errors(kube):
    with pytest.raises(Conflict):  # a failed JSON Patch test is a conflict: decide again next pass
        kube.patch(PODS, "ml", "p", [{"op": "test", "path": "/metadata/resourceVersion", "value": "1"}], JSON_PATCH)
    with pytest.raises(AlreadyExists):
        kube.create(EVENTS, "ml", {"metadata": {"name": "e"}}) and kube.create(EVENTS, "ml", {"metadata": {"name": "e"}})
    with pytest.raises(NotFound):
        kube.delete(PODS, "ml", "nope")
    with pytest.raises(Conflict):
        kube.delete(PODS, "ml", "p", uid="not-its-uid")


def test_an_eviction_goes_to_the_eviction_api_for_that_very_pod(kube):
    uid = kube.api.get("pods", "p", namespace="ml")["metadata"]["uid"]
    with pytest.raises(Conflict):
        kube.evict("ml", "p", "not-its-uid")
    kube.evict("ml", "p", uid)
    assert kube.api.list("pods", namespace="ml") == [], "evicted: an unbound pod goes at once"
    with pytest.raises(NotFound):
        kube.evict("ml", "p", uid)


def test_a_patch_body_that_does_not_match_its_type_is_a_bug(kube):
    with pytest.raises(ValueError):
        kube.patch(PODS, "ml", "p", {"not": "a list"}, JSON_PATCH)
