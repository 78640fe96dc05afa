"""The AdmissionReview v1 envelope: what is accepted, what is refused and how, the answers."""

import base64
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from marshmallow import ValidationError

from bench import fuzz
from gangkeeper.webhook.review import (
    _SCHEMA,
    AdmissionRequest,
    ReviewError,
    _problems,
    _well_formed,
    allowed,
    denied,
    errored,
    parse_review,
    patched,
    shape_problems,
    well_typed,
)
from tests.webhook.builders import pod, review

UID = "5d3c1a2b-0000-4000-8000-000000000001"


def test_a_create_request_is_read():
    request = parse_review(review(pod(None, generate_name="gen-"), user="alice", dry_run=True))
    assert (request.uid, request.kind, request.operation, request.username) == (UID, "Pod", "CREATE", "alice")
    assert request.name == "" and request.pod_name == "gen-" and request.dry_run is True


def test_unknown_fields_are_ignored():
    document = review(pod("p"))
    document["request"]["somethingNew"] = {"x": 1}
    document["extra"] = 1
    assert parse_review(document).uid == UID


def broken(change):
    document = review(pod("p"))
    change(document)
    return document


@pytest.mark.parametrize("document, says", [
    ([], "JSON list"),
    (broken(lambda d: d.update(apiVersion="admission.k8s.io/v1beta1")), "apiVersion"),
    (broken(lambda d: d.update(kind="TokenReview")), "kind"),
    (broken(lambda d: d.pop("request")), "request: Missing data"),
    (broken(lambda d: d["request"].pop("uid")), "request.uid: Missing data"),
    (broken(lambda d: d["request"].update(uid="")), "request.uid"),
    (broken(lambda d: d["request"].update(uid=7)), "request.uid"),
    (broken(lambda d: d["request"].update(operation="PATCH")), "request.operation"),
    (broken(lambda d: d["request"].update(object=[1])), "request.object: must be a JSON object"),
    (broken(lambda d: d["request"]["userInfo"].update(groups="x")), "request.userInfo.groups"),
])
def test_a_malformed_review_names_the_field(document, says):
    with pytest.raises(ReviewError) as raised:
        parse_review(document)
    assert says in str(raised.value)


def test_the_error_echoes_the_uid_when_there_is_one():
    with pytest.raises(ReviewError) as raised:
        parse_review(broken(lambda d: d["request"].update(operation="PATCH")))
    assert raised.value.uid == UID and UID in str(raised.value)


def test_answers_echo_the_uid():
    assert allowed(UID) == {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                            "response": {"uid": UID, "allowed": True}}
    assert allowed(UID, ["careful"])["response"]["warnings"] == ["careful"]
    assert denied(UID, "no")["response"] == {"uid": UID, "allowed": False, "status": {"code": 403, "message": "no"}}
    assert errored(UID, "bug")["response"]["status"] == {"code": 500, "message": "bug"}
    ops = [{"op": "add", "path": "/metadata/labels/a~1b", "value": "c"}]
    response = patched(UID, ops)["response"]
    assert response["patchType"] == "JSONPatch" and json.loads(base64.b64decode(response["patch"])) == ops


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@pytest.mark.slow
@given(document=st.one_of(fuzz.reviews(), fuzz.reviews().flatmap(
    lambda review: st.sampled_from(fuzz.paths_in(review)).flatmap(
        lambda path: fuzz.wrong_value().map(lambda value: fuzz.put(review, path, value))))))
def test_the_quick_reading_and_the_schema_give_the_same_answer(document):
    """The hot path reads well-formed reviews without marshmallow: whenever it answers, the schema
    must give that very answer."""
    quick = _well_formed(document) if isinstance(document, dict) else None
    if quick is None:
        return
    try:
        review = _SCHEMA.load(document)
    except ValidationError as error:
        raise AssertionError(f"the quick reading accepted what the schema refuses: {error.messages}") from None
    request = review["request"]
    assert quick == AdmissionRequest(
        uid=request["uid"], group=request["kind"]["group"], kind=request["kind"]["kind"],
        operation=request["operation"], namespace=request["namespace"], name=request["name"],
        username=request["userInfo"].get("username", ""), object=request["object"],
        old_object=request["oldObject"], dry_run=request["dryRun"])


def _with_initial_containers(obj: dict) -> dict:
    """The pod with an initContainers list too, so that every path of OBJECT_SHAPE is there to break."""
    obj = dict(obj, spec=dict(obj["spec"], initContainers=[{"name": "init", "resources": {"requests": {}}}]))
    return obj


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@pytest.mark.slow
@given(obj=fuzz.pods().map(_with_initial_containers).flatmap(
    lambda obj: st.lists(st.sampled_from(fuzz.paths_in(obj)), max_size=3).flatmap(
        lambda paths: st.lists(fuzz.wrong_value(), min_size=len(paths), max_size=len(paths)).map(
            lambda values: _put_all(obj, paths, values)))))
def test_the_one_walk_and_the_path_by_path_check_agree(obj):
    """`well_typed` (the hot path, one walk of the merged paths) says yes exactly when the
    path-by-path check finds no problem, for pods with wrong values anywhere (none, one or more)."""
    assert well_typed(obj) == (not _problems(obj))


def _put_all(obj: dict, paths: list, values: list) -> dict:
    for path, value in zip(paths, values):
        obj = fuzz.put(obj, path, value)
    return obj


@pytest.mark.parametrize("obj, problems", [
    ({"metadata": None, "spec": None}, []),
    ({"metadata": {"labels": None, "name": None}}, []),
    ({"metadata": {"labels": {"a": 1}}}, ["metadata.labels: must be a map of strings, not a JSON object"]),
    ({"metadata": {"ownerReferences": [None]}},
     ["metadata.ownerReferences[0]: must be an object with string name and uid (an OwnerReference), not a JSON null"]),
    ({"spec": {"containers": [None]}}, ["spec.containers[0]: must be a JSON object, not a JSON null"]),
    ({"spec": {"containers": [{"resources": None}]}}, []),
    ({"spec": {"containers": [{"resources": {"limits": []}}]}},
     ["spec.containers[0].resources.limits: must be a JSON object, not a JSON array"]),
    ({"spec": {"schedulingGates": [{"name": 7}], "containers": {}}},
     ["spec.schedulingGates[0].name: must be a string, not a JSON number",
      "spec.containers: must be a JSON array, not a JSON object"]),
    ({"spec": {"initContainers": "x", "unread": [None]}}, ["spec.initContainers: must be a JSON array, not a JSON string"]),
])
def test_shape_problems_name_each_wrong_field(obj, problems):
    assert shape_problems(obj) == problems and well_typed(obj) == (not problems)
