"""The controller process: informers fill an index, a loop decides and acts while we lead.

Informers report every change (`on_object`) into a queue; the loop applies the queue to the
`ClusterIndex` on its own thread and then, when we lead, runs a pass on the index. A pass runs
when something changed (debounced, so that a burst of pod events makes one pass), at once after
a pass whose pod writes succeeded (releasing what the last pass reserved needs no batching), and
at least every `resync_seconds` (time alone moves bind timeouts, schedule timeouts, backoff), or
sooner when the last pass said a timeout falls due.

The loop is `turn()` (one turn: apply what changed, take or lose leadership, check consistency
when that is due, run a pass while leading) and `due()` (when the next turn is due, from what the
last turn recorded); `run()` waits until `due()` and turns, again and again, on a thread. Time and
waiting come from a `Clock`: the system's in production; the study calls `turn()` itself on the
cluster emulation's virtual clock, so that its figures come from this loop and no copy of it.

A follower applies the queue too, so its index is warm and taking over is one pass away. A new
leadership term starts from an empty `Memory` and decides every group once.

Pods this process just wrote go into the index from the API's answer, before the watch delivers
them: the next pass must not plan on a view that has not seen our own reservations yet, or it
could book the same capacity twice (the index keeps the newest version of a pod).

Every `consistency_seconds` the index is rebuilt from the informers' caches and compared with the
incremental one: a difference is a bug, logged and counted, and the rebuilt index is kept.

Once the caches have synced, and after each consistency check, what they hold is moved out of
the cyclic garbage collector's way (`settle_memory`): a full collection over the facts of
50,000 pods takes a quarter of a second and would otherwise land, now and then, in the middle
of a pass. The cached values hold no reference cycles, so reference counting alone frees them.
After the caches first sync nothing is collected first: the lists made no cyclic garbage to
find (a collection then found none among 1.08 million objects at 15,000 nodes, and took half a
second of the restart); after a consistency check the index replaced is collected.
"""

import gc
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from functools import partial
from typing import Any

from gangkeeper import integrations, names
from gangkeeper.audit import AuditLog
from gangkeeper.controller.acting.executor import CONCURRENT_WRITES, Executor
from gangkeeper.controller.cache.index import PODS, Change, ClusterIndex, supersedes
from gangkeeper.controller.deciding.capabilities import ApiCapabilities
from gangkeeper.controller.deciding.memory import Memory
from gangkeeper.controller.deciding.outcome import Outcome, carried_out
from gangkeeper.controller.deciding.reconciler import reconcile
from gangkeeper.controller.deciding.settings import CapacityProvisioning, Settings
from gangkeeper.controller.metrics import Metrics
from gangkeeper.controller.model.objects import Workload
from gangkeeper.controller.reading import kube as api
from gangkeeper.controller.reading import shapes
from gangkeeper.controller.reading.budgets import budget_from_api
from gangkeeper.controller.reading.capacity import capacity_request_from_api
from gangkeeper.controller.reading.informer import Hooks, Informer, Transform, object_key
from gangkeeper.controller.reading.nodes import node_from_api
from gangkeeper.controller.reading.objects import cached_object
from gangkeeper.controller.reading.pods import pod_facts
from gangkeeper.controller.reading.workloads import workload_from_api

log = logging.getLogger("gangkeeper.controller")

# One informer per workload kind that has an object to watch (gangkeeper.integrations).
WORKLOADS = integrations.RESOURCES
STOP_POLL_SECONDS = 0.25  # how often a loop waiting for a change looks whether it was told to stop
# How long a change waits for the burst it may be the first of. What a pass costs batches a burst
# anyway (changes queue while it runs), so the wait is for cheap passes only: as long as one at a
# few hundred nodes. It is added to the time from a group's last member to its release (10 ms
# cost 5 ms of the 16-member figure in `gangkeeper bench binding`, bench/RESULTS.md).
DEBOUNCE_SECONDS = 0.002


@dataclass(frozen=True)
class Clock:
    """The loop's time and its way of waiting. `monotonic` times the loop (debounce, resync,
    consistency checks, the heartbeat); `wall` is the cluster's time, which decisions, deadlines
    and the timestamps the controller writes are in; `wait(event, timeout)` returns when `event`
    is set (True) or `timeout` seconds have passed (False)."""

    monotonic: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    wait: Callable[[threading.Event, float], bool] = threading.Event.wait


class Controller:
    """`namespace`, when set, limits the groups managed (and the workloads watched) to it; pods are
    watched in every namespace, because a pod bound anywhere takes capacity. `make_informer` makes
    the informer of one resource (`Informer`'s keyword arguments but the client), on `kube` unless
    given. `concurrent_writes` is how many writes a pass may have in flight at once (`Executor`)."""

    def __init__(self, kube: api.Kube, settings: Settings, audit: AuditLog, metrics: Metrics, *,
                 namespace: str | None = None, dry_run: bool = False, resync_seconds: float = 30.0,
                 debounce_seconds: float = DEBOUNCE_SECONDS, consistency_seconds: float = 600.0, clock: Clock = Clock(),
                 make_informer: Callable[..., Informer] | None = None, concurrent_writes: int = CONCURRENT_WRITES):
        self.settings, self.metrics, self._clock = settings, metrics, clock
        self.resync_seconds, self.debounce_seconds = resync_seconds, debounce_seconds
        self.consistency_seconds = consistency_seconds
        self.memory = Memory()
        self.capabilities = ApiCapabilities()  # what the executor found the API server able to do
        self.index = ClusterIndex(settings.accelerator_patterns, namespace=namespace)
        self.heartbeat = clock.monotonic()
        self.failed_actions = 0  # actions that failed or were left since the start (the study reports them)
        self._wake = threading.Event()  # rung after `_woken_at` is set: a waiting loop looks at `due()` again
        self._woken_at: float | None = None  # monotonic moment of the first change since the last turn began
        self._changes: deque[Change] = deque()
        self._leading = False
        self._settled = False
        self._wrote = False
        self._next_due: float | None = None  # cluster-clock moment a timeout falls due (from the last pass)
        self._turned_at = self.heartbeat  # monotonic moment the last turn ended
        self._deadline = self._turned_at + resync_seconds  # a turn by then even if nothing changes
        self._assumed = 0
        # Gangs our writes got back and their informer has not shown yet: a Gang created with its
        # reservations by this pass is in no cache, and a rebuild from the caches must keep it.
        self._assumed_gangs: dict[str, Workload] = {}
        self._assuming = threading.Lock()  # the informers' threads confirm what the loop assumed
        self._next_check = self._turned_at + consistency_seconds
        hooks = Hooks(watch_restarted=lambda resource, reason: metrics.watch_restarts.labels(resource, reason).inc())
        make_informer = make_informer or partial(Informer, kube)

        def informer(resource: api.Resource, transform: Transform, scope: str | None = None,
                     **options: Any) -> Informer:
            return make_informer(resource, transform, namespace=scope, hooks=hooks,
                                 on_change=lambda _: self.wake(), on_object=partial(self._queue, resource.name),
                                 **options)

        self.pods = informer(api.PODS, pod_facts, reading=shapes.PODS)
        self.nodes = informer(api.NODES, node_from_api, reading=shapes.NODES)
        self.workloads = [informer(resource, partial(workload_from_api, resource.name), namespace,
                                   keeps_unserved=resource is api.GANGS)  # they hold reservations
                          for resource in WORKLOADS]
        self.gangs = self.workloads[WORKLOADS.index(api.GANGS)]
        self.objects = [*(informer(resource, cached_object) for resource in api.OCCUPANCY),
                        informer(api.POD_DISRUPTION_BUDGETS, budget_from_api)]
        self.provisioning_requests: Informer | None = None
        if settings.provisioning.mode is CapacityProvisioning.PROVISIONING_REQUEST:  # ours alone
            self.provisioning_requests = informer(api.PROVISIONING_REQUESTS, capacity_request_from_api, namespace,
                                                  label_selector=names.CAPACITY_FOR_LABEL)
            self.objects.append(self.provisioning_requests)
        self.executor = Executor(kube, audit, dry_run=dry_run, written=self._assume,
                                 clock=lambda: datetime.fromtimestamp(clock.wall(), timezone.utc),
                                 concurrency=concurrent_writes)

    @property
    def informers(self) -> list[Informer]:
        return [self.pods, self.nodes, *self.workloads, *self.objects]

    def start(self) -> "Controller":
        for informer in self.informers:
            informer.start()
        return self

    def stop(self) -> None:
        for informer in self.informers:
            informer.stop()
        self.executor.close()

    def synced(self) -> bool:
        return all(informer.has_synced for informer in self.informers)

    def wait_synced(self, timeout: float) -> bool:
        deadline = self._clock.monotonic() + timeout
        while not self.synced():
            if self._clock.monotonic() > deadline:
                return False
            self._clock.wait(threading.Event(), 0.05)
        return True

    def wake(self) -> None:
        """Something changed, or leadership was just taken: a turn is due `debounce_seconds` from now
        (decide without waiting for a resync)."""
        if self._woken_at is None:
            self._woken_at = self._clock.monotonic()
        self._wake.set()

    def alive(self, stuck_after: float) -> bool:
        return self._clock.monotonic() - self.heartbeat < stuck_after

    def due(self) -> float:
        """The monotonic moment the next turn is due: at once after a pass whose pod writes or
        Gang reservations succeeded; else `debounce_seconds` after the first change since the last
        turn (counted from the turn's end for a change during it) or after the deadline, whichever
        comes first.
        The deadline is `resync_seconds` after the last turn, or sooner when a timeout falls due."""
        if self._wrote:
            return self._turned_at
        start = self._deadline
        if self._woken_at is not None:
            start = min(start, max(self._woken_at, self._turned_at))
        return start + self.debounce_seconds

    def run(self, stop: threading.Event, is_leader: Callable[[], bool]) -> None:
        """Turn after turn until `stop`, each when it is due; a failing turn is logged and the loop goes on."""
        while not self._wait_until_due(stop):
            try:
                self.turn(is_leader)
            except Exception:
                self._wrote = False
                log.exception("reconcile pass failed; the next one starts from the index again")

    def _wait_until_due(self, stop: threading.Event) -> bool:
        """Until the next turn is due (True: `stop` was set first). Waiting for a change, the loop
        looks at `stop` every `STOP_POLL_SECONDS`; once one came, only `stop` cuts the debounce short."""
        while not stop.is_set():
            remaining = self.due() - self._clock.monotonic()
            if remaining <= 0:
                return False
            if self._woken_at is not None:
                self._clock.wait(stop, remaining)
            elif self._clock.wait(self._wake, min(STOP_POLL_SECONDS, remaining)):
                self._wake.clear()
        return True

    def turn(self, is_leader: Callable[[], bool]) -> Outcome | None:
        """One turn of the loop, whenever it is called: apply what changed; once the caches have
        synced, take or lose leadership and, while leading, check the index's consistency when that
        is due and run a pass. Records when the next turn is due (`due`)."""
        self._woken_at = None
        self._wake.clear()
        self._wrote = False
        self.heartbeat = self._clock.monotonic()
        try:
            return self._decide(is_leader)
        finally:
            self._turned_at = self._clock.monotonic()
            wait = self.resync_seconds
            if self._next_due is not None:
                wait = min(wait, max(self._next_due - self._clock.wall(), 0.0))
            self._deadline = self._turned_at + wait

    def _decide(self, is_leader: Callable[[], bool]) -> Outcome | None:
        self.apply_changes()
        if not self._settled and self.synced():
            self.settle_memory(collect=False)
            self._settled = True
        leading = self.synced() and is_leader()
        if leading and not self._leading:
            log.info("leading: deciding on every group once, with nothing remembered from before")
            self.memory = Memory()
            self.index.touch_all()
        self._leading = leading
        self.metrics.lead(leading)
        if not leading:
            self._next_due = None  # a follower acts on no timeout: it waits for changes and resyncs
            return None
        if self._clock.monotonic() >= self._next_check:
            self.check_consistency()
        return self.reconcile_once(is_leader)

    def reconcile_once(self, still_leading: Callable[[], bool] = lambda: True) -> Outcome:
        """One pass on the index and its writes, which stop as soon as `still_leading()` says no;
        its outcome as carried out (`deciding.outcome.carried_out`). What the executor learned of
        the API server goes into the next pass, with whether the Gangs' informer finds them served."""
        self.apply_changes()
        capabilities = replace(self.capabilities, serves_gangs=self.gangs.served is not False,
                               serves_provisioning_requests=self.provisioning_requests is None
                               or self.provisioning_requests.served is not False)
        started = time.perf_counter()
        outcome = reconcile(self.index, self.memory, self._clock.wall(), self.settings, capabilities)
        seconds = time.perf_counter() - started
        self.memory, self._next_due = outcome.memory, outcome.next_due  # kept should carrying it out break
        writes = self._assumed
        executed = self.executor.execute(outcome.actions, capabilities, proceed=still_leading)
        self._wrote = self._assumed > writes
        self.failed_actions += executed.failed
        self.capabilities = executed.capabilities
        outcome = carried_out(outcome, executed.held, self._clock.wall())
        self.memory, self._next_due = outcome.memory, outcome.next_due
        self.metrics.observe_pass(outcome, seconds)
        return outcome

    def apply_changes(self) -> None:
        self.index.apply(self._drain())

    def _drain(self) -> list[Change]:
        batch = []
        while self._changes:
            batch.append(self._changes.popleft())
        return batch

    def check_consistency(self) -> list[str]:
        """Rebuild the index from the caches, keep the rebuilt one, and say how the two differed."""
        self._next_check = self._clock.monotonic() + self.consistency_seconds
        pods, nodes = self.pods.cache.snapshot(), self.nodes.cache.snapshot()
        workloads = [w for informer in self.workloads for w in informer.cache.snapshot().values()]
        objects = [(informer.resource.name, key, obj) for informer in self.objects
                   for key, obj in informer.cache.snapshot().items()]
        with self._assuming:
            assumed = [(api.GANGS.name, key, gang) for key, gang in self._assumed_gangs.items()]
        fresh, differences = self.index.rebuilt_from(pods.values(), workloads, nodes.values(), self._drain(), objects,
                                                     assumed)
        if differences:
            log.warning("the incremental index had drifted from the caches (%s); using the rebuilt one",
                        "; ".join(differences))
            self.metrics.index_inconsistencies.inc()
        self.index = fresh
        self.settle_memory()
        return differences

    @staticmethod
    def settle_memory(collect: bool = True) -> None:
        """Collect what is garbage now (unless told not to: nothing is), then exempt everything
        alive from later collections."""
        if collect:
            gc.unfreeze()
            gc.collect()
        gc.freeze()

    def _queue(self, resource: str, key: str, value: Any) -> None:
        if resource == api.GANGS.name and key in self._assumed_gangs:
            self._confirm(key, value)
        self._changes.append((resource, key, value))

    def _confirm(self, key: str, cached: Workload | None) -> None:
        """Forget a Gang our write got back once its informer has it (that version, a later one,
        another Gang under the name) or has seen it deleted: the caches stand for it from then on."""
        with self._assuming:
            assumed = self._assumed_gangs.get(key)
            if assumed is not None and (cached is None or supersedes(cached, assumed)):
                del self._assumed_gangs[key]

    def _assume(self, obj: dict) -> None:
        """Lay an object our write got back over the cache: a pod reserved or released, or a Gang
        whose reservations were written (so the next pass books them before the watch says so)."""
        if obj.get("kind") == names.GANG_KIND:
            key, gang = object_key(obj), workload_from_api(api.GANGS.name, obj)
            with self._assuming:
                self._assumed_gangs[key] = gang
            self._changes.append((api.GANGS.name, key, gang))
            self._assumed += 1
            return
        facts = pod_facts(obj)
        if facts is not None:
            self._changes.append((PODS, object_key(obj), facts))
            self._assumed += 1
