"""Only the controller's identity may create a placeholder pod (label `gangkeeper.io/capacity-for`),
compared exactly as for the gate: the webhook never gates a placeholder, so anyone else's would
start at once, past gang scheduling. And no pod becomes a placeholder, or stops being one, later."""

import copy
import json

import pytest

from gangkeeper import names
from gangkeeper.webhook.app import create_app
from tests.security.identities import CONTROLLER, LOOKALIKES, WHO, gated
from tests.webhook.builders import placeholder, review


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    return create_app({"AUDIT_FILE": str(tmp_path_factory.mktemp("audit") / "audit.log")}).test_client()


def admitted(client, path: str, username: str, groups: list[str], new: dict, old: dict | None = None) -> dict:
    document = review(new, old=old, operation="UPDATE" if old else "CREATE")
    document["request"]["userInfo"] = {"username": username, "uid": "4a1e", "groups": groups}
    answer = client.post(path, data=json.dumps(document), headers={"Content-Type": "application/json"})
    assert answer.status_code == 200
    return answer.get_json()["response"]


@pytest.mark.parametrize("who, username, groups", WHO, ids=[case[0] for case in WHO])
def test_nobody_but_the_controller_creates_a_placeholder(client, who, username, groups):
    response = admitted(client, "/validate", username, groups, placeholder())
    assert response["allowed"] is False
    assert f"only {CONTROLLER} creates placeholder pods" in response["status"]["message"]


@pytest.mark.parametrize("trick, username", LOOKALIKES, ids=[case[0] for case in LOOKALIKES])
def test_the_controller_name_is_compared_exactly(client, trick, username):
    groups = ["system:serviceaccounts:gangkeeper", "system:masters", CONTROLLER]
    assert admitted(client, "/validate", username, groups, placeholder())["allowed"] is False


def test_the_controllers_placeholder_is_created_ungated(client):
    groups = ["system:serviceaccounts", "system:serviceaccounts:gangkeeper", "system:authenticated"]
    assert "patch" not in admitted(client, "/mutate", CONTROLLER, groups, placeholder())
    assert admitted(client, "/validate", CONTROLLER, groups, placeholder())["allowed"] is True


def test_a_gated_member_cannot_become_a_placeholder_to_escape_its_gate(client):
    """Its gate stays (only the controller removes it), but the controller would count it no more."""
    member = gated()
    disguised = copy.deepcopy(member)
    disguised["metadata"]["labels"][names.CAPACITY_FOR_LABEL] = "bert"
    response = admitted(client, "/validate", "alice@example.com", ["system:authenticated"], disguised, member)
    assert response["allowed"] is False
    assert f"metadata.labels[{names.CAPACITY_FOR_LABEL}]: set to" in response["status"]["message"]
