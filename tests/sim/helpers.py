"""Builders and fixture access shared by the emulated API server's tests."""

import base64
import datetime
import ipaddress
import json
import re
import urllib.error
import urllib.request
from pathlib import Path

from gangkeeper.certs.issue import issue
from sim.apiserver import APIServer
from sim.clock import VirtualClock
from tests import builders
from tests.builders import GPU
from tests.recorded import RECORDED

FIXTURES = RECORDED
NS = "ml"  # the namespace `api_server` creates (the `api` fixture's)
SERVER_OWNED = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields")


def api_server(clock: VirtualClock, namespace: str = NS) -> APIServer:
    """An emulated API server on the virtual clock, with one namespace."""
    api = APIServer(clock=clock.now)
    api.create("namespaces", {"metadata": {"name": namespace}})
    return api


def fixture(relative: str) -> dict:
    return json.loads((FIXTURES / relative).read_text())


def recorded_pod(name: str) -> dict:
    """A pod as a real server stored it (from the watch fixture), stripped back to what a client sends."""
    for event in fixture("api/watch-from-rv-1.json")["body"]:
        if event["object"]["metadata"]["name"] == name:
            pod = json.loads(json.dumps(event["object"]))
            for key in SERVER_OWNED:
                pod["metadata"].pop(key, None)
            pod.pop("status", None)
            return pod
    raise KeyError(name)


def pod(name: str, *, gates=(), node: str = "", labels=None, gpus: int = 1, **spec) -> dict:
    """A pod as the emulation's tests send it: no namespace (the request's), one container limited
    to a CPU, a GiB and `gpus` GPUs (0 too)."""
    limits = {"cpu": "1", "memory": "1Gi", GPU: str(gpus)}
    return builders.pod(name, namespace=None, labels=dict(labels or {}), gates=gates, node_name=node,
                        containers=[builders.container("c", image="busybox:1.36", limits=limits)], **spec)


def namespace(name: str, **labels) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def node(name: str, gpus: int = 8) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(gpus), "pods": "110"}}}


def http(base: str, method: str, path: str, body=None, content_type: str = "application/json",
         headers: dict | None = None) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"Content-Type": content_type, **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def without_volatile(value):
    """Drop what differs between any two servers: identities, versions, times, managed fields."""
    if isinstance(value, dict):
        return {k: without_volatile(v) for k, v in value.items()
                if k not in SERVER_OWNED and k not in ("lastTransitionTime", "time")}
    if isinstance(value, list):
        return [without_volatile(v) for v in value]
    return value


def mask_hunks(message: str) -> str:
    """Diff hunk line numbers depend on how Go lays out the whole spec; the hunk itself must match."""
    return re.sub(r"@@ -\d+,\d+ \+\d+,\d+ @@", "@@ @@", message)


def throwaway_certs(directory: Path, service: str = "webhook", namespace_: str = "gangkeeper") -> dict[str, Path]:
    """A fresh CA and a serving certificate for `service.namespace.svc`, localhost and 127.0.0.1."""
    issued = issue(service, namespace_, datetime.datetime.now(datetime.timezone.utc), 1, ("localhost",),
                   (ipaddress.ip_address("127.0.0.1"),))
    paths = {"ca": directory / "ca.crt", "cert": directory / "tls.crt", "key": directory / "tls.key"}
    paths["ca"].write_bytes(issued.ca_crt)
    paths["cert"].write_bytes(issued.tls_crt)
    paths["key"].write_bytes(issued.tls_key)
    return paths


# --- a webhook served in process ------------------------------------------------------------

WEBHOOK_SERVICE = "webhook.gangkeeper.svc:443"  # where `configuration` sends its webhook
GATE_PATCH = [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": "gangkeeper.io/gang"}]}]


def configuration(kind: str, path: str, operations=("CREATE",), failure_policy="Fail") -> dict:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": f"inproc-{path.strip('/')}"},
            "webhooks": [{"name": f"{path.strip('/')}.inproc.test", "admissionReviewVersions": ["v1"],
                          "sideEffects": "None", "timeoutSeconds": 5, "failurePolicy": failure_policy,
                          "clientConfig": {"service": {"name": "webhook", "namespace": "gangkeeper", "path": path}},
                          "namespaceSelector": {"matchLabels": {"gangkeeper.io/enforce": "true"}},
                          "rules": [{"operations": list(operations), "apiGroups": [""], "apiVersions": ["v1"],
                                     "resources": ["pods"], "scope": "*"}]}]}


class Handler:
    """Records (path, review) and answers what `decide(path, request)` says."""

    def __init__(self):
        self.calls: list[tuple[str, dict]] = []
        self.decide = lambda path, request: {"allowed": True}

    def __call__(self, path: str, review: dict) -> dict:
        self.calls.append((path, review))
        response = dict(self.decide(path, review["request"]), uid=review["request"]["uid"])
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def patched(ops: list[dict]) -> dict:
    return {"allowed": True, "patchType": "JSONPatch", "patch": base64.b64encode(json.dumps(ops).encode()).decode()}


def mutated_api(clock: VirtualClock, handler: Handler, *namespaces: str) -> APIServer:
    """An emulated API server on the virtual clock whose mutating webhook (`/mutate`) is `handler`
    for the pods created in `namespaces` (labelled enforced, as its namespace selector asks)."""
    api = APIServer(clock=clock.now, webhook_services={WEBHOOK_SERVICE: handler})
    for name in namespaces:
        api.create("namespaces", namespace(name, **{"gangkeeper.io/enforce": "true"}))
    api.create("mutatingwebhookconfigurations", configuration("MutatingWebhookConfiguration", "/mutate"))
    return api
