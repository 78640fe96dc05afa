"""deploy/'s matchCondition on the validating webhook, in the emulation with the real webhook app:
the controller's reserve and release patches no longer reach /validate, everyone else's updates
do (a user removing the gate is still refused), and /validate would have allowed the skipped
patches anyway. Creates are always sent, the controller's placeholder pods among them."""

import copy
import json

import pytest
import yaml

from demo.stack import WebhookApp
from gangkeeper import names
from gangkeeper.controller.deciding.patches import release_patch, reserve_patch
from gangkeeper.controller.reading.pods import pod_facts
from sim.api import ADMIN, APIError, service_account
from sim.apiserver import APIServer
from sim.deployed import WEBHOOK_CONFIGURATIONS, install_placeholder_priority_class, install_webhook_configurations
from sim.patching import JSON_PATCH, MERGE_PATCH
from tests.sim.helpers import namespace, pod

NS = "team"
CONTROLLER = service_account(names.DEFAULT_NAMESPACE, names.CONTROLLER_SERVICE_ACCOUNT)
SERVICE = f"{names.WEBHOOK_SERVICE}.{names.DEFAULT_NAMESPACE}.svc:443"
NODE = "gpu-1"


class Counted:
    """The webhook app, with each call's path, operation, user and answer kept."""

    def __init__(self, app: WebhookApp):
        self._app = app
        self.calls: list[tuple[str, str, str, dict]] = []

    def __call__(self, path: str, review: dict) -> dict:
        answer = self._app(path, review)
        request = review["request"]
        self.calls.append((path.split("?")[0], request["operation"], request["userInfo"]["username"],
                           answer["response"]))
        return answer

    def validated(self, operation: str) -> list[tuple[str, bool]]:
        return [(user, response["allowed"]) for path, op, user, response in self.calls
                if path == "/validate" and op == operation]


def emulation(tmp_path, configurations=None) -> tuple[APIServer, Counted]:
    webhook = Counted(WebhookApp(tmp_path / "webhook-audit.jsonl"))
    api = APIServer(webhook_services={SERVICE: webhook})
    if configurations is None:
        install_webhook_configurations(api)
    else:
        for resource, configuration in configurations:
            api.create(resource, configuration)
    api.create("namespaces", namespace(NS, **{names.ENFORCE_LABEL: names.ENFORCE_VALUE}))
    return api, webhook


def without_match_conditions() -> list[tuple[str, dict]]:
    """deploy/base's webhook configurations as a cluster that drops the field (1.27) stores them."""
    configurations = []
    for document in yaml.safe_load_all(WEBHOOK_CONFIGURATIONS.read_text()):
        document = copy.deepcopy(document)
        for webhook in document["webhooks"]:
            webhook.pop("matchConditions", None)
        configurations.append((f"{document['kind'].lower()}s", document))
    return configurations


def member(api: APIServer, name: str, **shape) -> dict:
    annotations = {names.MIN_COUNT_ANNOTATION: "2", **shape.pop("annotations", {})}
    body = pod(name, labels={names.GROUP_LABEL: "train"}, gpus=8, **shape)
    body["metadata"]["annotations"] = annotations
    created = api.create("pods", body, namespace=NS)
    assert names.SCHEDULING_GATE in [g["name"] for g in created["spec"]["schedulingGates"]]
    return created


def reserve_and_release(api: APIServer, name: str) -> dict:
    """The controller's two writes on a member, with the bodies it sends."""
    current = api.get("pods", name, namespace=NS)
    api.patch("pods", name, reserve_patch(current["metadata"]["resourceVersion"], NODE), namespace=NS,
              patch_type=MERGE_PATCH, user=CONTROLLER)
    facts = pod_facts(api.get("pods", name, namespace=NS))
    return api.patch("pods", name, list(release_patch(facts, NODE, released_at=1_800_000_000.0)), namespace=NS,
                     patch_type=JSON_PATCH, user=CONTROLLER)


def remove_gate(api: APIServer, name: str) -> None:
    api.patch("pods", name, [{"op": "remove", "path": "/spec/schedulingGates/0"}], namespace=NS,
              patch_type=JSON_PATCH, user=ADMIN)


def test_the_controllers_reserve_and_release_skip_validate_and_a_users_gate_removal_is_still_refused(tmp_path):
    api, webhook = emulation(tmp_path)
    for name in ("m-0", "m-1", "m-2"):
        member(api, name)
    assert webhook.validated("CREATE") == [("kubernetes-admin", True)] * 3
    for name in ("m-0", "m-1"):
        released = reserve_and_release(api, name)
        assert not released["spec"].get("schedulingGates")
        assert released["metadata"]["annotations"][names.RESERVED_NODE_ANNOTATION] == NODE
    assert webhook.validated("UPDATE") == [], "the controller's four patches were not sent to /validate"
    with pytest.raises(APIError) as refused:
        remove_gate(api, "m-2")
    assert refused.value.status["message"].startswith('admission webhook "validate.gangkeeper.io" denied the request')
    assert webhook.validated("UPDATE") == [("kubernetes-admin", False)]
    audited = [json.loads(line) for line in (tmp_path / "webhook-audit.jsonl").read_text().splitlines()]
    assert [(line["event"], line["user"], line["decision"]) for line in audited
            if line["details"]["operation"] == "UPDATE"] == [("admission.validate", "kubernetes-admin", "denied")]


def test_the_controllers_creates_still_reach_validate(tmp_path):
    api, webhook = emulation(tmp_path)
    api.create("pods", pod("lone", gpus=8), namespace=NS, user=CONTROLLER)
    api.create(names.GANG_PLURAL, {"apiVersion": f"{names.GANG_GROUP}/{names.GANG_VERSION}", "kind": names.GANG_KIND,
                                   "metadata": {"name": "train"}, "spec": {"minCount": 2}},
               namespace=NS, user=CONTROLLER)
    assert webhook.validated("CREATE") == [(CONTROLLER.username, True)] * 2


def placeholder(name: str) -> dict:
    """A pause pod holding capacity for the group train, as the controller makes one."""
    labels = {names.CAPACITY_FOR_LABEL: "train", names.CAPACITY_ATTEMPT_LABEL: "1"}
    return pod(name, labels=labels, gpus=8, priorityClassName=names.PLACEHOLDER_PRIORITY_CLASS)


def test_placeholders_reach_both_webhooks_and_only_the_controllers_are_created_ungated(tmp_path):
    """The controller's creates are sent (no matchCondition skips them): /mutate leaves its placeholder
    ungated, /validate allows it; anyone else's placeholder, and a member relabelled as one, are refused."""
    api, webhook = emulation(tmp_path)
    install_placeholder_priority_class(api)
    created = api.create("pods", placeholder("train-capacity-1-0"), namespace=NS, user=CONTROLLER)
    assert "schedulingGates" not in created["spec"] and created["spec"]["priority"] == names.PLACEHOLDER_PRIORITY
    assert [(path, user, answer["allowed"], "patch" in answer) for path, _, user, answer in webhook.calls] == [
        ("/mutate", CONTROLLER.username, True, False), ("/validate", CONTROLLER.username, True, False)]
    with pytest.raises(APIError) as refused:
        api.create("pods", placeholder("mine"), namespace=NS, user=ADMIN)
    assert f"metadata.labels[{names.CAPACITY_FOR_LABEL}]: kubernetes-admin created a pod" in \
        refused.value.status["message"]
    member(api, "m-0")
    with pytest.raises(APIError) as relabelled:
        api.patch("pods", "m-0", {"metadata": {"labels": {names.CAPACITY_FOR_LABEL: "train"}}}, namespace=NS,
                  patch_type=MERGE_PATCH, user=ADMIN)
    assert f'metadata.labels[{names.CAPACITY_FOR_LABEL}]: set to "train" by kubernetes-admin' in \
        relabelled.value.status["message"]


@pytest.mark.parametrize("shape", [
    {},
    {"annotations": {names.TOPOLOGY_SLICE_REQUIRED_ANNOTATION: "nvidia.com/gpu.clique",
                     names.TOPOLOGY_SLICE_SIZE_ANNOTATION: "2",
                     names.TOPOLOGY_REQUIRED_ANNOTATION: "topology.kubernetes.io/zone",
                     names.SCHEDULE_TIMEOUT_ANNOTATION: "600"}},
    {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a100", "h100"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["gpu-9"]}]}]}}}},
], ids=["explicit-group", "topology-and-timeout", "existing-node-affinity"])
def test_validate_allows_every_one_of_the_skipped_patches(tmp_path, shape):
    """Where the field is dropped, the same patches reach /validate: allowed, with no warning lost."""
    api, webhook = emulation(tmp_path, without_match_conditions())
    member(api, "m-0", **shape)
    reserve_and_release(api, "m-0")
    assert webhook.validated("UPDATE") == [(CONTROLLER.username, True)] * 2
    assert not [r for path, op, _, r in webhook.calls if path == "/validate" and op == "UPDATE" and r.get("warnings")]


def gang_with_reservations(api: APIServer, user, entries: dict) -> dict:
    """A write of the Gang's `status.reservations`, as the controller sends its reservation."""
    return api.patch(names.GANG_PLURAL, "train", {"status": {"reservations": entries}}, namespace=NS,
                     patch_type=MERGE_PATCH, subresource="status", user=user)


@pytest.mark.parametrize("configurations", [None, without_match_conditions()], ids=["1.28+", "1.27"])
def test_only_the_controller_writes_a_gangs_reservations(tmp_path, configurations):
    api, webhook = emulation(tmp_path, configurations)
    api.create(names.GANG_PLURAL, {"apiVersion": f"{names.GANG_GROUP}/{names.GANG_VERSION}", "kind": names.GANG_KIND,
                                   "metadata": {"name": "train"}, "spec": {"minCount": 2}}, namespace=NS, user=ADMIN)
    booked = gang_with_reservations(api, CONTROLLER, {"m-0": {"uid": "uid-m-0", "node": NODE}})
    assert booked["status"]["reservations"] == {"m-0": {"uid": "uid-m-0", "node": NODE}}
    skipped = configurations is None
    assert webhook.validated("UPDATE") == ([] if skipped else [(CONTROLLER.username, True)])
    with pytest.raises(APIError) as refused:
        gang_with_reservations(api, ADMIN, {"mine": {"uid": "uid-mine", "node": NODE}})
    assert refused.value.status["message"].endswith(
        "status.reservations: kubernetes-admin changed the entries of mine; only "
        f"{CONTROLLER.username} writes them (the nodes it booked for the group's members)")
    other = api.patch(names.GANG_PLURAL, "train", {"status": {"phase": "Waiting"}}, namespace=NS,
                      patch_type=MERGE_PATCH, subresource="status", user=ADMIN)
    assert other["status"]["reservations"] == booked["status"]["reservations"], "the rest of the status is not ours"
