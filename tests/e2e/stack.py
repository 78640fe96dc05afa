"""The whole gangkeeper stack, as the end-to-end tests run it, and what they check on it.

`Webhook` is the real `gangkeeper webhook` (gunicorn over TLS, certificates from `certs.issue`),
stopped and started again on the same port when a test needs it down. `Stack` is one emulated
cluster with gangkeeper installed as `deploy/default` installs it (`demo.stack`): the API server
calls the webhook through the rendered webhook configurations (caBundle, namespaceSelector,
failurePolicy Fail) and is served over HTTP to the real `gangkeeper controller` process, which
talks to it as the controller's service account; the emulated kube-scheduler, kubelets and
operators run on a thread in real time.

`Invariants` subscribes to the API server and checks gangkeeper's promises on every change it
commits (see its docstring). Waiting is driven by the API server's changes: a condition is looked
at again after each change, until it holds or the deadline (a limit for waiting, never a
measurement) passes.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from demo.processes import ControllerProcess, WebhookProcess, issue_loopback_certs
from demo.stack import api_with_webhook, check_granted, rendered_webhook_configurations, serve
from gangkeeper import names
from gangkeeper.quantity import parse_quantity
from gangkeeper.resources import accelerators, pod_requests
from sim.api import WatchEvent
from sim.apiserver import APIServer
from sim.clock import RealClock
from sim.cluster import ThreadRunner, emulated_cluster

# A fixed leader-election identity: the controller started again after a SIGKILL is the Lease's
# holder already and leads at once, instead of waiting out the 15 s the dead holder's Lease lasts.
CONTROLLER_IDENTITY = "e2e-controller"
START_DELAY = 0.2  # seconds from binding to a running container, in the emulated kubelet
WAIT = 30.0  # the longest any condition is waited for

T = TypeVar("T")


class Webhook:
    """`gangkeeper webhook` on a loopback port that stays the same across restarts."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.certs = issue_loopback_certs(workdir / "webhook-tls")
        self.configurations = rendered_webhook_configurations(self.certs.ca_pem)
        self.port: int | None = None
        self.starts = 0
        self.process: WebhookProcess | None = None
        self.start()

    @property
    def address(self) -> str:
        return self.process.address

    def start(self) -> None:
        self.starts += 1
        logs = self.workdir / f"webhook-{self.starts}"
        logs.mkdir()
        self.process = WebhookProcess(self.certs, logs, port=self.port)
        self.port = self.process.port
        self.process.wait_ready()

    def stop(self) -> None:
        self.process.stop()


class Stack:
    """One emulated cluster with gangkeeper installed and both processes running (module docstring)."""

    def __init__(self, webhook: Webhook, workdir: Path, **api_options):
        self.webhook, self.workdir = webhook, workdir
        self.api: APIServer = api_with_webhook(webhook.address, webhook.certs.ca_pem,
                                               configurations=webhook.configurations, **api_options)
        self.invariants = Invariants(self.api)
        self._changes = threading.Condition()
        self._change_count = 0
        self._unsubscribe = self.api.subscribe(self._changed)
        self.served = serve(self.api, workdir)
        self.controller_starts = 0
        self.controller: ControllerProcess | None = None
        self.controller_killed = False
        self.start_controller()
        self.cluster = emulated_cluster(self.api, RealClock(), start_delay=START_DELAY)
        self.runner = ThreadRunner(self.cluster, idle_wait=0.2).start()

    def close(self) -> None:
        self.controller.stop()
        self.runner.stop()
        self.cluster.close()
        self.served.stop()
        self._unsubscribe()
        self.invariants.close()
        check_granted([self.served.server])

    # --- the controller process --------------------------------------------------------------

    def start_controller(self) -> None:
        self.controller_starts += 1
        logs = self.workdir / f"controller-{self.controller_starts}"
        logs.mkdir()
        self.controller = ControllerProcess(self.served.controller_kubeconfig, logs, namespace=None,
                                            identity=CONTROLLER_IDENTITY)
        self.controller.wait_ready()
        self.controller_killed = False

    def kill_controller(self) -> None:
        """SIGKILL: no clean shutdown, the Lease is not handed back. Safe to call from a watch callback."""
        self.controller_killed = True
        os.kill(self.controller.popen.pid, signal.SIGKILL)

    # --- waiting on the cluster --------------------------------------------------------------

    def _changed(self, event: WatchEvent) -> None:
        with self._changes:
            self._change_count += 1
            self._changes.notify_all()

    def check_running(self) -> None:
        """Fail at once, with the log's tail, when a part of the stack died by itself, or when the
        controller was refused a request that deploy/'s RBAC does not grant."""
        check_granted([self.served.server])
        if not self.runner.thread.is_alive():
            raise AssertionError("the emulated cluster's thread died (see the test's captured stderr)")
        if not self.controller_killed:
            self.controller.check_running()

    def wait_until(self, condition: Callable[[], T], what: str, timeout: float = WAIT) -> T:
        """`condition()`'s first truthy value, looked at again after every change the API server commits."""
        deadline = time.monotonic() + timeout
        while True:
            with self._changes:
                seen = self._change_count
            value = condition()
            if value:
                return value
            self.check_running()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"not within {timeout:g} s: {what}")
            self._wait_for_change_after(seen, min(remaining, 1.0))

    def _wait_for_change_after(self, seen: int, timeout: float) -> None:
        with self._changes:
            self._changes.wait_for(lambda: self._change_count != seen, timeout)


# --- gangkeeper's promises, checked on every change ----------------------------------------------

@dataclass(frozen=True)
class PodState:
    """What the invariants need of a pod."""

    namespace: str
    name: str
    uid: str
    group: str | None
    gpus: int
    node: str | None
    reserved: str | None
    gated: bool
    terminal: bool

    @property
    def placed(self) -> bool:
        """Bound, or holding a reservation."""
        return bool(self.node or self.reserved)


def pod_state(pod: dict) -> PodState:
    metadata, spec = pod["metadata"], pod["spec"]
    return PodState(
        metadata.get("namespace", ""), metadata["name"], metadata.get("uid", ""),
        (metadata.get("labels") or {}).get(names.GROUP_LABEL),
        int(sum(accelerators(pod_requests(pod)).values())),
        spec.get("nodeName"),
        (metadata.get("annotations") or {}).get(names.RESERVED_NODE_ANNOTATION),
        is_gated(pod),
        (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"))


def is_gated(pod: dict) -> bool:
    return any(gate.get("name") == names.SCHEDULING_GATE for gate in pod["spec"].get("schedulingGates") or ())


class Invariants:
    """Checks, on every pod and node change the API server commits:

    - no member of a group is bound while another (live) member has neither a node nor a
      reservation: a group is bound only after all of it was reserved;
    - no node ever has more GPUs bound and reserved (not yet bound) than it has allocatable:
      nothing is reserved twice;
    - a member is bound to the node it was reserved on.

    It also keeps, for the tests to assert on: every pod as the API server stored it at creation
    (after admission), every node each pod was ever reserved on, and for every group how many of
    its members were placed (bound or reserved) when its first member was bound.
    Violations are collected (never raised inside the API server's delivery), by namespace.
    """

    def __init__(self, api: APIServer):
        self.pods: dict[str, PodState] = {}
        self.allocatable: dict[str, int] = {}
        self.created: dict[str, dict] = {}
        self.reservations: dict[str, list[str]] = {}  # pod uid → nodes, in the order it was reserved on them
        self.first_bound: dict[tuple[str, str], tuple[int, int]] = {}  # group → (members placed, members)
        self._violations: list[tuple[frozenset[str], str]] = []
        self.events = 0
        self._unsubscribe = api.subscribe(self._observe)

    def close(self) -> None:
        self._unsubscribe()

    def violations(self, namespace: str) -> list[str]:
        """What broke in `namespace`, and any failure of the checks themselves (which could hide a break)."""
        return [message for namespaces, message in self._violations if namespace in namespaces or not namespaces]

    def created_in(self, namespace: str) -> dict[str, dict]:
        """Every pod created in `namespace`, by name, as stored at creation."""
        return {key.split("/", 1)[1]: pod for key, pod in self.created.items() if key.startswith(f"{namespace}/")}

    def _observe(self, event: WatchEvent) -> None:
        try:
            self._check(event)
        except Exception as error:  # noqa: BLE001 - reported to every test by violations()
            self._violate(set(), f"the invariants could not check {event.type} {event.resource}: {error!r}")

    def _check(self, event: WatchEvent) -> None:
        if event.resource == "nodes":
            name = event.object["metadata"]["name"]
            if event.type == "DELETED":
                self.allocatable.pop(name, None)
            else:
                allocatable = (event.object.get("status") or {}).get("allocatable") or {}
                self.allocatable[name] = int(sum(parse_quantity(v) for v in accelerators(allocatable).values()))
            return
        if event.resource != "pods":
            return
        self.events += 1
        key = f"{event.object['metadata'].get('namespace')}/{event.object['metadata']['name']}"
        old = self.pods.pop(key, None)
        if event.type == "DELETED":
            return
        new = self.pods[key] = pod_state(event.object)
        if event.type == "ADDED":
            self.created[key] = event.object
        if new.reserved and self.reservations.get(new.uid, [None])[-1] != new.reserved:
            self.reservations.setdefault(new.uid, []).append(new.reserved)
        if new.node and new.reserved and new.node != new.reserved:
            self._violate({new.namespace}, f"{key} was reserved on {new.reserved} but bound to {new.node}")
        if new.group:
            self._check_group(new, old)
        self._check_nodes({n for state in (old, new) if state for n in (state.node, state.reserved) if n})

    def _check_group(self, new: PodState, old: PodState | None) -> None:
        members = [p for p in self.pods.values()
                   if p.namespace == new.namespace and p.group == new.group and not p.terminal]
        bound = [p.name for p in members if p.node]
        unplaced = [p.name for p in members if not p.placed]
        if bound and unplaced:
            self._violate({new.namespace}, f"event {self.events}: group {new.namespace}/{new.group} has {bound} bound "
                                           f"while {unplaced} have neither a node nor a reservation")
        group = (new.namespace, new.group)
        if new.node and not (old and old.node) and group not in self.first_bound:
            self.first_bound[group] = (sum(p.placed for p in members), len(members))

    def _check_nodes(self, nodes: set[str]) -> None:
        for node in nodes:
            on_node = [p for p in self.pods.values() if not p.terminal and (p.node or p.reserved) == node]
            taken = sum(p.gpus for p in on_node)
            if taken > self.allocatable.get(node, 0):
                self._violate({p.namespace for p in on_node},
                              f"event {self.events}: node {node} has {taken} GPUs bound or reserved of "
                              f"{self.allocatable.get(node, 0)}: {sorted(p.name for p in on_node)}")

    def _violate(self, namespaces: set[str], message: str) -> None:
        self._violations.append((frozenset(namespaces), message))
