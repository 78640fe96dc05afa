"""The controller process: informers fill the cache, a loop decides and acts while we lead.

A pass runs when the cache changes (debounced, so that a burst of pod events makes one pass)
and at least every `resync_seconds`. A follower keeps its caches warm and decides nothing, so
that taking over is one pass away. Pods this process just wrote are "assumed" (the API's
answer overrides the cache) until the watch catches up: the next pass must not plan on a
cache that has not seen our own reservations yet, or it could book the same capacity twice.
"""

import logging
import threading
import time
from collections.abc import Callable
from functools import partial

from controller import kube as api
from controller.actions import Executor
from controller.groups import PodFacts, Workload, pod_facts, workload_from_api
from controller.informer import Hooks, Informer, object_key
from controller.metrics import Metrics
from controller.model import node_from_api
from controller.reconciler import Memory, Outcome, Settings, reconcile
from gangkeeper.audit import AuditLog

log = logging.getLogger("gangkeeper.controller")

WORKLOADS = (api.GANGS, api.PYTORCHJOBS, api.JOBSETS, api.JOBS, api.NATIVE_POD_GROUPS, api.PLUGINS_POD_GROUPS,
             api.VOLCANO_POD_GROUPS)


class Controller:
    def __init__(self, kube: api.Kube, settings: Settings, audit: AuditLog, metrics: Metrics, *,
                 namespace: str | None = None, dry_run: bool = False, resync_seconds: float = 30.0,
                 debounce_seconds: float = 0.2, clock: Callable[[], float] = time.time):
        self.settings, self.metrics, self._clock = settings, metrics, clock
        self.resync_seconds, self.debounce_seconds = resync_seconds, debounce_seconds
        self.memory = Memory()
        self.heartbeat = time.monotonic()
        self._wake = threading.Event()
        self._assumed: dict[str, PodFacts] = {}
        self._assumed_lock = threading.Lock()
        hooks = Hooks(watch_restarted=lambda resource, reason: metrics.watch_restarts.labels(resource, reason).inc())
        scoped = dict(namespace=namespace, hooks=hooks, on_change=lambda _: self._wake.set())
        self.pods = Informer(kube, api.PODS, pod_facts, **scoped)
        self.nodes = Informer(kube, api.NODES, node_from_api, hooks=hooks, on_change=lambda _: self._wake.set())
        self.workloads = [Informer(kube, resource, partial(workload_from_api, resource.name), **scoped)
                          for resource in WORKLOADS]
        self.executor = Executor(kube, audit, dry_run=dry_run, written=self._assume)

    @property
    def informers(self) -> list[Informer]:
        return [self.pods, self.nodes, *self.workloads]

    def start(self) -> "Controller":
        for informer in self.informers:
            informer.start()
        return self

    def stop(self) -> None:
        for informer in self.informers:
            informer.stop()

    def synced(self) -> bool:
        return all(informer.has_synced for informer in self.informers)

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self.synced():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def alive(self, stuck_after: float) -> bool:
        return time.monotonic() - self.heartbeat < stuck_after

    def run(self, stop: threading.Event, is_leader: Callable[[], bool]) -> None:
        """Pass after pass until `stop`; a failing pass is logged and the loop goes on."""
        while not stop.is_set():
            self._wake.wait(self.resync_seconds)
            self.heartbeat = time.monotonic()
            if stop.wait(self.debounce_seconds):
                break
            self._wake.clear()
            if self.synced() and is_leader():
                try:
                    self.reconcile_once()
                except Exception:
                    log.exception("reconcile pass failed; the next one starts from the cache again")

    def reconcile_once(self) -> Outcome:
        started = time.perf_counter()
        outcome = reconcile(self._pods(), self._workloads(), list(self.nodes.cache.snapshot().values()),
                            self.memory, self._clock(), self.settings)
        seconds = time.perf_counter() - started
        self.memory = outcome.memory
        self.executor.execute(outcome.actions)
        self.metrics.observe_pass(outcome.phases, outcome.reserved_accelerators, outcome.released_after,
                                  outcome.rollbacks, seconds)
        return outcome

    def _workloads(self) -> dict[tuple[str, str, str], Workload]:
        index = {}
        for informer in self.workloads:
            for workload in informer.cache.snapshot().values():
                index[(workload.resource, workload.namespace, workload.name)] = workload
        return index

    def _pods(self) -> list[PodFacts]:
        """The cache, with our own writes the watch has not delivered yet laid over it."""
        pods = self.pods.cache.snapshot()
        with self._assumed_lock:
            for key, facts in list(self._assumed.items()):
                cached = pods.get(key)
                if cached is None or not _older(cached.resource_version, facts.resource_version):
                    del self._assumed[key]
                else:
                    pods[key] = facts
        return list(pods.values())

    def _assume(self, pod: dict) -> None:
        facts = pod_facts(pod)
        if facts is not None:
            with self._assumed_lock:
                self._assumed[object_key(pod)] = facts
        self._wake.set()


def _older(cached: str, written: str) -> bool:
    """Whether the cache still holds a version from before our write.

    resourceVersions are opaque in general; both kube-apiserver (etcd revisions) and the
    emulation use increasing integers, and anything else is treated as caught up.
    """
    return cached.isdigit() and written.isdigit() and int(cached) < int(written)
