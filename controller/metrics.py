"""Prometheus metrics of the controller, on their own registry so that tests can make many.

Labels stay bounded: by namespace (those holding groups), phase (five), accelerator resource
(the kinds the cluster has) and preemption reason; never by group or pod. A namespace's series
go when its last group does, but the wait histogram's: removing a histogram's series would
reset what Prometheus has summed of it.
"""

import collections
from collections.abc import Iterable, Mapping
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from gangkeeper.controller.deciding.outcome import Outcome
from gangkeeper.controller.model.members import GroupKey

PHASES = ("Waiting", "Admitted", "Running", "Succeeded", "Failed")
# Waits from seconds (a group that fits at once) to a day (a large job behind others).
WAIT_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800, 86400)


class GroupPhases:
    """The phase of every group, kept from the passes that decide some of them (`Outcome`)."""

    def __init__(self) -> None:
        self._phases: dict[GroupKey, str] = {}
        self.counts: collections.Counter = collections.Counter()  # (namespace, phase) -> groups

    def update(self, decided: Mapping[GroupKey, str], gone: Iterable[GroupKey], complete: bool) -> collections.Counter:
        if complete:
            self._phases.clear()
            self.counts.clear()
        for key in [*gone, *decided]:
            phase = self._phases.pop(key, None)
            if phase is not None:
                self.counts[key[0], phase] -= 1
        for key, phase in decided.items():
            self._phases[key] = phase
            self.counts[key[0], phase] += 1
        self.counts = +self.counts
        return self.counts

    @property
    def namespaces(self) -> set[str]:
        return {namespace for namespace, _ in self.counts}


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        self.groups = Gauge("gangkeeper_groups", "Groups by namespace and phase", ["namespace", "phase"],
                            registry=self.registry)
        self.group_wait = Histogram(
            "gangkeeper_group_wait_seconds", "Seconds from a group first seen (its oldest member's creation) to "
            "its release, by namespace", ["namespace"], buckets=WAIT_BUCKETS, registry=self.registry)
        self.longest_wait = Gauge("gangkeeper_longest_wait_seconds", "Seconds the longest-waiting group of the "
                                  "namespace has waited so far (0: none waits)", ["namespace"], registry=self.registry)
        self.stuck_incomplete = Gauge(
            "gangkeeper_stuck_incomplete_groups", "Groups with fewer members than their min count, all gated, that "
            "gained none for --incomplete-group-seconds or longer, by namespace (0: none)", ["namespace"],
            registry=self.registry)
        self.degraded = Gauge(
            "gangkeeper_degraded_groups", "Running groups with fewer members placed than they had, at or above their "
            "min count, by namespace (0: none)", ["namespace"], registry=self.registry)
        self.waiting_accelerators = Gauge(
            "gangkeeper_waiting_accelerators", "Accelerators requested by the members of groups waiting to be "
            "admitted, by namespace and resource", ["namespace", "resource"], registry=self.registry)
        self.complete_to_released = Histogram(
            "gangkeeper_complete_to_released_seconds", "Seconds from a group being complete to its release",
            buckets=(0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 14400), registry=self.registry)
        self.complete_to_bound = Histogram(
            "gangkeeper_group_complete_to_bound_seconds", "Seconds from a group being complete to its min count "
            "of members seen bound (gangkeeper's passes, its writes and the scheduler's binding)",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15, 60, 300, 900, 3600), registry=self.registry)
        self.reserved_accelerators = Gauge("gangkeeper_reserved_accelerators",
                                           "Accelerators reserved for members not yet bound", registry=self.registry)
        self.rollbacks = Counter("gangkeeper_rollbacks", "Groups rolled back", registry=self.registry)
        self.preemptions = Counter("gangkeeper_preemptions", "Work preempted for a group of higher priority, by "
                                   "how: a group's owner suspended, a group's members deleted, a lone pod evicted",
                                   ["reason"], registry=self.registry)
        self.planner_seconds = Histogram("gangkeeper_reconcile_pass_seconds", "Duration of one decision pass",
                                         registry=self.registry)
        self.watch_restarts = Counter("gangkeeper_watch_restarts", "Watches started again",
                                      ["resource", "reason"], registry=self.registry)
        self.index_inconsistencies = Counter(
            "gangkeeper_index_inconsistencies", "Consistency checks that found the incremental index off the caches",
            registry=self.registry)
        self.capacity_asked = Counter(
            "gangkeeper_capacity_asked", "Asks of an autoscaler for a waiting group's nodes (a ProvisioningRequest, "
            "or its placeholders), by namespace", ["namespace"], registry=self.registry)
        self.capacity_asked_accelerators = Counter(
            "gangkeeper_capacity_asked_accelerators", "Accelerators asked of an autoscaler, by resource", ["resource"],
            registry=self.registry)
        self.capacity_came = Histogram(
            "gangkeeper_capacity_wait_seconds", "Seconds from a group first seen to its placement on the capacity "
            "it asked an autoscaler for", buckets=WAIT_BUCKETS, registry=self.registry)
        self.capacity_failed = Counter(
            "gangkeeper_capacity_failed", "Asks of an autoscaler that came to nothing, by how: Failed, BookingExpired, "
            "CapacityRevoked, NotFound (it finds no capacity now), PlaceholdersUnbound", ["reason"], registry=self.registry)
        self.leader = Gauge("gangkeeper_leader", "1 while this replica leads (decides and writes), else 0",
                            registry=self.registry)
        self._phases = GroupPhases()
        self._namespaces: set[str] = set()  # those with series of groups, longest_wait, stuck_incomplete, degraded
        self._published: set[tuple[str, str]] = set()  # (namespace, resource) of waiting_accelerators

    def lead(self, leading: bool) -> None:
        """Whether this replica leads. A follower decides nothing and drops what it last said of the
        groups, so that a sum over replicas counts each group once."""
        self.leader.set(1 if leading else 0)
        if not leading:
            self._phases = GroupPhases()
            self._by_namespace(set())
            self.reserved_accelerators.set(0)

    def observe_pass(self, outcome: Outcome, seconds: float) -> None:
        counts = self._phases.update(outcome.decided_phases, outcome.gone, outcome.complete)
        namespaces = self._phases.namespaces
        self._by_namespace(namespaces)
        for namespace in namespaces:
            for phase in PHASES:
                self.groups.labels(namespace, phase).set(counts.get((namespace, phase), 0))
            self.longest_wait.labels(namespace).set(outcome.longest_wait.get(namespace, 0.0))
            self.stuck_incomplete.labels(namespace).set(outcome.stuck_incomplete.get(namespace, 0))
            self.degraded.labels(namespace).set(outcome.degraded.get(namespace, 0))
        for (namespace, _), waited in outcome.waited:
            self.group_wait.labels(namespace).observe(waited)
        for namespace, resource in self._published - outcome.waiting_accelerators.keys():
            self.waiting_accelerators.labels(namespace, resource).set(0)
        for (namespace, resource), amount in outcome.waiting_accelerators.items():
            self.waiting_accelerators.labels(namespace, resource).set(amount)
        self._published |= outcome.waiting_accelerators.keys()
        self.reserved_accelerators.set(outcome.reserved_accelerators)
        for _, delay in outcome.released_after:
            self.complete_to_released.observe(delay)
        for delay in outcome.bound_after:
            self.complete_to_bound.observe(delay)
        self.rollbacks.inc(outcome.rollbacks)
        for reason, count in outcome.preemptions.items():
            self.preemptions.labels(reason).inc(count)
        for namespace, asked in outcome.capacity_asked:
            self.capacity_asked.labels(namespace).inc()
            for resource, amount in asked.items():
                self.capacity_asked_accelerators.labels(resource).inc(amount)
        for waited in outcome.capacity_came:
            self.capacity_came.observe(waited)
        for how, count in outcome.capacity_failed.items():
            self.capacity_failed.labels(how).inc(count)
        self.planner_seconds.observe(seconds)

    def _by_namespace(self, namespaces: set[str]) -> None:
        """Drop the gauges of namespaces that hold no group any more."""
        for namespace in self._namespaces - namespaces:
            for phase in PHASES:
                self.groups.remove(namespace, phase)
            self.longest_wait.remove(namespace)
            self.stuck_incomplete.remove(namespace)
            self.degraded.remove(namespace)
        for namespace, resource in [key for key in self._published if key[0] not in namespaces]:
            self.waiting_accelerators.remove(namespace, resource)
            self._published.discard((namespace, resource))
        self._namespaces = set(namespaces)

    def serve(self, port: int, host: str = "0.0.0.0") -> WSGIServer:
        """Serve /metrics on a thread; returns the server, to shut down."""
        server, _ = start_http_server(port, addr=host, registry=self.registry)
        return server
