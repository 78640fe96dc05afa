"""Pods carry secrets in their spec (env values, references to Secrets, commands with tokens):
none of it may reach the audit log or the ordinary logs, on any path — allowed, patched,
denied, refused as malformed, or crashed. docs/design.md, "Audit log": never env values, secrets or
whole pod specs."""

import copy
import json
import logging

import pytest

from gangkeeper import names
from gangkeeper.webhook import app as app_module
from gangkeeper.webhook.app import create_app
from tests.webhook.builders import pod, review

SECRET_VALUE = "s3cr3t-token-value"
SECRET_NAME = "db-credentials-7f3a"
SECRET_KEY_REF = "api-token-secret-9c1d"
SECRET_KEY = "token-key-b2e4"
CONFIG_MAP = "trainer-config-5e6f"
IMAGE = "registry.example.com/private/llm-trainer:sha-4b7c9d"
COMMAND = "--wandb-api-key=k3y-in-the-command"
# Not one of these may appear in a log line.
NEVER_LOGGED = (SECRET_VALUE, SECRET_NAME, SECRET_KEY_REF, SECRET_KEY, CONFIG_MAP, IMAGE, COMMAND, "MASTER_ADDR")


def secret_pod(**kwargs) -> dict:
    subject = pod("llm-worker-0", gpus=8, **kwargs)
    main = subject["spec"]["containers"][0]
    main["image"] = IMAGE
    main["command"] = ["torchrun", "train.py", COMMAND]
    main["env"] = [{"name": "API_TOKEN", "value": SECRET_VALUE},
                   {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": SECRET_KEY_REF, "key": SECRET_KEY}}},
                   *({"name": f"MASTER_ADDR_{index}", "value": "llm-master-0"} for index in range(2_000))]
    main["envFrom"] = [{"secretRef": {"name": SECRET_NAME}}, {"configMapRef": {"name": CONFIG_MAP}}]
    subject["spec"]["volumes"] = [{"name": "creds", "secret": {"secretName": SECRET_NAME}}]
    subject["spec"]["initContainers"] = [copy.deepcopy(main) | {"name": "fetch"}]
    return subject


def with_labels_as_list(document: dict) -> dict:
    document["request"]["object"]["metadata"]["labels"] = [SECRET_VALUE]
    return document


def gate_removed(document: dict) -> dict:
    document["request"]["object"]["spec"]["schedulingGates"] = []
    return document


GATED = {"labels": {names.GROUP_LABEL: "llm"}, "gates": [names.SCHEDULING_GATE]}
REQUESTS = [
    ("a pod patched into a group", "/mutate", lambda: review(secret_pod(labels={names.GROUP_LABEL: "llm"})), 200),
    ("a pod allowed as it is", "/validate", lambda: review(secret_pod()), 200),
    ("a pod denied for a bad min-count", "/validate",
     lambda: review(secret_pod(labels={names.GROUP_LABEL: "llm"}, annotations={names.MIN_COUNT_ANNOTATION: "-1"})),
     200),
    ("a user removing the gate", "/validate",
     lambda: gate_removed(review(secret_pod(**GATED), old=secret_pod(**GATED), operation="UPDATE")), 200),
    ("a malformed pod (labels as a list)", "/mutate", lambda: with_labels_as_list(review(secret_pod())), 400),
    ("a pod that is not JSON any more", "/mutate", lambda: json.dumps(review(secret_pod()))[:-3], 400),
]


@pytest.fixture
def audit_file(tmp_path):
    return tmp_path / "audit.log"


@pytest.fixture
def client(audit_file):
    return create_app({"AUDIT_FILE": str(audit_file)}).test_client()


def everything_logged(audit_file, caplog, capsys) -> str:
    captured = capsys.readouterr()
    records = "\n".join(f"{record.getMessage()}\n{record.exc_text or ''}" for record in caplog.records)
    return "\n".join((audit_file.read_text() if audit_file.exists() else "", records, captured.out, captured.err))


@pytest.mark.parametrize("what, path, document, status", REQUESTS, ids=[case[0] for case in REQUESTS])
def test_no_secret_and_no_spec_reaches_a_log(client, audit_file, caplog, capsys, what, path, document, status):
    caplog.set_level(logging.DEBUG)
    body = document()
    answer = client.post(path, data=body if isinstance(body, str) else json.dumps(body),
                         headers={"Content-Type": "application/json"})
    assert answer.status_code == status
    logged = everything_logged(audit_file, caplog, capsys)
    assert "llm-worker-0" in logged or status == 400  # the log is there, and names the pod
    for secret in NEVER_LOGGED:
        assert secret not in logged, f"{secret!r} leaked into the logs on {what}"


def test_not_even_a_policy_crash_logs_the_spec(client, audit_file, caplog, capsys, monkeypatch):
    """The one path that logs a traceback: the request must still not be in it."""
    caplog.set_level(logging.DEBUG)

    def crash(review_request, policy):
        raise RuntimeError("policy bug")

    monkeypatch.setattr(app_module, "validate", crash)
    answer = client.post("/validate", data=json.dumps(review(secret_pod())),
                         headers={"Content-Type": "application/json"})
    assert answer.get_json()["response"]["status"]["code"] == 500
    logged = everything_logged(audit_file, caplog, capsys)
    assert "RuntimeError: policy bug" in logged  # the traceback is there
    for secret in NEVER_LOGGED:
        assert secret not in logged


def test_the_check_would_see_a_leak(client, audit_file, caplog, capsys):
    """A log line that did carry the spec is caught: the assertion above can fail."""
    caplog.set_level(logging.DEBUG)
    leaky = secret_pod()
    del leaky["spec"]["containers"][0]["env"][2:]
    logging.getLogger("gangkeeper.webhook").warning("leak: %s", json.dumps(leaky))
    logged = everything_logged(audit_file, caplog, capsys)
    assert all(secret in logged for secret in (SECRET_VALUE, SECRET_NAME, SECRET_KEY_REF, IMAGE, COMMAND))
