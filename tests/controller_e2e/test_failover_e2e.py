"""Two controller replicas with leader election on the emulated API server, over HTTP.

The leader is cut off from the API (its front end answers every request 500, as in a partition;
its open watches keep flowing); the follower, its cache warm and watching the Lease, takes over
once the Lease expires (how soon is measured by `gangkeeper bench reliability`, and the timing is
tested on a fake clock in test_leader.py). Then the cut-off replica is healed, the new leader
stops cleanly and hands the lease back at once. The replicas' leadership terms never overlap,
and neither writes an audit line (every decision has one) but between a yes and the next no of
its own `is_leader`.
"""

import math
import threading
import time
from datetime import datetime

import pytest

from gangkeeper import names
from gangkeeper.audit import AuditLog
from gangkeeper.controller.deciding.settings import Settings
from gangkeeper.controller.leader import LeaderElector
from gangkeeper.controller.metrics import Metrics
from gangkeeper.controller.reading.kube import load
from gangkeeper.controller.runner import Controller
from tests.controller_e2e.emulation import NS, Emulation, Lines, eventually, member, node, pytorchjob, released

pytestmark = pytest.mark.e2e

LEASE_SECONDS, RENEW_DEADLINE, RETRY_PERIOD = 2, 1.5, 0.3


class Replica:
    """A controller, its leader elector and its own HTTP front end on the shared API server."""

    def __init__(self, emulation: Emulation, name: str):
        path, self.server = emulation.kubeconfig()
        kube = load(str(path))
        self.name, self.audit, self.terms, self.views = name, Lines(), [], []
        self._terms_lock = threading.Lock()
        self.controller = Controller(kube, Settings(), AuditLog("controller", self.audit), Metrics(),
                                     resync_seconds=0.3, debounce_seconds=0.02)
        self.elector = LeaderElector(kube, names.DEFAULT_NAMESPACE, names.CONTROLLER_LEASE, name,
                                     on_started_leading=self._started, on_stopped_leading=self._stopped,
                                     lease_duration=LEASE_SECONDS, renew_deadline=RENEW_DEADLINE,
                                     retry_period=RETRY_PERIOD)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self.controller.run, args=(self._stop, self._leading), daemon=True)

    def _leading(self) -> bool:
        """`is_leader`, as the controller asks it before it records or writes anything. The answers
        make the replica's views: each from its first yes to its first no, both taken on the
        controller's own thread, so an audit line written after a yes and before the next no is
        in a view whatever the elector's thread does meanwhile. A term starts at the first yes too
        (the elector calls `on_started_leading` only after `is_leader` turns true)."""
        moment = time.time()
        leader = self.elector.is_leader
        with self._terms_lock:
            open_view = bool(self.views) and self.views[-1][1] is None
            if leader and not open_view:
                self.views.append([moment, None])
            elif not leader and open_view:
                self.views[-1][1] = time.time()
        if leader:
            self._open_term(moment)
        return leader

    def _open_term(self, moment: float) -> None:
        with self._terms_lock:
            if not self.terms or self.terms[-1][1] is not None:
                self.terms.append([moment, None])

    def _started(self) -> None:
        self._open_term(time.time())
        self.controller.wake()

    def _stopped(self) -> None:
        with self._terms_lock:
            self.terms[-1][1] = time.time()

    def start(self) -> "Replica":
        self.controller.start()
        self.elector.start()
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.elector.stop()
        self.controller.stop()

    def decided(self, group: str) -> bool:
        return any(line["group"] == group and line["event"] == "gang.released" for line in self.audit.lines)

    def acted_only_while_leading(self) -> bool:
        def leading(moment: float) -> bool:  # audit lines say the time in milliseconds, cut short
            return any(math.floor(start * 1000) / 1000 <= moment and (stop is None or moment <= stop)
                       for start, stop in self.views)
        return all(leading(datetime.fromisoformat(line["ts"]).timestamp()) for line in self.audit.lines)


@pytest.fixture()
def emulation(tmp_path):
    emulation = Emulation(tmp_path)
    for i in range(4):
        emulation.api.create("nodes", node(f"n{i}"))
    yield emulation
    emulation.close()


def released_job(emulation: Emulation, name: str, *replicas: Replica) -> str:
    """Submit a one-pod job; return its group once it is released and the release audited."""
    job, group = pytorchjob(emulation, name, 0)
    member(emulation, job, 0)
    eventually(lambda: released(emulation.pods()[f"{name}-0"]) and any(r.decided(group) for r in replicas),
               what=f"{name} released")
    return group


def test_the_follower_takes_over_and_two_leaders_never_act_at_once(emulation):
    a = Replica(emulation, "replica-a").start()
    eventually(lambda: a.elector.is_leader, what="a leads")
    b = Replica(emulation, "replica-b").start()
    try:
        first = released_job(emulation, "first", a, b)
        assert a.decided(first) and not b.audit.lines

        a.server.faults.error_rate = 1.0  # a is cut off from the API
        second = released_job(emulation, "second", a, b)
        assert b.decided(second) and not a.decided(second)
        assert a.terms[0][1] is not None and a.terms[0][1] <= b.terms[0][0], "a stepped down before b took over"

        a.server.faults.error_rate = 0.0
        b.close()  # a clean stop releases the lease: a takes over at once
        third = released_job(emulation, "third", a, b)
        assert a.decided(third) and len(a.terms) == 2
        assert b.terms[0][1] is not None and b.terms[0][1] <= a.terms[1][0]
        assert a.acted_only_while_leading() and b.acted_only_while_leading()
        assert {p["metadata"]["name"] for p in emulation.pods().values() if released(p)} == {
            "first-0", "second-0", "third-0"}
        assert not [p for p in emulation.api.list("pods", namespace=NS) if not released(p)]
    finally:
        a.close()
        b.close()
