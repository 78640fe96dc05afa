"""Admission webhooks over real HTTPS, checked against the AdmissionReviews a real server sent."""

import base64
import json
import socket
import ssl
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sim.api import APIError, User
from sim.apiserver import APIServer
from sim.server import RunningServer
from tests.sim.helpers import fixture, namespace, pod, throwaway_certs

ALICE = User("alice")
GATE_PATCH = [{"op": "add", "path": "/metadata/labels", "value": {"gangkeeper.io/group": "captured"}},
              {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": "gangkeeper.io/gang"}]}]


class Webhook:
    """A tiny HTTPS webhook that records what it receives and answers with `decide(path, request)`."""

    def __init__(self, certs):
        self.received: list[dict] = []
        self.connections = 0
        self.sockets: list = []
        self.decide = lambda path, request: {"allowed": True}
        webhook = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keeps connections alive, as gunicorn's gthread workers do

            def log_message(self, *args):
                pass

            def setup(self):
                webhook.connections += 1
                webhook.sockets.append(self.request)
                super().setup()

            def do_POST(self):
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                webhook.received.append({"path": self.path, "headers": dict(self.headers), "review": review})
                response = dict(webhook.decide(self.path, review["request"]), uid=review["request"]["uid"])
                body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                   "response": response}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(certs["cert"], certs["key"])
        self.http.socket = context.wrap_socket(self.http.socket, server_side=True)
        self.address = f"127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close_connections(self):
        """Close every connection without a TLS close_notify, as gunicorn closes an idle kept-alive one."""
        for sock in self.sockets:
            sock.shutdown(socket.SHUT_RDWR)

    def stop(self):
        self.http.shutdown()
        self.http.server_close()


def configuration(kind: str, path: str, ca: bytes, operations=("CREATE",), failure_policy="Fail") -> dict:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": f"gangkeeper-{path.strip('/')}"},
            "webhooks": [{"name": f"{path.strip('/')}.gangkeeper.io", "admissionReviewVersions": ["v1"],
                          "sideEffects": "None", "timeoutSeconds": 5, "failurePolicy": failure_policy,
                          "clientConfig": {"caBundle": base64.b64encode(ca).decode(),
                                           "service": {"name": "webhook", "namespace": "gangkeeper", "path": path}},
                          "namespaceSelector": {"matchLabels": {"gangkeeper.io/enforce": "true"}},
                          "rules": [{"operations": list(operations), "apiGroups": [""], "apiVersions": ["v1"],
                                     "resources": ["pods"], "scope": "*"}]}]}


@pytest.fixture()
def setup(tmp_path):
    certs = throwaway_certs(tmp_path)
    webhook = Webhook(certs)
    api = APIServer(webhook_services={"webhook.gangkeeper.svc:443": webhook.address})
    api.create("namespaces", namespace("ml-training", **{"gangkeeper.io/enforce": "true"}))
    api.create("namespaces", namespace("free"))
    ca = certs["ca"].read_bytes()
    api.create("mutatingwebhookconfigurations", configuration("MutatingWebhookConfiguration", "/mutate", ca))
    api.create("validatingwebhookconfigurations",
               configuration("ValidatingWebhookConfiguration", "/validate", ca, ("CREATE", "UPDATE")))
    webhook.decide = lambda path, request: (
        {"allowed": True, "patchType": "JSONPatch", "patch": base64.b64encode(json.dumps(GATE_PATCH).encode()).decode()}
        if path.startswith("/mutate") else {"allowed": True})
    yield api, webhook
    webhook.stop()


def test_requests_are_shaped_like_the_recorded_ones(setup):
    api, webhook = setup
    created = api.create("pods", {"metadata": {"generateName": "gen-"}, "spec": pod("x")["spec"]},
                         namespace="ml-training", user=ALICE)
    mutate, validate = webhook.received
    for got, recorded in ((mutate, fixture("admission/11-mutate-create-gen-.json")),
                          (validate, fixture("admission/12-validate-create-gen-8w2rr.json"))):
        assert got["path"] == recorded["http"]["path"]
        assert {k: got["headers"][k] for k in recorded["http"]["headers"]} == recorded["http"]["headers"]
        assert set(got["review"]["request"]) == set(recorded["review"]["request"])
        assert got["review"]["request"]["userInfo"] == recorded["review"]["request"]["userInfo"]
        assert set(got["review"]["request"]["object"]["metadata"]) <= set(recorded["review"]["request"]["object"]["metadata"])
    assert "uid" not in mutate["review"]["request"]["object"]["metadata"]
    assert validate["review"]["request"]["name"] == created["metadata"]["name"]
    assert created["spec"]["schedulingGates"] == [{"name": "gangkeeper.io/gang"}]
    assert created["status"]["conditions"][0]["reason"] == "SchedulingGated"


def test_update_sends_old_object_and_update_options(setup):
    api, webhook = setup
    api.create("pods", pod("solo"), namespace="ml-training")
    api.patch("pods", "solo", {"spec": {"schedulingGates": None}}, namespace="ml-training", user=ALICE,
              options={"fieldManager": "kubectl-patch"})
    request = webhook.received[-1]["review"]["request"]
    recorded = fixture("admission/13-validate-update-solo.json")["review"]["request"]
    assert set(request) == set(recorded)
    assert request["options"] == recorded["options"]
    assert request["oldObject"]["spec"]["schedulingGates"] == [{"name": "gangkeeper.io/gang"}]
    assert "schedulingGates" not in request["object"]["spec"]


def test_namespace_selector_skips_other_namespaces(setup):
    api, webhook = setup
    created = api.create("pods", pod("p"), namespace="free")
    assert webhook.received == [] and "schedulingGates" not in created["spec"]


def test_denial_carries_the_webhook_message_and_code(setup):
    api, webhook = setup
    webhook.decide = lambda path, request: {"allowed": path.startswith("/mutate"),
                                            "status": {"code": 403, "message": "only the controller removes the gate"}}
    with pytest.raises(APIError) as refused:
        api.create("pods", pod("p"), namespace="ml-training")
    assert refused.value.code == 403
    assert refused.value.status["message"] == ('admission webhook "validate.gangkeeper.io" denied the request: '
                                               "only the controller removes the gate")


def test_unreachable_webhook_fails_closed_or_is_ignored(setup, tmp_path):
    api, webhook = setup
    webhook.stop()
    with pytest.raises(APIError) as refused:
        api.create("pods", pod("p"), namespace="ml-training")
    assert refused.value.code == 500 and 'failed calling webhook "mutate.gangkeeper.io"' in refused.value.status["message"]
    for plural in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        for config in api.list(plural):
            config["webhooks"][0]["failurePolicy"] = "Ignore"
            api.update(plural, config)
    assert api.create("pods", pod("p"), namespace="ml-training")["metadata"]["name"] == "p"


def test_warnings_reach_http_clients(setup):
    api, webhook = setup
    webhook.decide = lambda path, request: {"allowed": True, "warnings": ["group has no min-count"]}
    with RunningServer(api) as running:
        request = urllib.request.Request(f"{running.url}/api/v1/namespaces/ml-training/pods",
                                         data=json.dumps(pod("p")).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as reply:
            assert reply.headers.get_all("Warning") == ['299 - "group has no min-count"'] * 2


def test_admissions_share_a_kept_alive_connection(setup):
    """The real API server keeps its webhook connections alive: one TLS handshake, not one per call."""
    api, webhook = setup
    for index in range(5):
        api.create("pods", pod(f"p-{index}"), namespace="ml-training")
    assert len(webhook.received) == 10  # a mutate and a validate per pod
    assert webhook.connections == 1


def test_a_kept_alive_connection_the_webhook_closed_is_replaced(setup):
    """gunicorn closes a connection idle for its keepalive timeout (or all of them when it stops)
    without a TLS close_notify; the next admission goes over a fresh connection instead of failing."""
    api, webhook = setup
    api.create("pods", pod("p-0"), namespace="ml-training")
    webhook.close_connections()
    api.create("pods", pod("p-1"), namespace="ml-training")
    assert [r["review"]["request"]["name"] for r in webhook.received][-2:] == ["p-1", "p-1"]
    assert webhook.connections == 2


def test_every_namespace_is_labelled_with_its_name_for_namespace_selectors(setup):
    api, webhook = setup
    relabelled = api.patch("namespaces", "kube-system", {"metadata": {"labels": {
        "gangkeeper.io/enforce": "true", "kubernetes.io/metadata.name": None}}})
    assert relabelled["metadata"]["labels"]["kubernetes.io/metadata.name"] == "kube-system"
    excluding = api.get("mutatingwebhookconfigurations", "gangkeeper-mutate")
    excluding["webhooks"][0]["namespaceSelector"]["matchExpressions"] = [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}]
    api.update("mutatingwebhookconfigurations", excluding)
    created = api.create("pods", pod("p"), namespace="kube-system")
    assert "schedulingGates" not in created["spec"]
    assert [received["path"] for received in webhook.received] == ["/validate?timeout=5s"]
