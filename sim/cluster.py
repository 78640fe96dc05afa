"""The emulated cluster's control loop: components wired to a ClusterAPI, on either clock.

Every component (scheduler, kubelet, operators, the disruption controller, accounting, a
workload submitter, the cluster-autoscaler of a cluster with node groups, and any extra one such
as the gangkeeper controller) has the same three
methods: `observe(event, now)` takes one watch event into the component's own cache, `step(now)`
does its due work through the API and says whether it wrote anything, `next_due()` says when it
next has timed work.

Watch callbacks only append to a queue; events are handed to the components by the loop, on
the loop's thread, between steps. So components never run concurrently with themselves nor
re-entrantly inside their own API calls, and need no locks, in either mode.

Shared by both modes: `Cluster.settle` (deliver events, step every component, repeat until
nothing is written and no event is waiting) and all component code. Only time differs:
- virtual (`run_until`, `run_until_idle`): the loop jumps a `VirtualClock` to the next moment
  a component is due and settles there — a long replay takes as long as its events, not its
  duration;
- real time (`ThreadRunner`): a thread settles, then sleeps until the next due moment or until
  a watch event arrives, whichever is first.
"""

import logging
import threading
from collections import deque
from typing import Iterable, Protocol

from sim.accounting import Accounting
from sim.api import ADMIN, APIError, ClusterAPI, User, WatchEvent
from sim.apiserver import APIServer
from sim.autoscaler import Autoscaler, AutoscalerSettings
from sim.claims import ClaimController
from sim.clock import Clock, VirtualClock
from sim.disruption import DisruptionController
from sim.kubelet import DEFAULT_START_DELAY, Kubelet
from sim.names import NODES
from sim.operators import lws
from sim.operators.job import job_operator
from sim.operators.jobset import jobset_operator
from sim.operators.mpijob import mpijob_operator
from sim.operators.pytorchjob import pytorchjob_operator
from sim.operators.ray import raycluster_operator, rayjob_operator
from sim.operators.statefulset import statefulset_operator
from sim.operators.trainjob import trainjob_operator
from sim.placement import Scoring
from sim.priority import PRIORITY_CLASSES
from sim.scheduler import Scheduler
from sim.spec import (
    Submission,
    device_manifests,
    node_groups,
    node_manifests,
    priority_class_manifests,
    submissions,
)

log = logging.getLogger("gangkeeper.sim.cluster")

MAX_ROUNDS = 10_000


class Component(Protocol):
    resources: tuple[str, ...]

    def observe(self, event: WatchEvent, now: float) -> None: ...

    def step(self, now: float) -> bool: ...

    def next_due(self) -> float | None: ...


class Submitter:
    """Creates workloads when their submit time comes (times are seconds after `start`)."""

    resources: tuple[str, ...] = ()

    def __init__(self, api: ClusterAPI, plan: Iterable[Submission], start: float, *, user: User = ADMIN):
        self.api = api
        self.user = user
        self.queue = deque(sorted(plan, key=lambda s: s.at))
        self.start = start
        self.refused: list[tuple[Submission, APIError]] = []

    def observe(self, event: WatchEvent, now: float) -> None:
        return None

    def step(self, now: float) -> bool:
        wrote = False
        while self.queue and self.start + self.queue[0].at <= now:
            submission = self.queue.popleft()
            try:
                self.api.create(submission.resource, submission.manifest,
                                namespace=submission.manifest["metadata"].get("namespace"), user=self.user)
                wrote = True
            except APIError as error:
                self.refused.append((submission, error))
        return wrote

    def next_due(self) -> float | None:
        return self.start + self.queue[0].at if self.queue else None


class Cluster:
    def __init__(self, api: ClusterAPI, clock: Clock, components: Iterable[Component]):
        self.api = api
        self.clock = clock
        self.components = list(components)
        self.routes: dict[str, list[Component]] = {}
        for component in self.components:
            for resource in component.resources:
                self.routes.setdefault(resource, []).append(component)
        self.events: deque[WatchEvent] = deque()
        self.woken = threading.Event()
        for resource in self.routes:  # objects that exist before the cluster starts watching
            self.events.extend(WatchEvent("ADDED", resource, obj) for obj in api.list(resource))
        self._unsubscribe = api.subscribe(self._enqueue)

    def component(self, kind: type):
        return next(c for c in self.components if isinstance(c, kind))

    def close(self) -> None:
        self._unsubscribe()

    def _enqueue(self, event: WatchEvent) -> None:
        if event.resource in self.routes:
            self.events.append(event)
            self.woken.set()

    def settle(self) -> None:
        """Deliver events and step every component until nothing more happens now."""
        for _ in range(MAX_ROUNDS):
            now = self.clock.now()
            while self.events:
                event = self.events.popleft()
                for component in self.routes[event.resource]:
                    component.observe(event, now)
            wrote = [component.step(now) for component in self.components]
            if not any(wrote) and not self.events:
                return
        raise RuntimeError(f"the cluster kept writing for {MAX_ROUNDS} rounds at one moment; a component loops")

    def next_due(self) -> float | None:
        return min((d for d in (c.next_due() for c in self.components) if d is not None), default=None)

    # --- virtual time -------------------------------------------------------------------------
    def run_until(self, moment: float) -> None:
        """Settle at every due moment up to `moment`, then at `moment` itself."""
        clock = self._virtual_clock()
        self.settle()
        while (due := self.next_due()) is not None and due <= moment:
            clock.advance_to(due)
            self.settle()
        clock.advance_to(moment)
        self.settle()

    def run_until_idle(self, limit: float) -> bool:
        """Run until no component has timed work left (True) or `limit` is reached (False)."""
        self.run_until(self.clock.now())
        while (due := self.next_due()) is not None:
            if due > limit:
                self.run_until(limit)
                return False
            self.run_until(due)
        return True

    def _virtual_clock(self) -> VirtualClock:
        if not isinstance(self.clock, VirtualClock):
            raise TypeError("run_until needs a VirtualClock; run a real-time cluster with ThreadRunner")
        return self.clock


def emulated_cluster(api: ClusterAPI, clock: Clock, *, spec: dict | None = None, scoring: Scoring = Scoring(),
                     start_delay: float = DEFAULT_START_DELAY, run_seconds: float | None = None,
                     autoscaling: AutoscalerSettings = AutoscalerSettings(),
                     extra: Iterable[Component] = ()) -> Cluster:
    """The default components on `api`; with a spec, its nodes (and their DeviceClasses and
    ResourceSlices) are registered first and its workloads are submitted on schedule, counted from now;
    with node groups in it, the cluster-autoscaler (`sim.autoscaler`, on `autoscaling`) runs them,
    each group's min nodes registered first.
    On an emulated API server, LWS's webhooks are installed with its controllers (`sim.operators.lws`).
    `run_seconds`: how long a pod that runs to completion runs when nothing else says (`sim.training`)."""
    if isinstance(api, APIServer):
        lws.install(api)
    components: list[Component] = [
        Scheduler(api, scoring=scoring), ClaimController(api),
        Kubelet(api, start_delay=start_delay, run_seconds=run_seconds),
        pytorchjob_operator(api), trainjob_operator(api), jobset_operator(api), job_operator(api),
        statefulset_operator(api), lws.lws_controller(api), rayjob_operator(api), raycluster_operator(api),
        mpijob_operator(api), DisruptionController(api), Accounting(), *extra,
    ]
    if spec is not None:
        for node in node_manifests(spec):
            api.create(NODES, node, user=ADMIN)
        for priority_class in priority_class_manifests(spec):
            api.create(PRIORITY_CLASSES, priority_class, user=ADMIN)
        for resource, manifest in device_manifests(spec):
            api.create(resource, manifest, user=ADMIN)
        groups = node_groups(spec)
        for group in groups:
            for index in range(group.min_size):
                api.create(NODES, group.node(f"{group.name}-{index}"), user=ADMIN)
        if groups:
            components.append(Autoscaler(api, groups, autoscaling))
        components.append(Submitter(api, submissions(spec), clock.now()))
    return Cluster(api, clock, components)


class ThreadRunner:
    """Runs a cluster in real time on a background thread: it settles, then sleeps until the next
    due moment or an event. `speed` is how many cluster seconds pass per wall second (the clock's
    own pace, e.g. a demo's scaled clock; 1 for a RealClock). A component that raises stops the
    loop: the error is logged and `check()` raises it in the caller."""

    def __init__(self, cluster: Cluster, *, idle_wait: float = 1.0, speed: float = 1.0):
        self.cluster = cluster
        self.idle_wait = idle_wait
        self.speed = speed
        self.error: Exception | None = None
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="sim-cluster", daemon=True)

    def start(self) -> "ThreadRunner":
        self.thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self.stopped.set()
        self.cluster.woken.set()
        self.thread.join(timeout)

    def check(self) -> None:
        if self.error is not None:
            raise RuntimeError(f"the emulated cluster stopped: {self.error!r}") from self.error

    def _loop(self) -> None:
        try:
            while not self.stopped.is_set():
                self.cluster.woken.clear()
                self.cluster.settle()
                due = self.cluster.next_due()
                wait = self.idle_wait if due is None else max(0.0, (due - self.cluster.clock.now()) / self.speed)
                self.cluster.woken.wait(min(wait, self.idle_wait))
        except Exception as error:  # noqa: BLE001 - reported by check() and the log, not lost with the thread
            log.exception("the emulated cluster stopped")
            self.error = error
