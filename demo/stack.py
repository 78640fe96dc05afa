"""gangkeeper installed on the emulated cluster, as `kubectl apply -k deploy/default` would install it.

Shared by the demo's phase 2 and the end-to-end tests (tests/e2e): an API server that calls the
real webhook through the Service the rendered webhook configurations name (with our CA as
`caBundle`), and the API served over HTTP with a token for the controller's service account
(and one for the admin) and a kubeconfig for the controller. The served API enforces deploy/'s
RBAC (`sim.rbac.deployed_rbac`): the controller gets exactly what its manifests grant, as on a cluster.
"""

from __future__ import annotations

import base64
import json
import secrets
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from gangkeeper import names
from sim.api import ADMIN, CONTROLLER
from sim.apiserver import APIServer
from sim.deployed import REPOSITORY
from sim.faults import Faults
from sim.kubeconfig import write_kubeconfig
from sim.rbac import Authorizer, deployed_rbac
from sim.server import RunningServer

WEBHOOK_KINDS = {"MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
                 "ValidatingWebhookConfiguration": "validatingwebhookconfigurations"}
# The Service the webhook configurations name, as the API server dials it.
WEBHOOK_SERVICE = f"{names.WEBHOOK_SERVICE}.{names.DEFAULT_NAMESPACE}.svc:443"


def kubectl() -> str:
    beside = Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    if not found:
        raise RuntimeError("kubectl not found next to the Python interpreter nor on PATH; run `make install`")
    return found


def rendered_webhook_configurations(ca_pem: bytes) -> list[tuple[str, dict]]:
    """The webhook configurations of `kubectl kustomize deploy/default`, with our CA as caBundle."""
    rendered = subprocess.run([kubectl(), "kustomize", str(REPOSITORY / "deploy" / "default")],
                              check=True, capture_output=True, text=True).stdout
    configurations = []
    for document in yaml.safe_load_all(rendered):
        if document and document.get("kind") in WEBHOOK_KINDS:
            for webhook in document.get("webhooks") or ():
                webhook["clientConfig"]["caBundle"] = base64.b64encode(ca_pem).decode()
            configurations.append((WEBHOOK_KINDS[document["kind"]], document))
    if len(configurations) != 2:
        raise RuntimeError(f"deploy/default renders {len(configurations)} webhook configurations; expected 2")
    return configurations


def api_with_webhook(webhook_address: str, ca_pem: bytes, *,
                     configurations: list[tuple[str, dict]] | None = None, **api_options) -> APIServer:
    """An emulated API server with gangkeeper's webhook configurations installed, calling the webhook
    that listens on `webhook_address` (HOST:PORT) for the Service they name, and the `gangkeeper`
    namespace. `configurations` (from `rendered_webhook_configurations`) saves rendering them again;
    `api_options` go to `APIServer` (clock, native_pod_groups, unserved)."""
    api = APIServer(webhook_services={WEBHOOK_SERVICE: webhook_address}, **api_options)
    for resource, configuration in configurations or rendered_webhook_configurations(ca_pem):
        api.create(resource, configuration)
    api.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": names.DEFAULT_NAMESPACE}})
    return api


def check_granted(servers: Iterable[RunningServer]) -> None:
    """Raise if deploy/'s RBAC refused any request on these servers: the controller tolerates a
    failed write (it logs it and decides again), so a missing grant would otherwise go unnoticed,
    and on a cluster each of these requests would be refused too."""
    refused = sorted({decision for server in servers for decision in server.refused()})
    if refused:
        raise RuntimeError("deploy/'s RBAC refused (403): " +
                           "; ".join(f"{d.username} {d.verb} {d.target}" for d in refused))


@dataclass
class ServedAPI:
    """The API server on 127.0.0.1 over HTTP, and a kubeconfig of the controller's service account."""

    server: RunningServer
    controller_kubeconfig: Path

    @property
    def url(self) -> str:
        return self.server.url

    def stop(self) -> None:
        self.server.stop()


def serve(api: APIServer, workdir: Path, *, name: str = "controller", faults: Faults | None = None,
          authorizer: Authorizer | None = None) -> ServedAPI:
    """Serve `api` over HTTP, under deploy/'s RBAC (`authorizer`, read once per stack and shared by
    its front ends), with fresh tokens for the controller's service account and the admin; the
    controller's kubeconfig is `workdir/NAME.kubeconfig`."""
    controller_token = secrets.token_urlsafe(24)
    server = RunningServer(api, tokens={controller_token: CONTROLLER, secrets.token_urlsafe(24): ADMIN},
                           faults=faults, authorizer=authorizer or deployed_rbac())
    return ServedAPI(server, write_kubeconfig(workdir / f"{name}.kubeconfig", server.url, controller_token))


class WebhookApp:
    """gangkeeper's webhook app answering the emulated API server's AdmissionReviews without a
    socket (a `sim.admission.InProcessWebhook`): the same policy, configuration and answers as
    the gunicorn server, for runs where TLS and processes are not what is being tested."""

    def __init__(self, audit_file: Path):
        from gangkeeper.webhook.app import (
            create_app,  # Flask only where the webhook answers in process
        )

        self._client = create_app({"AUDIT_FILE": str(audit_file)}).test_client()
        self._lock = threading.Lock()

    def __call__(self, path: str, review: dict) -> dict:
        with self._lock:
            answer = self._client.post(path, data=json.dumps(review), content_type="application/json")
        return answer.get_json()
