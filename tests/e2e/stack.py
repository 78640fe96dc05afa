"""The whole gangkeeper stack, as the end-to-end tests run it, and what they check on it.

`Webhook` is the real `gangkeeper webhook` (gunicorn over TLS, certificates from `certs.issue`),
stopped and started again on the same port when a test needs it down. `Stack` is one emulated
cluster with gangkeeper installed as `deploy/default` installs it (`demo.stack`): the API server
calls the webhook through the rendered webhook configurations (caBundle, namespaceSelector,
failurePolicy Fail) and is served over HTTP to the real `gangkeeper controller` process, which
talks to it as the controller's service account; the emulated kube-scheduler, kubelets and
operators run on a thread in real time.

`Stack.invariants` (`sim.invariants.Watch`) checks gangkeeper's promises on every change the API
server commits; the stack also keeps, for the tests to assert on, every pod as the API server stored
it at creation (after admission) and every node each pod was ever reserved on. Waiting is driven by
the API server's changes: a condition is looked at again after each change, until it holds or the
deadline (a limit for waiting, never a measurement) passes.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from demo.processes import ControllerProcess, WebhookProcess, issue_loopback_certs
from demo.stack import api_with_webhook, check_granted, rendered_webhook_configurations, serve
from gangkeeper import names
from gangkeeper.controller.deciding.settings import Settings
from sim.api import WatchEvent
from sim.apiserver import APIServer
from sim.clock import RealClock
from sim.cluster import ThreadRunner, emulated_cluster
from sim.invariants import Checker, Watch
from sim.reservations import GANGS, Reservations, own_reservation

# A fixed leader-election identity: the controller started again after a SIGKILL is the Lease's
# holder already and leads at once, instead of waiting out the 15 s the dead holder's Lease lasts.
CONTROLLER_IDENTITY = "e2e-controller"
START_DELAY = 0.2  # seconds from binding to a running container, in the emulated kubelet
WAIT = 30.0  # the longest any condition is waited for
# The controller process runs with its defaults: this bind timeout, and a pass at least this often.
BIND_TIMEOUT, RESYNC = Settings().bind_timeout_seconds, 30.0

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
        self.invariants = Watch(self.api, Checker(bind_timeout=BIND_TIMEOUT, reaction=RESYNC))
        self.created: dict[str, dict] = {}  # namespace/name → the pod as stored at creation
        self.reservations: dict[str, list[str]] = {}  # pod uid → nodes, in the order it was reserved on them
        self.booked = Reservations()  # the Gangs' reservations as they stand
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
        self.invariants.controller_up()

    def kill_controller(self) -> None:
        """SIGKILL: no clean shutdown, the Lease is not handed back. Safe to call from a watch callback."""
        self.controller_killed = True
        os.kill(self.controller.popen.pid, signal.SIGKILL)
        self.invariants.controller_down()

    # --- what the cluster did ------------------------------------------------------------------

    def created_in(self, namespace: str) -> dict[str, dict]:
        """Every pod created in `namespace`, by name, as stored at creation."""
        return {key.split("/", 1)[1]: pod for key, pod in self.created.items() if key.startswith(f"{namespace}/")}

    def _record(self, event: WatchEvent) -> None:
        if event.resource == GANGS:
            for entry in self.booked.observe(event.type, event.object).values():
                if entry is not None:
                    self._reserved(*entry)
        if event.resource != "pods" or event.type == "DELETED":
            return
        metadata = event.object["metadata"]
        if event.type == "ADDED":
            self.created[f"{metadata.get('namespace')}/{metadata['name']}"] = event.object
        self._reserved(metadata.get("uid", ""), own_reservation(event.object))

    def _reserved(self, uid: str, node: str) -> None:
        if node and self.reservations.get(uid, [None])[-1] != node:
            self.reservations.setdefault(uid, []).append(node)

    # --- waiting on the cluster --------------------------------------------------------------

    def _changed(self, event: WatchEvent) -> None:
        self._record(event)
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


def is_gated(pod: dict) -> bool:
    return any(gate.get("name") == names.SCHEDULING_GATE for gate in pod["spec"].get("schedulingGates") or ())
