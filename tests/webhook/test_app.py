"""The HTTP layer through Flask's test client: bad input, internal errors, audit, health, metrics."""

import json

import pytest
from prometheus_client import REGISTRY

from gangkeeper import names
from gangkeeper.webhook import app as app_module
from gangkeeper.webhook import metrics
from gangkeeper.webhook.app import create_app
from tests.webhook.builders import placeholder, pod, review

UID = "5d3c1a2b-0000-4000-8000-000000000001"


@pytest.fixture
def audit_file(tmp_path):
    return tmp_path / "audit.log"


@pytest.fixture
def client(audit_file):
    return create_app({"AUDIT_FILE": str(audit_file), "MAX_BODY_BYTES": 64 * 1024}).test_client()


def body(document) -> bytes:
    return json.dumps(document).encode()


def missing_uid():
    document = review(pod("p"))
    del document["request"]["uid"]
    return body(document)


def bad_operation():
    document = review(pod("p"))
    document["request"]["operation"] = "PATCH"
    return body(document)


BAD_INPUT = [
    ("empty body", b"", "application/json", "empty body"),
    ("wrong content type", body(review(pod("p"))), "text/plain", "Content-Type must be application/json"),
    ("no content type", body(review(pod("p"))), None, "Content-Type must be application/json"),
    ("not JSON", b"{not json", "application/json", "not valid JSON"),
    ("not UTF-8", b"\xff\xfe{}", "application/json", "not valid JSON"),
    ("nested past the recursion limit", b"[" * 30000 + b"]" * 30000, "application/json", "not valid JSON"),
    ("over the limit", b" " * (64 * 1024 + 1), "application/json", "over the limit of 65536 bytes"),
    ("not an AdmissionReview", body({"kind": "Pod"}), "application/json", "not an AdmissionReview"),
    ("no uid", missing_uid(), "application/json", "request.uid"),
    ("uid given, bad operation", bad_operation(), "application/json", UID),
]


@pytest.mark.parametrize("path", ["/mutate", "/validate"])
@pytest.mark.parametrize("scenario, data, content_type, says", BAD_INPUT, ids=[case[0] for case in BAD_INPUT])
def test_bad_input_is_a_400_saying_what_was_wrong(client, path, scenario, data, content_type, says):
    headers = {"Content-Type": content_type} if content_type else {}
    answer = client.post(path + "?timeout=5s", data=data, headers=headers)
    assert answer.status_code == 400
    assert says in answer.get_json()["error"]


def test_a_policy_bug_is_an_explained_refusal_not_a_500(client, monkeypatch, caplog):
    def broken(request, policy):
        raise KeyError("spec")

    monkeypatch.setattr(app_module, "mutate", broken)
    answer = client.post("/mutate", json=review(pod("p", gpus=1)))
    assert answer.status_code == 200
    response = answer.get_json()["response"]
    assert response["uid"] == UID and response["allowed"] is False
    assert response["status"]["code"] == 500 and "KeyError" in response["status"]["message"]
    assert "Traceback" in caplog.text or any(record.exc_info for record in caplog.records)


def test_every_decision_is_one_audit_line_without_the_spec(client, audit_file):
    secret_pod = pod("p", gpus=1)
    secret_pod["spec"]["containers"][0]["env"] = [{"name": "TOKEN", "value": "s3cr3t"}]
    client.post("/mutate", json=review(secret_pod, user="alice"))
    client.post("/validate", json=review(pod("p", annotations={names.MIN_COUNT_ANNOTATION: "x"})))
    mutate_line, validate_line = (json.loads(line) for line in audit_file.read_text().splitlines())
    assert mutate_line["event"] == "admission.mutate" and mutate_line["decision"] == "patched"
    assert (mutate_line["namespace"], mutate_line["group"], mutate_line["pod"], mutate_line["uid"],
            mutate_line["user"]) == ("ml-training", "p", "p", UID, "alice")
    assert validate_line["event"] == "admission.validate" and validate_line["decision"] == "denied"
    assert "s3cr3t" not in audit_file.read_text()


def test_a_placeholders_decisions_are_audited_under_the_group_it_holds_capacity_for(client, audit_file):
    controller = names.DEFAULT_CONTROLLER_USERNAME
    client.post("/mutate", json=review(placeholder(), user=controller))
    client.post("/validate", json=review(placeholder(), user=controller))
    client.post("/validate", json=review(placeholder(), user="alice"))
    lines = [json.loads(line) for line in audit_file.read_text().splitlines()]
    assert [(line["event"], line["user"], line["group"], line["decision"]) for line in lines] == [
        ("admission.mutate", controller, "bert", "allowed"),
        ("admission.validate", controller, "bert", "allowed"),
        ("admission.validate", "alice", "bert", "denied")]
    assert lines[0]["reason"].startswith("a placeholder holding capacity for the group of Gang bert")
    assert lines[1]["reason"] == "placeholder pod CREATE: valid"
    assert f"metadata.labels[{names.CAPACITY_FOR_LABEL}]: alice created a pod" in lines[2]["reason"]
    assert lines[2]["pod"] == "bert-capacity-1-0" and lines[2]["details"]["problems"] == 1


def test_health_and_unknown_routes(client):
    assert client.get("/healthz").data == b"ok\n" and client.get("/readyz").status_code == 200
    assert client.get("/mutate").status_code == 405 and "error" in client.get("/mutate").get_json()
    assert client.post("/noop").status_code == 404  # the benchmark's baseline is not in the product


def test_metrics_count_requests_by_endpoint_and_decision(client):
    def count(decision):
        text = client.get("/metrics").get_data(as_text=True)
        prefix = f'gangkeeper_webhook_requests_total{{decision="{decision}",endpoint="mutate"}} '
        return next((float(line[len(prefix):]) for line in text.splitlines() if line.startswith(prefix)), 0.0)

    before = count("patched"), count("error")
    client.post("/mutate", json=review(pod("p", gpus=1)))
    client.post("/mutate", data=b"", content_type="application/json")
    assert (count("patched"), count("error")) == (before[0] + 1, before[1] + 1)


def test_every_observation_counts_once_the_labelled_series_are_cached():
    """observe() keeps each (endpoint, decision) pair's series after its first use: the second
    and later observations must land in the same series as the first."""
    def sample(name, **labels):
        return REGISTRY.get_sample_value(name, {"endpoint": "validate", "decision": "denied", **labels}) or 0.0

    before = (sample("gangkeeper_webhook_requests_total"),
              sample("gangkeeper_webhook_request_duration_seconds_count"),
              sample("gangkeeper_webhook_request_duration_seconds_bucket", le="0.001"))
    for seconds in (0.0004, 0.003, 0.0008):
        metrics.observe("validate", "denied", seconds)
    assert (sample("gangkeeper_webhook_requests_total"),
            sample("gangkeeper_webhook_request_duration_seconds_count"),
            sample("gangkeeper_webhook_request_duration_seconds_bucket", le="0.001")) == (
        before[0] + 3, before[1] + 3, before[2] + 2)
