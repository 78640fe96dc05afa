"""The AdmissionReview v1 envelope: what is accepted, what is refused and how, the answers."""

import base64
import json

import pytest

from tests.webhook.builders import pod, review
from webhook.review import ReviewError, allowed, denied, errored, parse_review, patched

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
