"""Hostile bytes at /mutate and /validate: whatever arrives, the answer is JSON, never a 5xx,
answers the uid it was given, and says what was wrong. The generator and the checker are
bench/fuzz.py's; `make bench` runs the same fuzz longer and against real gunicorn."""

import json
import logging

import pytest
from hypothesis import HealthCheck, given, settings

from bench import fuzz
from gangkeeper import names
from gangkeeper.webhook.app import create_app
from tests.webhook.builders import pod, review

UID = "5d3c1a2b-0000-4000-8000-000000000001"


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    audit = tmp_path_factory.mktemp("audit") / "audit.log"
    return create_app({"MAX_BODY_BYTES": fuzz.FUZZ_MAX_BODY_BYTES, "AUDIT_FILE": str(audit)}).test_client()


@pytest.fixture(autouse=True)
def quiet_logs():
    """Every bad request is logged at WARNING; 300 of them would only slow the test down."""
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=fuzz.cases())
def test_no_input_breaks_the_contract_of_an_answer(client, case):
    status, body = fuzz.test_client_sender(client)(case)
    outcome, problems = fuzz.judge(case, status, body, fuzz.FUZZ_MAX_BODY_BYTES)
    assert not problems, f"{case.category} → {outcome}"


def post(client, document) -> tuple[int, dict]:
    answer = client.post("/validate", data=json.dumps(document), headers={"Content-Type": "application/json"})
    return answer.status_code, answer.get_json()


# --- regressions: inputs the fuzz found crashing the policy (an "internal error" refusal) -----


def with_object(change) -> dict:
    document = review(pod("p-0", gpus=8, labels={names.GROUP_LABEL: "llm"}))
    change(document["request"]["object"])
    return document


CRASHED_THE_POLICY = [
    ("labels as a list", lambda obj: obj["metadata"].update(labels=["llm"]),
     "metadata.labels: must be a map of strings, not a JSON array"),
    ("a label value as a number", lambda obj: obj["metadata"]["labels"].update({names.GROUP_LABEL: 7}),
     "metadata.labels: must be a map of strings"),
    ("metadata as a string", lambda obj: obj.update(metadata="p-0"),
     "metadata: must be a JSON object, not a JSON string"),
    ("spec as a list", lambda obj: obj.update(spec=[]), "spec: must be a JSON object, not a JSON array"),
    ("containers as a dict", lambda obj: obj["spec"].update(containers={"main": {}}),
     "spec.containers: must be a JSON array, not a JSON object"),
    ("a null container", lambda obj: obj["spec"]["containers"].append(None),
     "spec.containers[1]: must be a JSON object, not a JSON null"),
    ("requests as a number", lambda obj: obj["spec"]["containers"][0]["resources"].update(requests=8),
     "spec.containers[0].resources.requests: must be a JSON object, not a JSON number"),
    ("gates as a string", lambda obj: obj["spec"].update(schedulingGates=names.SCHEDULING_GATE),
     "spec.schedulingGates: must be a JSON array, not a JSON string"),
    ("a gate name as a number", lambda obj: obj["spec"].update(schedulingGates=[{"name": 1}]),
     "spec.schedulingGates[0].name: must be a string, not a JSON number"),
    ("an owner without a name", lambda obj: obj["metadata"].update(ownerReferences=[{"kind": "Job", "uid": "u"}]),
     "metadata.ownerReferences[0]: must be an object with string name and uid"),
]


@pytest.mark.parametrize("path", ["/mutate", "/validate"])
@pytest.mark.parametrize("what, change, says", CRASHED_THE_POLICY, ids=[case[0] for case in CRASHED_THE_POLICY])
def test_a_mistyped_pod_field_is_a_400_naming_the_field_and_the_uid(client, path, what, change, says):
    answer = client.post(path, data=json.dumps(with_object(change)), headers={"Content-Type": "application/json"})
    assert answer.status_code == 400
    assert says in answer.get_json()["error"] and UID in answer.get_json()["error"]


def test_a_gang_min_count_nested_1000_levels_deep_is_refused_with_a_message(client):
    gang = {"apiVersion": "gangkeeper.io/v1alpha1", "kind": names.GANG_KIND, "metadata": {"name": "llm"},
            "spec": {"minCount": "@@deep@@"}}
    document = review(gang, kind=names.GANG_KIND, group=names.GANG_GROUP, version=names.GANG_VERSION)
    deep = b"[" * fuzz.DEEP_LEVELS + b"1" + b"]" * fuzz.DEEP_LEVELS
    body = json.dumps(document).encode().replace(b'"@@deep@@"', deep)
    answer = client.post("/validate", data=body, headers={"Content-Type": "application/json"})
    response = answer.get_json()["response"]
    assert answer.status_code == 200 and response["uid"] == UID and response["allowed"] is False
    assert response["status"]["code"] == 403
    assert "spec.minCount: (a JSON list nested too deeply to show) is not accepted" in response["status"]["message"]


def test_a_null_field_still_reads_as_absent(client):
    """The shape check must not refuse what the policy always accepted: null maps."""
    status, answer = post(client, with_object(lambda obj: obj["metadata"].update(labels=None, annotations=None)))
    assert status == 200 and answer["response"]["allowed"] is True


def test_the_checker_catches_a_missing_uid_and_a_silent_refusal():
    """The fuzz is only as good as `judge`: it must see the faults it is there to find."""
    case = fuzz.Case("well-formed", "/validate", json.dumps(review(pod("p"))).encode())
    limit = fuzz.FUZZ_MAX_BODY_BYTES

    def answered(response: dict) -> bytes:
        return json.dumps({"apiVersion": fuzz.API_VERSION, "kind": fuzz.KIND, "response": response}).encode()

    assert fuzz.judge(case, 200, answered({"uid": UID, "allowed": True}), limit) == ("allowed", [])
    assert fuzz.judge(case, 200, answered({"uid": "other", "allowed": True}), limit)[1]
    assert fuzz.judge(case, 200, answered({"uid": UID, "allowed": False}), limit)[1]
    assert fuzz.judge(case, 200, answered({"uid": UID, "allowed": False, "status": {"code": 500, "message": "x"}}),
                      limit)[0] == "internal-error"
    assert fuzz.judge(case, 500, b"<html>", limit)[1]
    assert fuzz.judge(case, 400, b'{"error": "bad"}', limit)[1]  # does not name the uid
    assert fuzz.judge(case, 400, json.dumps({"error": f"bad (request uid {UID})"}).encode(), limit) == ("400", [])
