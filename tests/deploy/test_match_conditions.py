"""The validating webhook's matchConditions: they skip only the controller's own pod updates and
Gang status writes, name
the controller's service account where the webhook's --controller-username does, and is a field
every supported Kubernetes (1.27+) knows."""

import kubernetes_validate

from gangkeeper import names
from tests.deploy.rendered_manifests import OTHER_NAMESPACE, find, render_chart

OLDEST_SUPPORTED = "1.27"  # alpha there (dropped unless its gate is on), beta and on by default in 1.28


def _skipping_conditions(username: str) -> list[dict]:
    return [{"name": "not-the-controllers-pod-update",
             "expression": f'!(request.userInfo.username == "{username}" '
                           '&& request.resource.resource == "pods" && request.operation == "UPDATE")'},
            {"name": "not-the-controllers-gang-status",
             "expression": f'!(request.userInfo.username == "{username}" && request.resource.resource == "gangs" '
                           '&& has(request.subResource) && request.subResource == "status")'}]


def _webhook(objects, kind: str) -> dict:
    (webhook,) = find(objects, kind, names.WEBHOOK_CONFIGURATION)["webhooks"]
    return webhook


def test_only_the_validating_webhook_skips_the_controllers_pod_updates_and_gang_status_writes(rendered):
    assert _webhook(rendered, "ValidatingWebhookConfiguration")["matchConditions"] == _skipping_conditions(
        names.DEFAULT_CONTROLLER_USERNAME)
    assert "matchConditions" not in _webhook(rendered, "MutatingWebhookConfiguration")


def test_the_chart_names_the_controller_of_its_namespace_as_the_webhooks_flag_does():
    objects = render_chart({"namespace": {"name": OTHER_NAMESPACE}})
    username = f"system:serviceaccount:{OTHER_NAMESPACE}:{names.CONTROLLER_SERVICE_ACCOUNT}"
    assert _webhook(objects, "ValidatingWebhookConfiguration")["matchConditions"] == _skipping_conditions(username)
    webhook_args = find(objects, "Deployment", "gangkeeper-webhook")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--controller-username={username}" in webhook_args


def test_the_webhook_configurations_are_valid_on_the_oldest_supported_kubernetes(default):
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        kubernetes_validate.validate(find(default, kind, names.WEBHOOK_CONFIGURATION), OLDEST_SUPPORTED, strict=True)
