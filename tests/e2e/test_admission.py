"""What admission does around the groups: namespaces that did not opt in are never touched, nobody
but the controller removes the gate, and while no webhook answers, pods in enforced namespaces are
refused (failurePolicy Fail) while other namespaces carry on."""

import pytest

from gangkeeper import names
from sim.api import ADMIN, APIError
from sim.names import GPU, HOSTNAME_LABEL
from tests.e2e.checks import (
    all_succeeded,
    assert_admitted_by_webhook,
    assert_placed_whole_and_succeeded,
    assert_untouched,
    placed,
)
from tests.e2e.stack import is_gated
from tests.e2e.workloads import POOL_LABEL, new_team

pytestmark = pytest.mark.e2e

CONTROLLER = names.DEFAULT_CONTROLLER_USERNAME


def test_a_namespace_that_did_not_opt_in_is_left_to_the_stock_scheduler(stack):
    team = new_team(stack, "not-enforced", enforced=False)
    team.pytorchjob("llm", workers=3, gpus=1)
    team.pod("notebook", gpus=2)

    team.wait_for_workload("pytorchjobs", "llm", "Succeeded")
    team.wait_until(lambda: all_succeeded(team.pods(), 5), "all five pods Succeeded")
    assert_untouched(team.pods_created())
    for name, pod in team.pods().items():
        assert names.RESERVED_NODE_ANNOTATION not in pod["metadata"].get("annotations", {}), name
        assert "affinity" not in pod["spec"], f"{name} was pinned"
    assert team.gangs() == {}


def test_nobody_but_the_controller_removes_the_gate(stack):
    team = new_team(stack, "gate-removal")
    pair = {"gpus": 1, "world_size": 2, "labels": {names.GROUP_LABEL: "pair"},
            "annotations": {names.MIN_COUNT_ANNOTATION: "2"}}
    team.pod("pair-0", **pair)
    team.wait_for_gang("pair", "Waiting", present=1, minCount=2)

    for patch in ([{"op": "remove", "path": "/spec/schedulingGates"}],
                  [{"op": "replace", "path": "/spec/schedulingGates", "value": []}]):
        with pytest.raises(APIError) as refused:
            team.api.patch("pods", "pair-0", patch, namespace=team.name, patch_type="application/json-patch+json",
                           user=ADMIN)
        assert refused.value.code == 403
        assert str(refused.value) == (
            'admission webhook "validate.gangkeeper.io" denied the request: gangkeeper refused this request '
            f"(1 problem): spec.schedulingGates: {ADMIN.username} removed the gate {names.SCHEDULING_GATE}; "
            f"only {CONTROLLER} may remove it, once capacity for the whole group is reserved "
            f"(why its group waits: kubectl get gangs -n {team.name}, column Reason)")
    pod = team.pods()["pair-0"]
    assert is_gated(pod) and placed(team, [pod]) == []

    team.pod("pair-1", **pair)  # the group is complete: the controller reserves it and removes the gates
    team.wait_until(lambda: all_succeeded(team.pods(), 2), "both members Succeeded")
    assert_admitted_by_webhook(team.pods_created(), source=names.SOURCE_EXPLICIT, count=2)
    assert_placed_whole_and_succeeded(team, "pair", 2)


def test_while_the_webhook_is_down_enforced_namespaces_refuse_pods_and_others_do_not(stack, webhook):
    enforced = new_team(stack, "webhook-down")
    other = new_team(stack, "webhook-down-other", enforced=False)
    webhook.stop()
    try:
        for name, gpus in (("trainer", 1), ("no-gpu", 0)):
            with pytest.raises(APIError) as refused:
                enforced.pod(name, gpus=gpus)
            assert refused.value.code == 500
            assert str(refused.value).startswith(
                'Internal error occurred: failed calling webhook "mutate.gangkeeper.io": failed to call webhook: '
                'Post "https://gangkeeper-webhook.gangkeeper.svc:443/mutate?timeout=5s"')
        assert enforced.pods() == {}
        other.pod("trainer", gpus=1)
    finally:
        webhook.start()
    other.wait_until(lambda: all_succeeded(other.pods(), 1), "the pod of the namespace that did not opt in Succeeded")
    assert_untouched(other.pods_created())

    enforced.pod("trainer", gpus=1)  # the webhook is back: admitted, gated, placed
    enforced.wait_until(lambda: all_succeeded(enforced.pods(), 1), "the pod created after the restart Succeeded")
    group = assert_admitted_by_webhook(enforced.pods_created(), source=names.SOURCE_ACCELERATOR_POD, count=1)
    assert group == "trainer"
    assert_placed_whole_and_succeeded(enforced, "trainer", 1)


def _waiting_pair(stack, name: str):
    """A team with one 4-GPU node and a group of two 4-GPU pods: complete, gated, waiting for a second node."""
    team = new_team(stack, name, nodes=1)
    pair = {"gpus": 4, "world_size": 2, "labels": {names.GROUP_LABEL: "pair"},
            "annotations": {names.MIN_COUNT_ANNOTATION: "2"}}
    team.pod("pair-0", **pair)
    team.pod("pair-1", **pair)
    team.wait_for_gang("pair", "Waiting", reason="NoFit")
    return team


def _second_node(team) -> None:
    """The room the pair waits for: a second 4-GPU node in the team's pool."""
    team.api.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": f"{team.name}-1", "labels": {POOL_LABEL: team.name, HOSTNAME_LABEL: f"{team.name}-1"}},
        "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110", GPU: "4"},
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}, user=ADMIN)


def test_while_the_webhook_is_down_the_controller_still_releases_a_waiting_group(stack, webhook):
    """On 1.28 and later the validating webhook's matchConditions skip the controller's own pod
    updates (deploy/ ships them): with no webhook answering, new pods are refused but what waits is
    released when room comes."""
    team = _waiting_pair(stack, "webhook-down-release")
    webhook.stop()
    try:
        _second_node(team)
        team.wait_until(lambda: all_succeeded(team.pods(), 2), "both members Succeeded while the webhook is down")
    finally:
        webhook.start()
    assert_placed_whole_and_succeeded(team, "pair", 2)


def test_without_match_conditions_a_waiting_group_waits_for_the_webhook(stack, webhook):
    """A 1.27 API server (matchConditions behind a gate that is off) drops them from the webhook
    configurations: every pod UPDATE in an enforced namespace, the controller's release too, needs
    the webhook, and fails closed while none answers."""
    configurations = {kind: stack.api.get(kind, name) for kind, name in (
        ("validatingwebhookconfigurations", names.WEBHOOK_CONFIGURATION),
        ("mutatingwebhookconfigurations", names.WEBHOOK_CONFIGURATION))}
    for kind, configuration in configurations.items():
        stripped = {**configuration, "webhooks": [{key: value for key, value in hook.items() if key != "matchConditions"}
                                                  for hook in configuration["webhooks"]]}
        stack.api.update(kind, stripped, user=ADMIN)
    try:
        team = _waiting_pair(stack, "webhook-down-127")
        webhook.stop()
        try:
            _second_node(team)
            team.wait_for_event("Gang", team.gangs()["pair"]["metadata"]["name"], "Reserved")
            with pytest.raises(AssertionError, match="not within"):
                team.stack.wait_until(lambda: any(p["spec"].get("nodeName") for p in team.pods().values()),
                                      "a member bound while the webhook is down", timeout=3)
            assert all(is_gated(pod) for pod in team.pods().values()), "the release fails closed"
        finally:
            webhook.start()
        team.wait_until(lambda: all_succeeded(team.pods(), 2), "both members Succeeded once the webhook is back")
        assert_placed_whole_and_succeeded(team, "pair", 2)
    finally:
        for kind, configuration in configurations.items():
            current = stack.api.get(kind, names.WEBHOOK_CONFIGURATION)
            stack.api.update(kind, {**configuration, "metadata": current["metadata"]}, user=ADMIN)
