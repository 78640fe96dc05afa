"""The emulated cluster the controller's end-to-end tests run against, and what they check on it.

`Emulation` is the emulated API server with gangkeeper's real webhook registered from
`deploy/base` (its Flask app answers in process: same policy, same configuration, no TLS), an
enforced namespace, HTTP front ends (one per controller replica, so that one replica can be cut
off) and controllers talking to them with the real `kubernetes` client as the controller's
service account, under deploy/'s RBAC (closing fails if it refused anything). `invariants()`
watches it with `sim.invariants`, which checks on every committed change that no member is released
(let alone bound) before its whole group's capacity is reserved, that no node is ever promised more
than it has, and gangkeeper's other promises.
"""

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

from demo.stack import WebhookApp, check_granted, serve
from gangkeeper import names
from gangkeeper.audit import AuditLog
from gangkeeper.controller.deciding.settings import Settings
from gangkeeper.controller.metrics import Metrics
from gangkeeper.controller.reading.kube import load
from gangkeeper.controller.runner import Controller
from gangkeeper.identity import to_label_value
from sim.apiserver import APIServer
from sim.deployed import install_webhook_configurations
from sim.invariants import Checker, Watch
from sim.rbac import deployed_rbac
from sim.reservations import GANGS, Reservations
from sim.server import RunningServer
from tests import builders

NS = "team"
WEBHOOK_SERVICE = f"{names.WEBHOOK_SERVICE}.{names.DEFAULT_NAMESPACE}.svc:443"
RESYNC_SECONDS = 0.5  # the controllers' here: time-driven decisions wait at most this long


class Lines:
    """An audit sink that keeps the parsed lines."""

    def __init__(self):
        self.lines: list[dict] = []

    def write_line(self, line: str) -> None:
        self.lines.append(json.loads(line))

    def events(self) -> list[str]:
        return [line["event"] for line in self.lines]


class Emulation:
    """An API server with the webhook, and the controllers started on it (see module docstring)."""

    def __init__(self, workdir: Path, **api_options):
        self.workdir = workdir
        self.api = APIServer(webhook_services={WEBHOOK_SERVICE: WebhookApp(workdir / "webhook-audit.jsonl")},
                             **api_options)
        install_webhook_configurations(self.api)
        self.api.create("namespaces", {"metadata": {"name": NS, "labels": {names.ENFORCE_LABEL: "true"}}})
        self.api.create("namespaces", {"metadata": {"name": "other"}})
        self.api.create("namespaces", {"metadata": {"name": names.DEFAULT_NAMESPACE}})
        self.servers: list[RunningServer] = []
        self.rbac = deployed_rbac()
        self._running: list[tuple[Controller, threading.Event, threading.Thread]] = []

    def kubeconfig(self) -> tuple[Path, RunningServer]:
        """A kubeconfig of the controller's service account, on an HTTP front end of its own."""
        served = serve(self.api, self.workdir, name=f"controller-{len(self.servers)}", authorizer=self.rbac)
        self.servers.append(served.server)
        return served.controller_kubeconfig, served.server

    def controller(self, settings: Settings = Settings(), **options) -> tuple[Controller, Lines]:
        """A controller over HTTP, leading alone, its loop running on a thread until `close()`."""
        audit = Lines()
        path, _ = self.kubeconfig()
        options = {"resync_seconds": RESYNC_SECONDS, "debounce_seconds": 0.02, **options}
        controller = Controller(load(str(path)), settings, AuditLog("controller", audit), Metrics(), **options)
        stop = threading.Event()
        controller.start()
        thread = threading.Thread(target=controller.run, args=(stop, lambda: True), daemon=True)
        thread.start()
        self._running.append((controller, stop, thread))
        return controller, audit

    def stop(self, controller: Controller) -> None:
        for running, stop, thread in self._running:
            if running is controller:
                stop.set()
                thread.join(5)
                running.stop()

    def close(self) -> None:
        for controller, _, _ in self._running:
            self.stop(controller)
        for server in self.servers:
            server.stop()
        check_granted(self.servers)

    def pods(self, namespace: str = NS) -> dict[str, dict]:
        return {p["metadata"]["name"]: p for p in self.api.list("pods", namespace=namespace)}

    def reserved_nodes(self, namespace: str = NS) -> dict[str, str]:
        """The node reserved for each pod that has one (its own annotation, or its Gang's entry), by name."""
        booked = Reservations(self.api.list(GANGS, namespace=namespace))
        return {name: node for name, pod in self.pods(namespace).items() if (node := booked.node_for(pod))}


def node(name: str, gpus: int = 8) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(gpus), "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pytorchjob(emulation: Emulation, name: str, workers: int) -> tuple[dict, str]:
    """A PyTorchJob of a master and `workers` workers, and the group label its pods get."""
    job = emulation.api.create("pytorchjobs", {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": workers}}}}, namespace=NS)
    return job, to_label_value(f"{name}-{job['metadata']['uid']}")


def member(emulation: Emulation, job: dict, index: int, gpus: int = 8, namespace: str = NS) -> dict:
    """A pod as the training operator creates it; the webhook labels and gates it."""
    name = job["metadata"]["name"]
    return emulation.api.create("pods", builders.pod(
        f"{name}-{index}", namespace=namespace, labels={names.KUBEFLOW_JOB_NAME_LABEL: name},
        owners=[builders.owner("PyTorchJob", name, job["metadata"]["uid"], "kubeflow.org/v1")],
        containers=[builders.container("c", image="busybox", gpus=gpus)]))


def eventually(condition, timeout: float = 15.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what} not met within {timeout:g}s")


def released(pod: dict) -> bool:
    return not any(g.get("name") == names.SCHEDULING_GATE for g in pod["spec"].get("schedulingGates") or ())


def pinned_node(pod: dict) -> str:
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return terms["nodeSelectorTerms"][0]["matchFields"][0]["values"][0]


def invariants(emulation: Emulation, min_count: int | Callable[[str], int]) -> Watch:
    """`sim.invariants` watching the emulation, a group's size being `min_count` (a number, or a
    function of the group label), with the bind timeout and resync period of `Emulation.controller`'s
    controllers."""
    size = min_count if callable(min_count) else (lambda group: min_count)
    checker = Checker(bind_timeout=Settings().bind_timeout_seconds, reaction=RESYNC_SECONDS,
                      size_of=lambda pod: size((pod["metadata"].get("labels") or {}).get(names.GROUP_LABEL, "")))
    return Watch(emulation.api, checker)
