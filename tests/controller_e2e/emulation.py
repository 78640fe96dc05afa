"""The emulated cluster the controller's end-to-end tests run against, and what they check on it.

`Emulation` is the emulated API server with gangkeeper's real webhook registered from
`deploy/base` (its Flask app answers in process: same policy, same configuration, no TLS), an
enforced namespace, HTTP front ends (one per controller replica, so that one replica can be cut
off) and controllers talking to them with the real `kubernetes` client as the controller's
service account, under deploy/'s RBAC (closing fails if it refused anything). `Invariants`
subscribes to the API server and checks, on every committed change, that no member is released
(let alone holds a GPU) before its whole group's capacity is reserved, and that no node is ever
promised more than it has.
"""

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from demo.stack import WebhookApp, check_granted, serve
from gangkeeper import names
from gangkeeper.audit import AuditLog
from gangkeeper.controller.kube import load
from gangkeeper.controller.metrics import Metrics
from gangkeeper.controller.reconciler import Settings
from gangkeeper.controller.runner import Controller
from gangkeeper.identity import to_label_value
from gangkeeper.resources import accelerators, pod_requests
from sim.api import WatchEvent
from sim.apiserver import APIServer
from sim.deployed import install_webhook_configurations
from sim.rbac import deployed_rbac
from sim.server import RunningServer

NS = "team"
WEBHOOK_SERVICE = f"{names.WEBHOOK_SERVICE}.{names.DEFAULT_NAMESPACE}.svc:443"
PLURALS = {"MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
           "ValidatingWebhookConfiguration": "validatingwebhookconfigurations"}


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
        options = {"resync_seconds": 0.5, "debounce_seconds": 0.02, **options}
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
    return emulation.api.create("pods", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{name}-{index}", "labels": {names.KUBEFLOW_JOB_NAME_LABEL: name},
                     "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": name,
                                          "uid": job["metadata"]["uid"], "controller": True}]},
        "spec": {"containers": [{"name": "c", "image": "busybox",
                                 "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}, namespace=namespace)


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


class Invariants:
    """Checks, on every committed pod change, the two promises gangkeeper makes (module docstring).

    No member of a group is released, let alone holds GPUs, before `min_count` of its members
    (a number, or a function of the group label) hold a reservation (members are released one
    patch at a time, so the whole group's capacity must be booked first); a node's bound and
    reserved GPUs never exceed its allocatable.
    Violations are collected, not raised, so that the API server's delivery goes on and the test
    reports them all.
    """

    def __init__(self, api: APIServer, min_count: int | Callable[[str], int]):
        self.min_count = min_count if callable(min_count) else (lambda group: min_count)
        self.pods: dict[str, tuple] = {}  # key → (group, GPUs, node, reserved node, released, terminal)
        self.allocatable = {n["metadata"]["name"]: int(n["status"]["allocatable"].get("nvidia.com/gpu", 0))
                            for n in api.list("nodes")}
        self.violations: list[str] = []
        self.events = 0
        self.held_during: dict[str, list[int]] = {}  # group → [first, last] event number it held GPUs at
        self._unsubscribe = api.subscribe(self._observe)

    def close(self) -> None:
        self._unsubscribe()

    def _observe(self, event: WatchEvent) -> None:
        if event.resource != "pods":
            return
        metadata = event.object["metadata"]
        key = f"{metadata.get('namespace')}/{metadata['name']}"
        if event.type == "DELETED":
            self.pods.pop(key, None)
        else:
            self.pods[key] = _summary(event.object)
        self.events += 1
        self._check()

    def _check(self) -> None:
        held: Counter = Counter()
        promised: Counter = Counter()
        booked: Counter = Counter()
        released_groups: set[str] = set()
        for group, gpus, node_name, reserved, is_released, terminal in self.pods.values():
            if group and reserved:
                booked[group] += 1
            if group and is_released and not terminal:
                released_groups.add(group)
            if node_name and not terminal:
                held[node_name] += gpus
                if group and gpus:
                    self.held_during.setdefault(group, [self.events, self.events])[1] = self.events
            elif reserved and not terminal:
                promised[reserved] += gpus
        for group in released_groups:
            if booked[group] < self.min_count(group):
                self.violations.append(f"event {self.events}: {group} has members released or holding GPUs "
                                       f"with only {booked[group]} of {self.min_count(group)} reserved")
        for node_name, allocatable in self.allocatable.items():
            if held[node_name] + promised[node_name] > allocatable:
                self.violations.append(f"event {self.events}: {node_name} has {held[node_name]} GPUs bound and "
                                       f"{promised[node_name]} reserved of {allocatable}")


def _summary(pod: dict) -> tuple:
    metadata = pod["metadata"]
    return ((metadata.get("labels") or {}).get(names.GROUP_LABEL),
            int(sum(accelerators(pod_requests(pod)).values())),
            pod["spec"].get("nodeName"),
            (metadata.get("annotations") or {}).get(names.RESERVED_NODE_ANNOTATION),
            released(pod),
            (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"))
