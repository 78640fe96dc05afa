"""The emulation refuses what the real API server refuses about extended resources (issue 14):
`ValidateResourceRequirements` in kubernetes pkg/apis/core/validation, before any validating
webhook runs — so the webhook never sees a GPU request that differs from its limit."""

import pytest

from sim.api import APIError
from sim.podrules import validate_create
from tests.sim.helpers import NS, pod


def _with_resources(requests=None, limits=None, *, init: bool = False) -> dict:
    body = pod("p")
    container = body["spec"]["containers"][0]
    container["resources"] = {key: value for key, value in (("requests", requests), ("limits", limits)) if value}
    if init:
        body["spec"]["initContainers"] = [dict(container, name="init")]
        body["spec"]["containers"][0]["resources"] = {}
    return body


def test_a_gpu_request_that_differs_from_its_limit_is_refused_with_the_real_message(api):
    with pytest.raises(APIError) as error:
        api.create("pods", _with_resources({"cpu": "1", "nvidia.com/gpu": "1"}, {"cpu": "2", "nvidia.com/gpu": "2"}),
                   namespace=NS)
    assert error.value.code == 422 and error.value.reason == "Invalid"
    assert error.value.status["message"] == (
        'Pod "p" is invalid: spec.containers[0].resources.requests: Invalid value: "1": '
        "must be equal to nvidia.com/gpu limit of 2")
    assert error.value.status["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "field": "spec.containers[0].resources.requests",
         "message": 'Invalid value: "1": must be equal to nvidia.com/gpu limit of 2'}]


def test_equal_quantities_in_other_spellings_are_accepted_and_cpu_may_be_overcommitted(api):
    created = api.create("pods", _with_resources({"cpu": "500m", "nvidia.com/gpu": "2000m"},
                                                 {"cpu": "2", "nvidia.com/gpu": "2"}), namespace=NS)
    assert created["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "2000m"


def test_a_limit_alone_is_defaulted_into_the_request_and_accepted(api):
    created = api.create("pods", _with_resources(None, {"nvidia.com/gpu": "4"}), namespace=NS)
    assert created["spec"]["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "4"}


def test_a_request_without_a_limit_is_refused():
    (error,) = validate_create(_with_resources({"nvidia.com/gpu": "1"}))
    assert str(error) == ("spec.containers[0].resources.limits: Required value: "
                          "Limit must be set for non overcommitable resources")


def test_init_containers_and_hugepages_are_held_to_the_same_rule():
    errors = validate_create(_with_resources({"hugepages-2Mi": "2Mi", "amd.com/gpu": "0.5"},
                                             {"hugepages-2Mi": "4Mi", "amd.com/gpu": "1"}, init=True))
    assert [str(e) for e in errors] == [
        'spec.initContainers[0].resources.requests: Invalid value: "500m": must be equal to amd.com/gpu limit of 1',
        'spec.initContainers[0].resources.requests: Invalid value: "2Mi": must be equal to hugepages-2Mi limit of 4Mi']
