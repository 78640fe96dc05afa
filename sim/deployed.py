"""What this checkout's `deploy/` installs, for the harness to install into the emulation.

The harness (emulation, demo, study, reliability suite, benchmarks) is only ever installed
editable from a repository (`harness/setup.cfg`), so it finds `deploy/` beside its own folders.
The product never does this: it ships without `deploy/` and reads no manifests.
"""

from pathlib import Path

import yaml

from sim.apiserver import APIServer

REPOSITORY = Path(__file__).resolve().parents[1]
DEPLOY_BASE = REPOSITORY / "deploy" / "base"
WEBHOOK_CONFIGURATIONS = DEPLOY_BASE / "webhook-configurations.yaml"
PLACEHOLDER_PRIORITY_CLASS = DEPLOY_BASE / "placeholder-priorityclass.yaml"
_PLURALS = {"MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
            "ValidatingWebhookConfiguration": "validatingwebhookconfigurations"}


def install_webhook_configurations(api: APIServer) -> None:
    """deploy/base's webhook configurations, as `kubectl apply -k deploy/base` creates them (the
    API server's `webhook_services` must say where their Service really listens)."""
    for document in yaml.safe_load_all(WEBHOOK_CONFIGURATIONS.read_text()):
        api.create(_PLURALS[document["kind"]], document)


def install_placeholder_priority_class(api: APIServer) -> None:
    """deploy/base's PriorityClass of placeholder pods, as `kubectl apply -k deploy/base` creates it:
    the controller's placeholders name it, and the API server refuses a pod naming a class it lacks."""
    api.create("priorityclasses", yaml.safe_load(PLACEHOLDER_PRIORITY_CLASS.read_text()))
