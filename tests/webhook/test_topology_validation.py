"""/validate on topology declarations (issue 13): label keys, slice sizes, a slice's label and size
together, and a group that its slice size divides; on pods and on Gangs, every problem at once."""

import pytest

from gangkeeper import names
from gangkeeper.webhook.policy import Policy
from gangkeeper.webhook.review import parse_review
from gangkeeper.webhook.validate import validate
from tests.webhook.builders import pod, review

ZONE, RACK, CLIQUE = "topology.kubernetes.io/zone", "rack", "nvidia.com/gpu.clique"
MIN = names.MIN_COUNT_ANNOTATION
REQUIRED, PREFERRED = names.TOPOLOGY_REQUIRED_ANNOTATION, names.TOPOLOGY_PREFERRED_ANNOTATION
SLICE_REQUIRED, SLICE_SIZE = names.TOPOLOGY_SLICE_REQUIRED_ANNOTATION, names.TOPOLOGY_SLICE_SIZE_ANNOTATION
KEY_RULE = ("write a label key such as topology.kubernetes.io/zone: an optional prefix (a lowercase DNS subdomain "
            "of at most 253 characters) and '/', then a name of at most 63 characters: letters, digits, '-', '_' "
            "or '.', starting and ending with a letter or digit")


def judged_pod(annotations, **request):
    member = pod("p-0", gpus=1, labels={names.GROUP_LABEL: "g"}, annotations=annotations)
    return validate(parse_review(review(member, **request)), Policy())


def judged_gang(spec, **request):
    obj = {"apiVersion": f"{names.GANG_GROUP}/{names.GANG_VERSION}", "kind": names.GANG_KIND,
           "metadata": {"name": "llm", "namespace": "ml-training"}, "spec": spec}
    return validate(parse_review(review(obj, kind=names.GANG_KIND, group=names.GANG_GROUP,
                                        version=names.GANG_VERSION, **request)), Policy())


# --- pods -----------------------------------------------------------------------------------

@pytest.mark.parametrize("annotations", [
    {REQUIRED: ZONE},
    {PREFERRED: RACK},
    {REQUIRED: ZONE, PREFERRED: RACK},
    {MIN: "16", SLICE_REQUIRED: CLIQUE, SLICE_SIZE: "4"},
    {SLICE_REQUIRED: CLIQUE, SLICE_SIZE: "4"},  # the owner's size is the controller's to check
])
def test_good_topology_declarations_are_allowed(annotations):
    assert judged_pod(annotations).allowed


@pytest.mark.parametrize("key", [REQUIRED, PREFERRED, SLICE_REQUIRED])
@pytest.mark.parametrize("value", ["Bad Key", "/zone", "a/b/c", "", "x" * 64])
def test_a_topology_annotation_that_is_no_label_key_is_refused(key, value):
    annotations = {key: value} | ({SLICE_SIZE: "1"} if key == SLICE_REQUIRED else {})
    verdict = judged_pod(annotations)
    assert not verdict.allowed
    assert verdict.problems[0].startswith(f"metadata.annotations[{key}]: ") and KEY_RULE in verdict.problems[0]


def test_the_refusal_names_the_field_the_value_and_what_is_accepted():
    assert judged_pod({REQUIRED: "Bad Key"}).problems == (
        f'metadata.annotations[{REQUIRED}]: "Bad Key" is not accepted: {KEY_RULE}',)


@pytest.mark.parametrize("size", ["0", "-4", "four", "4.5", " 4", "100001"])
def test_a_slice_size_that_is_no_positive_whole_number_is_refused(size):
    assert judged_pod({SLICE_REQUIRED: CLIQUE, SLICE_SIZE: size}).problems == (
        f'metadata.annotations[{SLICE_SIZE}]: "{size}" is not accepted: write the members in one slice, '
        "a whole number from 1 to 100000",)


def test_a_slice_label_without_a_size_is_refused():
    assert judged_pod({SLICE_REQUIRED: CLIQUE}).problems == (
        f"metadata.annotations[{SLICE_SIZE}]: missing; metadata.annotations[{SLICE_REQUIRED}] needs it: write the "
        f"members in one slice, a whole number from 1 to 100000, or remove {SLICE_REQUIRED}",)


def test_a_slice_size_without_a_label_is_refused():
    assert judged_pod({SLICE_SIZE: "4"}).problems == (
        f"metadata.annotations[{SLICE_REQUIRED}]: missing; metadata.annotations[{SLICE_SIZE}] needs it: write the "
        f"node label key every member of a slice shares one value of, such as {CLIQUE}, or remove {SLICE_SIZE}",)


def test_a_min_count_that_is_not_a_multiple_of_the_slice_size_is_refused_with_what_divides_it():
    assert judged_pod({MIN: "6", SLICE_REQUIRED: CLIQUE, SLICE_SIZE: "4"}).problems == (
        f'metadata.annotations[{SLICE_SIZE}]: "4" is not accepted: a group of 6 (metadata.annotations[{MIN}]) is '
        "not a multiple of it; write a slice size that divides 6: 1, 2, 3 or 6",)


def test_a_group_size_with_many_divisors_is_not_listed():
    problem, = judged_pod({MIN: "83160", SLICE_REQUIRED: CLIQUE, SLICE_SIZE: "17"}).problems
    assert problem.endswith("write a slice size that divides 83160: a divisor of 83160")


def test_every_topology_problem_is_listed_at_once():
    verdict = judged_pod({REQUIRED: "Bad Key", PREFERRED: "-", SLICE_SIZE: "0"})
    assert len(verdict.problems) == 4 and "4 problems" in verdict.message


def test_an_update_is_judged_on_the_topology_it_changes():
    old = pod("p-0", gpus=1, labels={names.GROUP_LABEL: "g"}, annotations={SLICE_SIZE: "4"})  # before this policy
    unrelated = pod("p-0", gpus=1, labels={names.GROUP_LABEL: "g"}, annotations={SLICE_SIZE: "4", "bump": "1"})
    assert judged_pod(unrelated["metadata"]["annotations"], operation="UPDATE", old=old, user="bob").allowed
    verdict = judged_pod({SLICE_SIZE: "4", MIN: "6"}, operation="UPDATE", old=old, user="bob")
    assert [p.split(":")[0] for p in verdict.problems] == [f"metadata.annotations[{SLICE_REQUIRED}]"]


def test_topology_on_a_pod_in_no_group_is_a_warning():
    verdict = validate(parse_review(review(pod("web", annotations={REQUIRED: ZONE}))), Policy())
    assert verdict.allowed
    (warning,) = verdict.warnings
    assert warning.startswith(f"metadata.annotations[{REQUIRED}] has no effect: the pod is in no group (")


# --- Gangs ----------------------------------------------------------------------------------

@pytest.mark.parametrize("topology", [
    {"required": ZONE},
    {"required": ZONE, "preferred": RACK},
    {"sliceRequired": CLIQUE, "sliceSize": 4},
    {},
])
def test_a_gang_with_a_good_topology_is_allowed(topology):
    assert judged_gang({"minCount": 16, "topology": topology}).allowed


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
@pytest.mark.parametrize("topology, problems", [
    ({"required": "Bad Key"}, [f'spec.topology.required: "Bad Key" is not accepted: {KEY_RULE}']),
    ({"preferred": 7}, [f"spec.topology.preferred: 7 is not accepted: {KEY_RULE}"]),
    ({"sliceRequired": CLIQUE, "sliceSize": 0},
     ["spec.topology.sliceSize: 0 is not accepted: write the members in one slice, a whole number from 1 to 100000"]),
    ({"sliceRequired": CLIQUE, "sliceSize": "4"}, ['spec.topology.sliceSize: "4" is not accepted']),
    ({"sliceRequired": CLIQUE}, ["spec.topology.sliceSize: missing; spec.topology.sliceRequired needs it"]),
    ({"sliceSize": 4}, ["spec.topology.sliceRequired: missing; spec.topology.sliceSize needs it"]),
    ({"sliceRequired": CLIQUE, "sliceSize": 3},
     ["spec.topology.sliceSize: 3 is not accepted: a group of 16 (spec.minCount) is not a multiple of it; "
      "write a slice size that divides 16: 1, 2, 4, 8 or 16"]),
    ({"required": "a/b/c", "sliceSize": 5},
     ["spec.topology.required: ", "spec.topology.sliceRequired: missing", "spec.topology.sliceSize: 5"]),
])
def test_a_gang_with_a_bad_topology_is_refused(topology, problems, operation):
    spec = {"minCount": 16, "topology": topology}
    obj_kw = {"old": {"metadata": {"name": "llm"}, "spec": {"minCount": 16}}} if operation == "UPDATE" else {}
    verdict = judged_gang(spec, operation=operation, **obj_kw)
    assert len(verdict.problems) == len(problems), verdict.problems
    for problem, expected in zip(verdict.problems, problems):
        assert problem.startswith(expected)


@pytest.mark.parametrize("topology", ["zone", ["required"], None])
def test_a_gang_topology_that_is_no_object_is_refused(topology):
    (problem,) = judged_gang({"minCount": 4, "topology": topology}).problems
    assert problem.startswith("spec.topology: ") and "write an object with any of required, preferred, " \
        "sliceRequired, sliceSize" in problem


def test_a_gang_with_a_bad_min_count_is_not_also_told_about_its_slices():
    verdict = judged_gang({"minCount": 0, "topology": {"sliceRequired": CLIQUE, "sliceSize": 3}})
    assert [p.split(":")[0] for p in verdict.problems] == ["spec.minCount"]
