"""The pod writes' bodies (controller/deciding/patches.py), applied to pods as the API server applies them."""

import jsonpatch
import pytest

from gangkeeper import names
from gangkeeper.controller.deciding.patches import release_patch, reserve_patch
from gangkeeper.controller.reading.pods import pod_facts
from tests.controller.world import member_object

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def reserved_pod(**kwargs) -> dict:
    pod = member_object("p0", min_count=1, reserved_node="n1", **kwargs)
    pod["metadata"]["resourceVersion"] = "7"
    pod["spec"]["schedulingGates"].insert(0, {"name": "other.io/gate"})
    return pod


def test_the_reservation_is_the_annotation_guarded_by_the_resource_version_it_was_decided_on():
    assert reserve_patch("7", "n1") == {"metadata": {"resourceVersion": "7",
                                                     "annotations": {names.RESERVED_NODE_ANNOTATION: "n1"}}}


def test_the_release_pins_records_when_and_removes_only_our_gate():
    pod = reserved_pod()
    released = jsonpatch.apply_patch(pod, list(release_patch(pod_facts(pod), "n1", NOW + 0.25)))
    assert released["spec"]["schedulingGates"] == [{"name": "other.io/gate"}]
    assert released["metadata"]["annotations"][names.RELEASED_AT_ANNOTATION] == "2027-01-15T08:00:00.250000Z"
    terms = released["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms == {"nodeSelectorTerms": [{"matchFields": [{"key": names.PIN_FIELD, "operator": "In",
                                                             "values": ["n1"]}]}]}


def test_a_release_decided_on_a_stale_pod_changes_nothing():
    pod = reserved_pod()
    patch = list(release_patch(pod_facts(pod), "n1", NOW))
    pod["metadata"]["resourceVersion"] = "8"
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        jsonpatch.apply_patch(pod, patch)
