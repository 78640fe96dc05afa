"""A webhook service served in process: same configuration matching and answers, no transport."""


import pytest

from sim.api import APIError
from sim.apiserver import APIServer
from tests.sim.helpers import GATE_PATCH, WEBHOOK_SERVICE, Handler, configuration, namespace, patched, pod


@pytest.fixture()
def handler():
    return Handler()


@pytest.fixture()
def api(handler):
    server = APIServer(webhook_services={WEBHOOK_SERVICE: handler})
    server.create("namespaces", namespace("ml", **{"gangkeeper.io/enforce": "true"}))
    server.create("namespaces", namespace("free"))
    server.create("mutatingwebhookconfigurations", configuration("MutatingWebhookConfiguration", "/mutate"))
    server.create("validatingwebhookconfigurations",
                  configuration("ValidatingWebhookConfiguration", "/validate", ("CREATE", "UPDATE")))
    return server


def test_the_handler_gets_the_review_on_the_configured_path_and_its_patch_is_applied(api, handler):
    handler.decide = lambda path, request: patched(GATE_PATCH) if path == "/mutate" else {"allowed": True}
    stored = api.create("pods", pod("p"), namespace="ml")
    assert stored["spec"]["schedulingGates"] == [{"name": "gangkeeper.io/gang"}]
    assert [path for path, _ in handler.calls] == ["/mutate", "/validate"]
    review = handler.calls[0][1]
    assert review["kind"] == "AdmissionReview" and review["request"]["operation"] == "CREATE"
    assert review["request"]["namespace"] == "ml" and review["request"]["object"]["metadata"]["name"] == "p"


def test_selectors_and_rules_decide_which_requests_reach_the_handler(api, handler):
    api.create("pods", pod("elsewhere"), namespace="free")
    assert handler.calls == []
    api.create("pods", pod("p"), namespace="ml")
    handler.calls.clear()
    api.patch("pods", "p", {"status": {"phase": "Pending"}}, namespace="ml", subresource="status")
    assert handler.calls == [], "pods/status is not in the rules"


def test_a_denial_is_the_webhooks_own_status(api, handler):
    handler.decide = lambda path, request: {"allowed": False, "status": {"code": 403, "message": "no GPUs today"}}
    with pytest.raises(APIError) as refused:
        api.create("pods", pod("p"), namespace="ml")
    assert refused.value.code == 403
    assert refused.value.status["message"] == 'admission webhook "mutate.inproc.test" denied the request: no GPUs today'


def test_a_failing_handler_follows_the_failure_policy(handler):
    api = APIServer(webhook_services={"webhook.gangkeeper.svc:443": handler})
    api.create("namespaces", namespace("ml", **{"gangkeeper.io/enforce": "true"}))
    api.create("mutatingwebhookconfigurations",
               configuration("MutatingWebhookConfiguration", "/mutate", failure_policy="Ignore"))

    def broken(path, request):
        raise OSError("handler down")
    handler.decide = broken
    assert api.create("pods", pod("p"), namespace="ml")["metadata"]["name"] == "p"


def labelling(name: str, path: str, reinvocation: str | None) -> dict:
    """A mutating configuration `name` whose one webhook is served on `path`, with that reinvocation policy."""
    configured = configuration("MutatingWebhookConfiguration", path)
    configured["metadata"]["name"] = name
    if reinvocation:
        configured["webhooks"][0]["reinvocationPolicy"] = reinvocation
    return configured


def label_once(key: str):
    """A webhook's answer adding label `key` unless the pod has it."""
    def decide(request: dict) -> dict:
        if key in (request["object"]["metadata"].get("labels") or {}):
            return {"allowed": True}
        return patched([{"op": "add", "path": f"/metadata/labels/{key}", "value": "yes"}])
    return decide


@pytest.mark.parametrize("policy, calls", [("IfNeeded", ["/first", "/second", "/first"]),
                                           ("Never", ["/first", "/second"]), (None, ["/first", "/second"])])
def test_a_webhook_that_asks_is_called_again_once_a_later_one_changed_the_object(handler, policy, calls):
    """kube-apiserver's reinvocation: configurations by name, then again those with IfNeeded that
    an object changed after them reached, seeing that change."""
    api = APIServer(webhook_services={"webhook.gangkeeper.svc:443": handler})
    api.create("namespaces", namespace("ml", **{"gangkeeper.io/enforce": "true"}))
    api.create("mutatingwebhookconfigurations", labelling("b-second", "/second", None))
    api.create("mutatingwebhookconfigurations", labelling("a-first", "/first", policy))
    handler.decide = lambda path, request: label_once(path.strip("/"))(request)
    stored = api.create("pods", pod("p"), namespace="ml")
    assert [path for path, _ in handler.calls] == calls
    assert stored["metadata"]["labels"] == {"first": "yes", "second": "yes"}
    if policy == "IfNeeded":
        assert handler.calls[2][1]["request"]["object"]["metadata"]["labels"]["second"] == "yes"


def test_no_second_call_when_nothing_after_the_webhook_changed_the_object(handler):
    api = APIServer(webhook_services={"webhook.gangkeeper.svc:443": handler})
    api.create("namespaces", namespace("ml", **{"gangkeeper.io/enforce": "true"}))
    api.create("mutatingwebhookconfigurations", labelling("a-first", "/first", "IfNeeded"))
    api.create("mutatingwebhookconfigurations", labelling("b-second", "/second", None))
    handler.decide = lambda path, request: label_once("first")(request) if path == "/first" else {"allowed": True}
    api.create("pods", pod("p"), namespace="ml")
    assert [path for path, _ in handler.calls] == ["/first", "/second"]
