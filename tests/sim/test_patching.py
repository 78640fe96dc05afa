import pytest

from sim.api import APIError
from sim.patching import apply_json_patch, apply_merge_patch, apply_strategic_merge_patch

POD = {"metadata": {"resourceVersion": "7", "labels": {"a": "1"}},
       "spec": {"containers": [{"name": "main", "image": "x:1"}, {"name": "side", "image": "y:1"}],
                "schedulingGates": [{"name": "example.com/other"}, {"name": "gangkeeper.io/gang"}],
                "tolerations": [{"key": "t", "operator": "Exists"}]}}


def test_json_patch_test_guard_passes_then_applies():
    patched = apply_json_patch(POD, [{"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                                     {"op": "remove", "path": "/spec/schedulingGates/1"}])
    assert patched["spec"]["schedulingGates"] == [{"name": "example.com/other"}]
    assert len(POD["spec"]["schedulingGates"]) == 2


@pytest.mark.parametrize("operations", [
    [{"op": "test", "path": "/metadata/resourceVersion", "value": "6"}],
    [{"op": "remove", "path": "/spec/nodeName"}],
    [{"op": "replace", "path": "/metadata/annotations/x", "value": "y"}],
])
def test_json_patch_that_cannot_apply_is_the_terse_422(operations):
    with pytest.raises(APIError) as refused:
        apply_json_patch(POD, operations)
    assert refused.value.code == 422
    assert refused.value.status["message"] == "the server rejected our request due to an error in our request"


def test_json_patch_escapes_slash_in_keys():
    patched = apply_json_patch(POD, [{"op": "add", "path": "/metadata/labels/gangkeeper.io~1group", "value": "g"}])
    assert patched["metadata"]["labels"]["gangkeeper.io/group"] == "g"


def test_merge_patch_replaces_lists_and_null_removes():
    patched = apply_merge_patch(POD, {"metadata": {"labels": {"a": None, "b": "2"}},
                                      "spec": {"schedulingGates": [{"name": "gangkeeper.io/gang"}]}})
    assert patched["metadata"]["labels"] == {"b": "2"}
    assert patched["spec"]["schedulingGates"] == [{"name": "gangkeeper.io/gang"}]
    assert patched["spec"]["containers"] == POD["spec"]["containers"]


def test_strategic_merge_deletes_one_gate_by_name():
    patched = apply_strategic_merge_patch(POD, {"spec": {"schedulingGates": [
        {"name": "gangkeeper.io/gang", "$patch": "delete"}]}})
    assert patched["spec"]["schedulingGates"] == [{"name": "example.com/other"}]


def test_strategic_merge_merges_containers_by_name_and_replaces_unkeyed_lists():
    patched = apply_strategic_merge_patch(POD, {"spec": {"containers": [{"name": "side", "image": "y:2"}],
                                                         "tolerations": [{"key": "u", "operator": "Exists"}]}})
    assert [c["image"] for c in patched["spec"]["containers"]] == ["x:1", "y:2"]
    assert patched["spec"]["tolerations"] == [{"key": "u", "operator": "Exists"}]


def test_strategic_merge_finalizers_merge_as_a_set():
    patched = apply_strategic_merge_patch({"metadata": {"finalizers": ["a"]}}, {"metadata": {"finalizers": ["a", "b"]}})
    assert patched["metadata"]["finalizers"] == ["a", "b"]
