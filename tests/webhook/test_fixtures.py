"""Every request recorded from kube-apiserver v1.36, replayed with its own path and headers."""

import json

import pytest

from gangkeeper import names
from gangkeeper.webhook.app import create_app
from tests.webhook.builders import FIXTURES, applied, gate_names, patch_of

PYTORCHJOB_GROUP = "pytorch-dist-6f1c7c1e-8f31-4a44-9f7e-1b2f2c8e9a01"
JOBSET_GROUP = "trainer-5c1d0f4e-2b7a-4c55-9d7e-7a1c0e2f9b10-0"

# number → (group, source, gates after) for a patched mutate; None for allowed without a patch.
MUTATES = {
    "01": (PYTORCHJOB_GROUP, names.SOURCE_PYTORCHJOB, [names.SCHEDULING_GATE]),
    "03": (PYTORCHJOB_GROUP, names.SOURCE_PYTORCHJOB, [names.SCHEDULING_GATE]),
    "05": (JOBSET_GROUP, names.SOURCE_JOBSET, [names.SCHEDULING_GATE]),
    "07": ("solo", names.SOURCE_ACCELERATOR_POD, ["example.com/other", names.SCHEDULING_GATE]),
    "09": None,  # CPU-only pod
    "11": ("gen-fb85ef1b", names.SOURCE_ACCELERATOR_POD, [names.SCHEDULING_GATE]),  # generateName + uid[:8]
    "18": None,  # created with spec.nodeName (and another gate): the API refuses gates on it
    "19": None,
}
DENIED_VALIDATES = {"13"}  # alice removes our gate
ALL = sorted(path.name for path in FIXTURES.glob("*.json"))


@pytest.fixture(scope="module")
def client():
    return create_app().test_client()


def replay(client, filename: str) -> tuple[dict, dict]:
    recorded = json.loads((FIXTURES / filename).read_text())
    http = recorded["http"]
    answer = client.open(http["path"], method=http["method"], headers=http["headers"],
                         data=json.dumps(recorded["review"]))
    assert answer.status_code == 200, answer.get_data(as_text=True)
    body = answer.get_json()
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    assert body["response"]["uid"] == recorded["review"]["request"]["uid"]
    return recorded["review"]["request"], body["response"]


def test_every_fixture_has_an_expectation():
    assert len(ALL) == 20
    assert {name[:2] for name in ALL if "-mutate-" in name} == set(MUTATES)


@pytest.mark.parametrize("filename", [name for name in ALL if "-mutate-" in name])
def test_mutate(client, filename):
    request, response = replay(client, filename)
    expected = MUTATES[filename[:2]]
    assert response["allowed"] is True
    if expected is None:
        assert "patch" not in response
        return
    group, source, gates = expected
    pod = applied(request["object"], patch_of(response))
    assert pod["metadata"]["labels"][names.GROUP_LABEL] == group
    assert pod["metadata"]["annotations"][names.GROUP_SOURCE_ANNOTATION] == source
    assert gate_names(pod) == gates
    for key, value in (request["object"]["metadata"].get("labels") or {}).items():
        assert pod["metadata"]["labels"][key] == value


@pytest.mark.parametrize("filename", [name for name in ALL if "-validate-" in name])
def test_validate(client, filename):
    request, response = replay(client, filename)
    if filename[:2] in DENIED_VALIDATES:
        assert response["allowed"] is False
        assert response["status"]["code"] == 403
        message = response["status"]["message"]
        assert "alice" in message and names.DEFAULT_CONTROLLER_USERNAME in message and names.SCHEDULING_GATE in message
    else:
        assert response == {"uid": request["uid"], "allowed": True}


def test_mutate_is_idempotent_on_what_it_produced(client):
    """Replaying a mutate on its own output (reinvocationPolicy: IfNeeded) changes nothing."""
    recorded = json.loads((FIXTURES / ALL[0]).read_text())
    _, response = replay(client, ALL[0])
    recorded["review"]["request"]["object"] = applied(recorded["review"]["request"]["object"], patch_of(response))
    again = client.post("/mutate", json=recorded["review"]).get_json()["response"]
    assert again == {"uid": recorded["review"]["request"]["uid"], "allowed": True}


def test_dry_run_gets_the_same_answer(client):
    recorded = json.loads((FIXTURES / ALL[0]).read_text())
    recorded["review"]["request"]["dryRun"] = True
    _, response = replay(client, ALL[0])
    assert client.post("/mutate", json=recorded["review"]).get_json()["response"] == response


def solo_as_placeholder(user: str) -> dict:
    """The recorded create of solo (07), a GPU pod, labelled as a placeholder and sent by `user`."""
    review = json.loads((FIXTURES / "07-mutate-create-solo.json").read_text())["review"]
    review["request"]["object"]["metadata"]["labels"] = {names.CAPACITY_FOR_LABEL: "solo"}
    review["request"]["userInfo"]["username"] = user
    return review


def test_a_recorded_gpu_pod_labelled_as_a_placeholder(client):
    """solo, gated when recorded, is left ungated as a placeholder; /validate, sent the same pod
    (/mutate changed nothing), allows it from the controller alone."""
    controller, operator = names.DEFAULT_CONTROLLER_USERNAME, "system:serviceaccount:ml-training:training-operator"
    mutated = client.post("/mutate", json=solo_as_placeholder(controller)).get_json()["response"]
    assert mutated == {"uid": solo_as_placeholder(controller)["request"]["uid"], "allowed": True}
    assert client.post("/validate", json=solo_as_placeholder(controller)).get_json()["response"]["allowed"] is True
    refused = client.post("/validate", json=solo_as_placeholder(operator)).get_json()["response"]
    assert refused["allowed"] is False and refused["status"]["code"] == 403
    assert f"metadata.labels[{names.CAPACITY_FOR_LABEL}]: {operator} created a pod" in refused["status"]["message"]


def test_a_recorded_update_that_turns_a_member_into_a_placeholder_is_refused(client):
    review = json.loads((FIXTURES / "16-validate-update-pytorch-dist-worker-0.json").read_text())["review"]
    review["request"]["object"]["metadata"]["labels"][names.CAPACITY_FOR_LABEL] = "captured"
    refused = client.post("/validate", json=review).get_json()["response"]
    assert refused["allowed"] is False
    assert (f'metadata.labels[{names.CAPACITY_FOR_LABEL}]: set to "captured" by kubernetes-admin'
            in refused["status"]["message"])
