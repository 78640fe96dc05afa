"""What admission works out once per configuration (the webhooks in order, whether their rules
match a kind of request, their parsed selectors) follows every change of a configuration at
once, and a configuration that does not parse fails each request it meets, as before."""

import pytest

from sim.admission import Admission, Attributes
from sim.api import ADMIN
from sim.apiserver import APIServer
from sim.kinds import Registry
from sim.patching import JSON_PATCH
from tests.sim.helpers import namespace, pod

SERVICE = "hook.hooks.svc:443"


def configuration(name="hook", *, operations=("UPDATE",), object_selector=None, kind="MutatingWebhookConfiguration"):
    webhook = {"name": f"{name}.example.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
               "clientConfig": {"service": {"name": "hook", "namespace": "hooks", "path": "/admit"}},
               "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],
                          "operations": list(operations)}]}
    if object_selector is not None:
        webhook["objectSelector"] = object_selector
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name},
            "webhooks": [webhook]}


@pytest.fixture
def served():
    """An API server whose webhook records each call and allows it; a pod `p` in namespace `w`."""
    calls = []

    def hook(path, review):
        calls.append(review["request"]["name"])
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": review["request"]["uid"], "allowed": True}}
    api = APIServer(webhook_services={SERVICE: hook})
    api.create("namespaces", namespace("w"))
    api.create("pods", pod("p", labels={"team": "a"}), namespace="w")
    return api, calls


def touch(api, value):
    api.patch("pods", "p", {"metadata": {"annotations": {"touched": value}}}, namespace="w")


def test_a_changed_stored_configuration_applies_to_the_very_next_request(served):
    api, calls = served
    api.create("mutatingwebhookconfigurations", configuration(object_selector={"matchLabels": {"team": "a"}}))
    touch(api, "1")
    assert calls == ["p"]
    api.patch("mutatingwebhookconfigurations", "hook",
              [{"op": "replace", "path": "/webhooks/0/objectSelector/matchLabels/team", "value": "b"}],
              patch_type=JSON_PATCH)
    touch(api, "2")
    assert calls == ["p"]
    api.patch("mutatingwebhookconfigurations", "hook",
              [{"op": "replace", "path": "/webhooks/0/rules/0/operations", "value": ["CREATE", "UPDATE"]},
               {"op": "remove", "path": "/webhooks/0/objectSelector"}], patch_type=JSON_PATCH)
    touch(api, "3")
    assert calls == ["p", "p"]
    api.create("pods", pod("q"), namespace="w")
    assert calls == ["p", "p", "q"]
    api.delete("mutatingwebhookconfigurations", "hook")
    touch(api, "4")
    assert calls == ["p", "p", "q"]


def test_configurations_are_called_in_name_order_also_after_one_is_added(served):
    api, _ = served
    api.create("mutatingwebhookconfigurations", configuration("b"))
    api.create("mutatingwebhookconfigurations", configuration("c"))
    attrs = Attributes(api.kind("pods"), "UPDATE", "p", "w", ADMIN, old=api.get("pods", "p", namespace="w"))
    order = [w["name"] for w in api.admission._webhooks("mutatingwebhookconfigurations", attrs, attrs.old)]
    assert order == ["b.example.io", "c.example.io"]
    api.create("mutatingwebhookconfigurations", configuration("a"))
    order = [w["name"] for w in api.admission._webhooks("mutatingwebhookconfigurations", attrs, attrs.old)]
    assert order == ["a.example.io", "b.example.io", "c.example.io"]


def test_a_configuration_changed_in_place_is_seen_too():
    configurations = [configuration(operations=("CREATE",))]
    admission = Admission(lambda plural: configurations if plural == "mutatingwebhookconfigurations" else [],
                          lambda name: {})
    pods = Registry(False, frozenset()).by_name("pods")
    update = Attributes(pods, "UPDATE", "p", "w", ADMIN, old=pod("p"))
    assert admission._webhooks("mutatingwebhookconfigurations", update, pod("p")) == []
    configurations[0]["webhooks"][0]["rules"][0]["operations"].append("UPDATE")
    assert [w["name"] for w in admission._webhooks("mutatingwebhookconfigurations", update, pod("p"))] == \
        ["hook.example.io"]


def test_a_selector_that_does_not_parse_fails_every_request_its_rules_match(served):
    api, calls = served
    api.create("mutatingwebhookconfigurations", configuration(
        object_selector={"matchExpressions": [{"key": "team", "operator": "Sometimes"}]}))
    for value in ("1", "2"):
        with pytest.raises(KeyError):
            touch(api, value)
    api.create("pods", pod("q"), namespace="w")  # a CREATE the rules do not match is admitted
    assert calls == []
