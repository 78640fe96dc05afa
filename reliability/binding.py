"""Complete → bound (issue 15, "Speed"): how long after a group is complete every member is bound,
with gangkeeper and without, on one live cluster emulation.

Two sides, the same pods on the same cluster in one run:
- gangkeeper: the pods in the enforced namespace (`stack.NAMESPACE`): the real webhook (gunicorn,
  two workers, over TLS) gates them, the real controller process (over HTTP, deploy/'s RBAC)
  reserves and releases them, the emulated scheduler binds them;
- bare: the pods in a namespace without the enforce label: the webhook's namespaceSelector skips
  them and the emulated scheduler binds each as it comes.
A group is plain pods in an explicit group (label and min count, docs/how-it-works.md, "How group
identity is derived", rule 1), created one after the other by this process through the API server, as a job's
operator creates them: not a Job, whose controller would create the pods itself, so that the moment
its last member is created would not be ours to stamp. Timed, per group: from the moment the create
call of its last member returned (the group is complete) to the moment the last member's binding
(`spec.nodeName` set) is committed, as a watch callback on the API server's commits sees it (no
poll); 0 when that binding came before the last create returned. The same callback stamps, on the
gangkeeper side, the first and the last member's reservation and the last gate removal, which
splits the time into the controller's reaction (its watch, its pass), its writes and the
scheduler's binding.

One group at a time: a group's pods are deleted (grace period 0) and gone, and on the gangkeeper
side its Gang deleted by the controller (the controller has seen the group go), before the next
group is created, after a pause of `Binding.pause` seconds for the processes to settle. Sizes run
in turn; within a size, groups go in pairs, one of each side, the side that goes first in each pair
drawn from `Binding.seed`, so that the machine's noise and whatever follows a deletion hit both
sides alike. The first `Binding.warmup` pairs of each size warm up and are not counted. The
kubelets do not start the pods while they are measured (start delay `Binding.start_delay`): what
competes with binding is the creation (with its webhook calls) and the controller alone.

Beside it, the controller's own `gangkeeper_group_complete_to_bound_seconds` (its /metrics): read
before each gangkeeper group is created and, once the group is bound, until a pass of the
controller has seen it bound and observed it (only then is the group deleted); the change of its
sum is the controller's figure for that group, from the pass that found the group complete to the
pass that found it bound.
"""

from __future__ import annotations

import http.client
import math
import os
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families

from demo.processes import LOOPBACK
from gangkeeper import names
from reliability.stack import NAMESPACE, ControllerProcess, Stack, gated, member, percentile, wait_for
from sim import spec as sim_spec
from sim.api import WatchEvent
from sim.reservations import GANGS

GANGKEEPER, BARE = "gangkeeper", "bare"
SIDES = (GANGKEEPER, BARE)
BARE_NAMESPACE = "bare-training"
METRIC = "gangkeeper_group_complete_to_bound_seconds"
# The goals (issue 27): gangkeeper's p99 at most this much above the bare scheduler's, by group size.
GOAL_MS = {16: 30.0, 256: 200.0}


@dataclass(frozen=True)
class Binding:
    sizes: tuple[int, ...] = (16, 256)
    groups: int = 20  # measured per size and side
    warmup: int = 1  # pairs per size not counted
    gpus_per_pod: int = 2
    nodes: int = 80
    gpus_per_node: int = 8
    seed: int = 20261201
    pause: float = 0.5
    group_timeout: float = 120.0
    start_delay: float = 3600.0
    bind_timeout: int = 120


@dataclass
class Group:
    size: int
    side: str
    name: str
    create_ms: float  # first create call → last create returned
    gated: int  # members stored with gangkeeper's gate
    bound: int  # members bound
    bound_ms: float | None  # complete → last member bound (None: not all bound in time)
    first_reserved_ms: float | None = None  # complete → first reservation committed (gangkeeper)
    reserved_ms: float | None = None  # complete → last reservation committed (gangkeeper)
    released_ms: float | None = None  # complete → last gate removed (gangkeeper)
    controller_ms: float | None = None  # the controller's own complete → bound observation (gangkeeper)


@dataclass
class Result:
    spec: Binding
    groups: list[Group] = field(default_factory=list)
    warmups: list[Group] = field(default_factory=list)
    seconds: float = 0.0
    load_average: tuple[float, float, float] | None = None  # at the end of the run


class Timeline:
    """When each member of the group under way was reserved, released and bound, from the API's commits."""

    def __init__(self):
        self.lock = threading.Lock()
        self.key: tuple[str, str] | None = None
        self.size = 0
        self.reserved: dict[str, float] = {}
        self.released: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.all_bound = threading.Event()

    def _gang(self, gang: dict, now: float) -> None:
        """Members reserved in one write, on their Gang (`status.reservations`)."""
        with self.lock:
            if (gang["metadata"].get("namespace"), (gang.get("spec") or {}).get("groupName")) != self.key:
                return
            for name in (gang.get("status") or {}).get("reservations") or {}:
                self.reserved.setdefault(name, now)

    def expect(self, namespace: str, group: str, size: int) -> None:
        with self.lock:
            self.key, self.size = (namespace, group), size
            self.reserved, self.released, self.bound = {}, {}, {}
            self.all_bound.clear()

    def __call__(self, event: WatchEvent) -> None:
        if event.resource == GANGS and event.type != "DELETED":
            self._gang(event.object, time.monotonic())
        if event.resource != "pods" or event.type == "DELETED":
            return
        now = time.monotonic()
        pod, meta = event.object, event.object["metadata"]
        with self.lock:
            if (meta.get("namespace"), (meta.get("labels") or {}).get(names.GROUP_LABEL)) != self.key:
                return
            name = meta["name"]
            if names.RESERVED_NODE_ANNOTATION in (meta.get("annotations") or {}):
                self.reserved.setdefault(name, now)
            if event.type == "MODIFIED" and not gated(pod) and meta["namespace"] == NAMESPACE:
                self.released.setdefault(name, now)
            if pod["spec"].get("nodeName"):
                self.bound.setdefault(name, now)
                if len(self.bound) == self.size:
                    self.all_bound.set()


def controller_metric(controller: ControllerProcess) -> dict[str, float]:
    """The count and sum of the controller's complete → bound histogram, from its /metrics."""
    connection = http.client.HTTPConnection(LOOPBACK, controller.metrics_port, timeout=5)
    try:
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
    finally:
        connection.close()
    found = {"count": 0.0, "sum": 0.0}
    for family in text_string_to_metric_families(text):
        if family.name == METRIC:
            for sample in family.samples:
                if sample.name in (f"{METRIC}_count", f"{METRIC}_sum"):
                    found[sample.name.rsplit("_", 1)[1]] = sample.value
    return found


def _controller_observed(controller: ControllerProcess, before: dict[str, float], timeout: float,
                         name: str) -> float:
    """Milliseconds the controller's histogram gained from its next observation after `before`."""
    def counted() -> dict[str, float] | None:
        now = controller_metric(controller)
        return now if now["count"] > before["count"] else None

    seen = wait_for(counted, timeout, f"{name} in the controller's {METRIC}", poll=0.01)
    return round(1000 * (seen["sum"] - before["sum"]), 1)


def _one_group(stack: Stack, controller: ControllerProcess, timeline: Timeline, spec: Binding, size: int, side: str,
               name: str) -> Group:
    namespace = NAMESPACE if side == GANGKEEPER else BARE_NAMESPACE
    observed = controller_metric(controller) if side == GANGKEEPER else None
    pods = [member(f"{name}-{index}", name, size, namespace=namespace, gpus=spec.gpus_per_pod)
            for index in range(size)]
    timeline.expect(namespace, name, size)
    began = time.monotonic()
    stored = [stack.api.create("pods", pod, namespace=namespace) for pod in pods]
    complete = time.monotonic()
    timeline.all_bound.wait(spec.group_timeout)
    with timeline.lock:
        reserved, released, bound = dict(timeline.reserved), dict(timeline.released), dict(timeline.bound)

    def since_complete(stamps: dict[str, float], first: bool = False) -> float | None:
        if len(stamps) < size:
            return None
        return round(1000 * max(0.0, (min if first else max)(stamps.values()) - complete), 2)

    group = Group(size, side, name, round(1000 * (complete - began), 1), sum(map(gated, stored)), len(bound),
                  since_complete(bound))
    if side == GANGKEEPER:
        group.first_reserved_ms = since_complete(reserved, first=True)
        group.reserved_ms, group.released_ms = since_complete(reserved), since_complete(released)
        if group.bound_ms is not None:  # the controller observes once a pass sees the group bound: before it goes
            group.controller_ms = _controller_observed(controller, observed, spec.group_timeout, name)
    for pod in pods:
        stack.api.delete("pods", pod["metadata"]["name"], namespace=namespace, grace_period_seconds=0)
    wait_for(lambda: not stack.api.list("pods", namespace=namespace, label_selector=f"{names.GROUP_LABEL}={name}"),
             spec.group_timeout, f"{name}'s pods gone", poll=0.01)
    if side == GANGKEEPER:
        wait_for(lambda: not stack.api.list("gangs", namespace=NAMESPACE), spec.group_timeout,
                 f"{name}'s Gang deleted by the controller", poll=0.01)
    time.sleep(spec.pause)
    return group


def run(workdir: Path, spec: Binding = Binding(), progress=lambda message: None) -> Result:
    result = Result(spec)
    order = random.Random(spec.seed)
    began = time.monotonic()
    stack = Stack(workdir, real_webhook=True, webhook_workers=2)
    try:
        stack.api.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": BARE_NAMESPACE}})
        stack.start_cluster(sim_spec.load(yaml.safe_dump({"nodes": [{
            "count": spec.nodes, "gpusPerNode": spec.gpus_per_node, "namePrefix": "node"}]})),
            start_delay=spec.start_delay)
        controller = stack.controller("controller", identity="binding-controller", bind_timeout=spec.bind_timeout)
        controller.wait_ready()
        timeline = Timeline()
        unsubscribe = stack.api.subscribe(timeline)
        for size in spec.sizes:
            for pair in range(spec.warmup + spec.groups):
                sides = list(SIDES)
                order.shuffle(sides)
                groups = [_one_group(stack, controller, timeline, spec, size, side, f"{side[0]}{size}-{pair:03d}")
                          for side in sides]
                stack.runner.check()
                (result.warmups if pair < spec.warmup else result.groups).extend(groups)
                progress(f"binding: {size} members, pair {pair + 1} of {spec.warmup + spec.groups}"
                         f"{' (warm-up)' if pair < spec.warmup else ''}: "
                         + ", ".join(f"{g.side} {g.bound_ms} ms" for g in groups))
        unsubscribe()
    finally:
        stack.close()
    result.seconds = time.monotonic() - began
    result.load_average = tuple(round(x, 2) for x in os.getloadavg())
    return result


def _figures(values: list[float]) -> dict:
    return {"p50": round(percentile(values, 50), 1), "p99": round(percentile(values, 99), 1),
            "max": round(max(values, default=math.nan), 1)}


def summary(result: Result) -> dict:
    """Per size: each side's groups (measured, all bound), p50 / p99 / max, gangkeeper's phases and the
    differences gangkeeper − bare at p50 and p99 against the goal."""
    sizes = {}
    for size in result.spec.sizes:
        row: dict = {}
        for side in SIDES:
            groups = [g for g in result.groups if g.size == size and g.side == side]
            times = [g.bound_ms for g in groups if g.bound_ms is not None]
            row[side] = {"groups": len(groups), "all_bound": len(times), "ms": _figures(times),
                         "create_ms": _figures([g.create_ms for g in groups])}
        ours = [g for g in result.groups if g.size == size and g.side == GANGKEEPER]
        row[GANGKEEPER]["first_reserved_ms"] = _figures([g.first_reserved_ms for g in ours
                                                         if g.first_reserved_ms is not None])
        row[GANGKEEPER]["reserved_ms"] = _figures([g.reserved_ms for g in ours if g.reserved_ms is not None])
        row[GANGKEEPER]["released_ms"] = _figures([g.released_ms for g in ours if g.released_ms is not None])
        row["difference_ms"] = {q: round(row[GANGKEEPER]["ms"][q] - row[BARE]["ms"][q], 1) for q in ("p50", "p99")}
        goal = GOAL_MS.get(size)
        row["goal_ms"] = goal
        row["goal_met"] = None if goal is None else row["difference_ms"]["p99"] <= goal
        observed = [g.controller_ms for g in ours if g.controller_ms is not None]
        row[GANGKEEPER]["controller_metric"] = {"count": len(observed), **_figures(observed),
                                                "mean": round(sum(observed) / len(observed), 1) if observed else None}
        sizes[size] = row
    return {"sizes": sizes, "seconds": round(result.seconds), "load_average": result.load_average}
