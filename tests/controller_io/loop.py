"""The controller's loop (`runner.Controller`) turned by hand on a fake clock, over the emulated
API server in process.

Its writes reach `sim.apiserver.APIServer` through `study.adapter.InProcessKube`, so they meet
the real API's rules; its informers are `study.adapter.FedInformer`s, which hear of the API's
changes only when a test hands them over (`World.deliver`): a test says what the caches know and
when, as a watch that is behind would. The API server keeps the loop's time (its wall clock).
"""

import json
import threading

from gangkeeper import names
from gangkeeper.audit import AuditLog
from gangkeeper.controller.deciding.decisions import Release
from gangkeeper.controller.deciding.settings import Settings
from gangkeeper.controller.metrics import Metrics
from gangkeeper.controller.reading import kube
from gangkeeper.controller.reading.informer import apply_event
from gangkeeper.controller.runner import Clock, Controller
from sim.api import CONTROLLER, KUBELET, WatchEvent
from sim.apiserver import APIServer
from study.adapter import FedInformer, InProcessKube
from tests.builders import pod
from tests.controller.world import booked

START = 1_000.0  # the fake monotonic clock's first moment
WALL = 1_800_000_000.0  # the cluster's time at START: whole seconds, as the annotations the controller writes
RESYNC, DEBOUNCE, CONSISTENCY = 30.0, 0.5, 100.0
NS = "ml"
NAMESPACES = (NS, "vision")
MEMBER_RESOURCES = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "4"}


class FakeClock:
    """Time moves only when the loop waits (or a test says so); `at(moment, action)` runs `action`
    when a wait reaches `moment`, as a watch event arriving then would."""

    def __init__(self, start: float = START):
        self.now = start
        self.scheduled: list[tuple[float, callable]] = []

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return WALL + self.now - START

    def wait(self, event: threading.Event, timeout: float) -> bool:
        if not event.is_set() and self.scheduled and self.scheduled[0][0] <= self.now + timeout:
            self.now, action = self.scheduled.pop(0)
            action()
        elif not event.is_set():
            self.now += timeout
        return event.is_set()

    def at(self, moment: float, action) -> None:
        self.scheduled = sorted([*self.scheduled, (moment, action)], key=lambda pair: pair[0])

    def clock(self) -> Clock:
        return Clock(monotonic=self.monotonic, wall=self.wall, wait=self.wait)


class HandFedInformer(FedInformer):
    """A `FedInformer` that can also drift: a change handed over untold reaches its cache and not
    the controller's index, as only a bug could make it (what the consistency check is for)."""

    def __init__(self, api, resource, transform, *, on_object, **options):
        self.told = True
        super().__init__(api, resource, transform, on_object=lambda key, value: self._tell(on_object, key, value),
                         **options)

    def _tell(self, on_object, key, value) -> None:
        if self.told:
            on_object(key, value)

    def drift(self, event: WatchEvent) -> None:
        self.told = False
        try:
            apply_event(self.cache, self._transform, event.type, event.object)
        finally:
            self.told = True


class AuditEvents:
    """An audit sink that keeps each line's event."""

    def __init__(self):
        self.events: list[str] = []

    def write_line(self, line: str) -> None:
        self.events.append(json.loads(line)["event"])


class World:
    """The emulated API server on `clock`, the controller's client of it, and the changes its
    informers have not heard of yet, in commit order."""

    def __init__(self, clock: FakeClock, kube_type: type[InProcessKube] = InProcessKube):
        self.api = APIServer(clock=clock.wall)
        for name in NAMESPACES:
            self.api.create("namespaces", {"metadata": {"name": name}})
        self.kube = kube_type(self.api)
        self.pending: list[WatchEvent] = []
        self.informers: dict[str, HandFedInformer] = {}  # by the emulation's name of the resource
        self.api.subscribe(lambda event: self.pending.append(event))

    def informer(self, resource, transform, **options) -> HandFedInformer:
        """The controller's `make_informer`."""
        made = HandFedInformer(self.api, resource, transform, **options)
        if made.served:
            self.informers[made.watched_as] = made
        return made

    def deliver(self, resource: str | None = None, *object_names: str, told: bool = True) -> None:
        """Hand the informers the changes waiting for them (of `resource`, of the objects named, or
        all), in commit order; untold, they reach the caches only (a drift)."""
        if resource is not None:
            resource = self.api.resource_name(self.api.kind(resource))  # `gangs.gangkeeper.io` is `gangs` to it
        handed, kept = [], []
        for event in self.pending:
            named = not object_names or event.object["metadata"]["name"] in object_names
            wanted = resource in (None, event.resource) and named
            (handed if wanted else kept).append(event)
        self.pending = kept
        for event in handed:
            informer = self.informers.get(event.resource)
            if informer is not None and told:
                informer.observe(event)
            elif informer is not None:
                informer.drift(event)

    def add(self, *objects: dict, told: bool = True) -> None:
        """Objects created by their users, which the informers then hear of with all that waited
        for their kinds."""
        for obj in objects:
            self.api.create(_resource(obj), obj)
        for resource in dict.fromkeys(_resource(obj) for obj in objects):
            self.deliver(resource, told=told)

    def pod(self, name: str, namespace: str = NS) -> dict:
        return self.api.get("pods", name, namespace=namespace)

    def gang(self, name: str, namespace: str = NS) -> dict:
        return self.api.get(kube.GANGS.name, name, namespace=namespace)

    def pod_writes(self) -> list[str]:
        """The pods the controller patched, in the order the API server took the patches."""
        return [write.name for write in self.api.writes
                if write[:2] == ("patch", "pods") and write.user == CONTROLLER.username]

    def bind(self, namespace: str, *pods: str) -> None:
        """The scheduler binds released members to the node they are pinned to, they run, and the
        pods' watch brings it all."""
        for name in pods:
            assert not self.pod(name, namespace)["spec"].get("schedulingGates"), f"{name} is still gated"
            self.api.bind(namespace, name, "n0")
            self.api.patch("pods", name, {"status": {"phase": "Running"}}, namespace=namespace, subresource="status",
                           user=KUBELET)
        self.deliver("pods")

    def delete(self, namespace: str, *pods: str) -> None:
        for name in pods:
            self.api.delete("pods", name, namespace=namespace, grace_period_seconds=0)
        self.deliver("pods")


def _resource(obj: dict) -> str:
    return {"Node": "nodes"}.get(obj.get("kind", ""), "pods")


def node(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def member(name: str, group: str = "pair", size: int = 2, namespace: str = NS) -> dict:
    """A gated member of `group`, declared explicitly with its size, asking for 4 GPUs."""
    return pod(name, namespace=namespace, labels={names.GROUP_LABEL: group},
               annotations={names.GROUP_SOURCE_ANNOTATION: names.SOURCE_EXPLICIT,
                            names.MIN_COUNT_ANNOTATION: str(size)},
               gates=(names.SCHEDULING_GATE,), requests=MEMBER_RESOURCES, limits=MEMBER_RESOURCES)


def controller(clock: FakeClock, world: World, resync: float = RESYNC, audit: AuditEvents | None = None) -> Controller:
    return Controller(world.kube, Settings(), AuditLog("controller", audit or AuditEvents()), Metrics(),
                      resync_seconds=resync, debounce_seconds=DEBOUNCE, consistency_seconds=CONSISTENCY,
                      clock=clock.clock(), make_informer=world.informer)


def leading() -> bool:
    return True


def reserved(outcome) -> set[str]:
    return {booking.pod for booking in booked(outcome)}


def released(outcome) -> set[str]:
    return {action.pod for action in outcome.actions if isinstance(action, Release)}


def sample(loop: Controller, name: str, **labels) -> float | None:
    return loop.metrics.registry.get_sample_value(name, labels)
