"""ProvisioningRequests' rules as the emulated API server applies them, held to the real CRD
(tests/fixtures/ecosystem/crds/): what the emulation refuses the CRD's schema refuses too, what
it lets through the schema accepts; and how cluster-autoscaler reads a request's pods."""

import copy

import jsonschema
import pytest

from sim.provisioningrequests import MissingTemplates, immutable_problems, pods, problems, with_condition
from tests.crds import ecosystem_crd, openapi_schema, structural

ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
GOOD = {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
        "metadata": {"name": "job", "namespace": "ml", "generation": 1},
        "spec": {"provisioningClassName": ATOMIC, "parameters": {"ValidUntilSeconds": "600"},
                 "podSets": [{"podTemplateRef": {"name": "worker"}, "count": 4},
                             {"podTemplateRef": {"name": "launcher"}, "count": 1}]}}
SPEC_SCHEMA = jsonschema.Draft202012Validator(
    structural(openapi_schema(ecosystem_crd("autoscaling.x-k8s.io_provisioningrequests"), "v1"))["properties"]["spec"])


def with_spec(**changes) -> dict:
    request = copy.deepcopy(GOOD)
    request["spec"].update(changes)
    request["spec"] = {key: value for key, value in request["spec"].items() if value is not None}
    return request


BAD = {
    "no podSets": (with_spec(podSets=None), "spec.podSets: Required value"),
    "no class": (with_spec(provisioningClassName=None), "spec.provisioningClassName: Required value"),
    "no pod sets at all": (with_spec(podSets=[]), "spec.podSets: Invalid value: 0: spec.podSets in body should have "
                                                  "at least 1 items"),
    "33 pod sets": (with_spec(podSets=[{"podTemplateRef": {"name": "w"}, "count": 1}] * 33),
                    "spec.podSets: Too many: 33: must have at most 32 items"),
    "count 0": (with_spec(podSets=[{"podTemplateRef": {"name": "w"}, "count": 0}]),
                "spec.podSets[0].count: Invalid value: 0: spec.podSets[0].count in body should be greater than or "
                "equal to 1"),
    "count as text": (with_spec(podSets=[{"podTemplateRef": {"name": "w"}, "count": "4"}]),
                      'spec.podSets[0].count: Invalid value: "string": spec.podSets[0].count in body must be of type '
                      'integer: "string"'),
    "no template": (with_spec(podSets=[{"count": 1}]), "spec.podSets[0].podTemplateRef: Required value"),
    "no template name": (with_spec(podSets=[{"podTemplateRef": {}, "count": 1}]),
                         "spec.podSets[0].podTemplateRef.name: Required value"),
    "template not a name": (with_spec(podSets=[{"podTemplateRef": {"name": "Worker_1"}, "count": 1}]),
                            "spec.podSets[0].podTemplateRef.name: Invalid value: \"Worker_1\": "
                            "spec.podSets[0].podTemplateRef.name in body should match "
                            "'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'"),
    "class too long": (with_spec(provisioningClassName="a" * 254),
                       "spec.provisioningClassName: Too long: may not be more than 253 bytes"),
    "parameter not text": (with_spec(parameters={"ValidUntilSeconds": 600}),
                           'spec.parameters.ValidUntilSeconds: Invalid value: "integer": '
                           'spec.parameters.ValidUntilSeconds in body must be of type string: "integer"'),
    "parameter too long": (with_spec(parameters={"note": "x" * 256}),
                           "spec.parameters.note: Too long: may not be more than 255 bytes"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_request_is_refused_with_apiextensions_words_as_the_crds_schema_refuses_it(case):
    request, words = BAD[case]
    assert [str(problem) for problem in problems(request)] == [words]
    assert not SPEC_SCHEMA.is_valid(request["spec"])


def test_a_good_request_passes_both():
    assert problems(GOOD) == [] and SPEC_SCHEMA.is_valid(GOOD["spec"])
    assert [str(p) for p in problems({"metadata": {"name": "x"}})] == ["spec: Required value"]


def test_the_spec_is_immutable_field_by_field_as_its_cel_rules_say():
    changed = with_spec(podSets=[{"podTemplateRef": {"name": "worker"}, "count": 5}],
                        provisioningClassName="check-capacity.autoscaling.x-k8s.io", parameters={})
    assert [str(p) for p in immutable_problems(GOOD, changed)] == [
        'spec.podSets: Invalid value: "array": Value is immutable',
        'spec.provisioningClassName: Invalid value: "string": Value is immutable',
        'spec.parameters: Invalid value: "object": Value is immutable']
    assert immutable_problems(with_spec(parameters=None), GOOD) == [], "a rule on a field holds only where it was"


def test_pods_are_built_from_the_templates_with_the_consume_annotations_and_requests_from_limits():
    templates = {"worker": {"template": {"metadata": {"labels": {"role": "worker"}}, "spec": {"containers": [
                     {"name": "main", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}},
                 "launcher": {"template": {"spec": {"containers": [{"name": "main"}]}}}}
    built = pods(GOOD, templates)
    assert [p["metadata"]["name"] for p in built] == ["job-0-0", "job-0-1", "job-0-2", "job-0-3", "job-1-0"]
    assert built[0]["metadata"]["annotations"] == {"autoscaling.x-k8s.io/consume-provisioning-request": "job",
                                                   "autoscaling.x-k8s.io/provisioning-class-name": ATOMIC}
    assert built[0]["metadata"]["labels"] == {"role": "worker"}
    assert built[0]["spec"]["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "8"}
    with pytest.raises(MissingTemplates, match="^missing pod templates, 2 pod templates were referenced, 1 templates "
                                               "were missing: launcher$"):
        pods(GOOD, {"worker": templates["worker"]})


def test_a_condition_is_set_in_place_of_its_type_with_a_new_transition_time():
    accepted = with_condition(GOOD, "Accepted", "True", ("Accepted", "accepted"), 0)
    provisioned = with_condition(accepted, "Provisioned", "False", ("CapacityIsNotFound", "later"), 0, observed=False)
    again = with_condition(provisioned, "Accepted", "True", ("Accepted", "accepted"), 60)
    assert [(c["type"], c["lastTransitionTime"], c.get("observedGeneration")) for c in again["status"]["conditions"]] \
        == [("Accepted", "1970-01-01T00:01:00Z", 1), ("Provisioned", "1970-01-01T00:00:00Z", None)]
    assert GOOD.get("status") is None, "the request given is left as it was"
