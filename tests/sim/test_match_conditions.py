"""Webhook matchConditions, as kube-apiserver applies them: CEL over `object`, `oldObject` and
`request`; any false skips the webhook, all true call it, an error with none false is the
failurePolicy's (Fail: 403 with the errors, Ignore: skipped)."""

import pytest

from sim import admission
from sim.api import ADMIN, APIError, User, service_account
from sim.apiserver import APIServer
from tests.sim.helpers import WEBHOOK_SERVICE, Handler, configuration, namespace, pod

CONTROLLER = service_account("gangkeeper", "gangkeeper-controller")
ALICE = User("alice", ("team-a", "system:authenticated"))


@pytest.fixture()
def handler():
    return Handler()


def api_with(handler: Handler, *conditions: tuple[str, str], failure_policy: str = "Fail",
             kind: str = "ValidatingWebhookConfiguration", operations=("CREATE", "UPDATE")) -> APIServer:
    """An API server whose one webhook (at /hook) has these (name, expression) matchConditions."""
    server = APIServer(webhook_services={WEBHOOK_SERVICE: handler})
    server.create("namespaces", namespace("ml", **{"gangkeeper.io/enforce": "true"}))
    hook = configuration(kind, "/hook", operations, failure_policy)
    hook["webhooks"][0]["matchConditions"] = [{"name": name, "expression": expression}
                                              for name, expression in conditions]
    server.create(f"{kind.lower()}s", hook)
    return server


def calls(handler: Handler) -> list[tuple[str, str]]:
    return [(review["request"]["operation"], review["request"]["userInfo"]["username"]) for _, review in handler.calls]


def test_the_webhook_is_called_when_every_condition_is_true(handler):
    api = api_with(handler, ("create", 'request.operation == "CREATE"'), ("in-ml", 'request.namespace == "ml"'),
                   ("no-old-object", "oldObject == null"), ("named", 'object.metadata.name == request.name'))
    api.create("pods", pod("p"), namespace="ml")
    assert calls(handler) == [("CREATE", "kubernetes-admin")]


def test_one_false_condition_skips_the_webhook(handler):
    api = api_with(handler, ("always", "true"), ("updates-only", 'request.operation == "UPDATE"'))
    api.create("pods", pod("p"), namespace="ml")
    assert handler.calls == []
    api.patch("pods", "p", {"metadata": {"labels": {"a": "b"}}}, namespace="ml")
    assert calls(handler) == [("UPDATE", "kubernetes-admin")]


def test_the_controllers_pod_updates_skip_the_webhook_and_everyone_elses_reach_it(handler):
    api = api_with(handler, ("not-the-controllers-pod-update",
                             f'!(request.userInfo.username == "{CONTROLLER.username}" '
                             '&& request.resource.resource == "pods" && request.operation == "UPDATE")'))
    api.create("pods", pod("p"), namespace="ml", user=CONTROLLER)
    for user in (CONTROLLER, ADMIN, ALICE, CONTROLLER):
        api.patch("pods", "p", {"metadata": {"annotations": {"by": user.username}}}, namespace="ml", user=user)
    assert calls(handler) == [("CREATE", CONTROLLER.username), ("UPDATE", "kubernetes-admin"), ("UPDATE", "alice")]


def test_conditions_read_the_object_the_old_object_and_the_users_groups(handler):
    api = api_with(handler, ("team-a", '"team-a" in request.userInfo.groups'),
                   ("label-changes", 'object.metadata.labels["tier"] != oldObject.metadata.labels["tier"]'),
                   operations=("UPDATE",))
    api.create("pods", pod("p", labels={"tier": "1"}), namespace="ml")
    api.patch("pods", "p", {"metadata": {"labels": {"tier": "2"}}}, namespace="ml", user=ALICE)
    api.patch("pods", "p", {"metadata": {"labels": {"other": "x"}}}, namespace="ml", user=ALICE)
    api.patch("pods", "p", {"metadata": {"labels": {"tier": "3"}}}, namespace="ml", user=ADMIN)
    assert [review["request"]["object"]["metadata"]["labels"]["tier"] for _, review in handler.calls] == ["2"]


def test_the_mutating_webhooks_conditions_apply_too(handler):
    api = api_with(handler, ("alice-only", 'request.userInfo.username == "alice"'),
                   kind="MutatingWebhookConfiguration", operations=("CREATE",))
    api.create("pods", pod("p"), namespace="ml")
    api.create("pods", pod("q"), namespace="ml", user=ALICE)
    assert calls(handler) == [("CREATE", "alice")]


def test_an_error_with_failure_policy_fail_refuses_the_request_without_calling_the_webhook(handler):
    expression = 'object.metadata.labels["team"] == "a"'
    api = api_with(handler, ("always", "true"), ("team", expression))
    with pytest.raises(APIError) as refused:
        api.create("pods", pod("p"), namespace="ml")
    body = refused.value.status
    assert (body["code"], body["reason"]) == (403, "Forbidden")
    assert body["message"].startswith(f"pods \"p\" is forbidden: expression '{expression}' resulted in error: ")
    assert body["message"].endswith("resulted in error: no such key: team")
    assert body["details"] == {"name": "p", "kind": "pods"}
    assert handler.calls == [] and api.list("pods", namespace="ml") == []


def test_an_error_with_failure_policy_ignore_skips_the_webhook(handler):
    api = api_with(handler, ("team", 'object.metadata.labels["team"] == "a"'), failure_policy="Ignore")
    api.create("pods", pod("p"), namespace="ml")
    assert handler.calls == [] and [p["metadata"]["name"] for p in api.list("pods", namespace="ml")] == ["p"]


def test_a_false_condition_wins_over_an_error_even_failing_closed(handler):
    api = api_with(handler, ("team", 'object.metadata.labels["team"] == "a"'), ("never", "false"))
    api.create("pods", pod("p"), namespace="ml")
    assert handler.calls == []


@pytest.mark.parametrize(("expression", "message"), [
    ("request.operation ==", "compilation error: "),
    ("request.name", "compilation error: must evaluate to bool"),
    ('authorizer.group("").resource("pods").check("get").allowed()',
     "expression 'authorizer.group(\"\").resource(\"pods\").check(\"get\").allowed()' resulted in error: "
     "the emulation has no authorizer variable"),
], ids=["does-not-compile", "not-a-bool", "authorizer-not-emulated"])
def test_what_the_emulation_cannot_evaluate_is_an_error(handler, expression, message):
    api = api_with(handler, ("broken", expression))
    with pytest.raises(APIError) as refused:
        api.create("pods", pod("p"), namespace="ml")
    assert refused.value.status["message"].startswith(f'pods "p" is forbidden: {message}')
    assert handler.calls == []


def test_several_errors_are_listed_once_each(handler):
    api = api_with(handler, ("a", "object.spec.missing"), ("b", "object.spec.missing"), ("c", "object.status.x"))
    with pytest.raises(APIError) as refused:
        api.create("pods", pod("p"), namespace="ml")
    message = refused.value.status["message"]
    assert message.startswith('pods "p" is forbidden: [expression \'object.spec.missing\' resulted in error: ')
    assert message.count("object.spec.missing") == 1 and message.endswith("]")


def test_each_expression_is_compiled_once_and_evaluated_once_per_distinct_data_it_reads(handler, monkeypatch):
    evaluations = []
    evaluate = admission._Condition._evaluate
    monkeypatch.setattr(admission._Condition, "_evaluate",
                        lambda self, variables: evaluations.append(variables["request"]["name"])
                        or evaluate(self, variables))
    expression = 'request.userInfo.username != "nobody-else" && object.metadata.labels["tier"] != "x"'
    api = api_with(handler, ("reads-user-and-tier", expression))
    assert admission._condition(expression) is admission._condition(expression)
    for name, tier, user in (("a", "1", ADMIN), ("b", "1", ADMIN), ("c", "2", ADMIN), ("d", "1", ALICE),
                             ("e", "x", ADMIN), ("f", "x", ADMIN)):
        api.create("pods", pod(name, labels={"tier": tier}), namespace="ml", user=user)
    assert evaluations.count("b") == 0 and evaluations.count("f") == 0, "same user and tier: the verdict is kept"
    assert [name for name in "acde" if name in evaluations] == list("acde")
    assert [review["request"]["name"] for _, review in handler.calls] == list("abcd")
