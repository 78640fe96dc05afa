"""Only the controller's identity may remove the gate: who asks is `request.userInfo.username`,
compared exactly. Groups grant nothing, not even system:masters: a cluster admin who removes the
gate by hand would start one member of a group alone, which is what gang scheduling prevents.
(An admin who really must can delete the pod, or edit the webhook configuration: both loud.)"""

import copy
import json

import pytest

from gangkeeper import names
from gangkeeper.webhook.app import create_app
from tests.security.identities import CONTROLLER, LOOKALIKES, WHO, gated
from tests.webhook.builders import review

UID = "5d3c1a2b-0000-4000-8000-000000000001"


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    return create_app({"AUDIT_FILE": str(tmp_path_factory.mktemp("audit") / "audit.log")}).test_client()


def ungate(removed_to=("example.com/other",)) -> dict:
    new = copy.deepcopy(gated())
    new["spec"]["schedulingGates"] = [{"name": name} for name in removed_to] if removed_to is not None else None
    return new


def update_by(client, username: str, groups: list[str], new: dict | None = None) -> dict:
    document = review(new or ungate(), old=gated(), operation="UPDATE")
    document["request"]["userInfo"] = {"username": username, "uid": "4a1e", "groups": groups}
    answer = client.post("/validate", data=json.dumps(document), headers={"Content-Type": "application/json"})
    assert answer.status_code == 200
    response = answer.get_json()["response"]
    assert response["uid"] == UID
    return response


@pytest.mark.parametrize("who, username, groups", WHO, ids=[case[0] for case in WHO])
def test_nobody_but_the_controller_removes_the_gate(client, who, username, groups):
    response = update_by(client, username, groups)
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert f"removed the gate {names.SCHEDULING_GATE}" in message and f"only {CONTROLLER} may remove it" in message


def test_the_controller_removes_the_gate(client):
    assert update_by(client, CONTROLLER, ["system:serviceaccounts", "system:serviceaccounts:gangkeeper",
                                          "system:authenticated"])["allowed"] is True


@pytest.mark.parametrize("trick, username", LOOKALIKES, ids=[case[0] for case in LOOKALIKES])
def test_the_controller_name_is_compared_exactly(client, trick, username):
    assert update_by(client, username, ["system:serviceaccounts:gangkeeper", "system:masters"])["allowed"] is False


def test_belonging_to_the_controllers_groups_is_not_being_the_controller(client):
    groups = ["system:serviceaccounts", "system:serviceaccounts:gangkeeper", "system:authenticated", CONTROLLER]
    assert update_by(client, "mallory@example.com", groups)["allowed"] is False


REMOVALS = [
    ("every gate removed", None),
    ("an empty gate list", ()),
    ("our gate renamed in case", ("example.com/other", "gangkeeper.io/Gang")),
    ("our gate renamed with a space", ("example.com/other", names.SCHEDULING_GATE + " ")),
    ("our gate swapped for a lookalike", ("example.com/other", "gangkeeper.io/gang2")),
]


@pytest.mark.parametrize("how, gates", REMOVALS, ids=[case[0] for case in REMOVALS])
def test_every_way_of_removing_the_gate_counts_as_removing_it(client, how, gates):
    assert update_by(client, "alice@example.com", ["system:authenticated"], ungate(gates))["allowed"] is False
    assert update_by(client, CONTROLLER, [], ungate(gates))["allowed"] is True


def test_a_user_may_still_update_a_gated_pod_without_touching_the_gate(client):
    """The rule is about the gate only: a label change of a gated pod goes through."""
    relabelled = copy.deepcopy(gated())
    relabelled["metadata"]["labels"]["team"] = "nlp"
    assert update_by(client, "alice@example.com", ["system:authenticated"], relabelled)["allowed"] is True


def test_a_user_cannot_move_a_gated_pod_into_another_group(client):
    moved = copy.deepcopy(gated())
    moved["metadata"]["labels"][names.GROUP_LABEL] = "someone-elses-group"
    response = update_by(client, "alice@example.com", ["system:authenticated"], moved)
    assert response["allowed"] is False and "the group of a gated pod cannot change" in response["status"]["message"]


def test_a_configured_controller_name_replaces_the_default_one(tmp_path):
    custom = "system:serviceaccount:platform:gang-controller"
    client = create_app({"CONTROLLER_USERNAME": custom, "AUDIT_FILE": str(tmp_path / "audit.log")}).test_client()
    assert update_by(client, custom, [])["allowed"] is True
    assert update_by(client, CONTROLLER, [])["allowed"] is False
