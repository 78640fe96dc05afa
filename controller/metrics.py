"""Prometheus metrics of the controller, on their own registry so that tests can make many."""

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

PHASES = ("Waiting", "Admitted", "Running", "Succeeded", "Failed")


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        self.groups = Gauge("gangkeeper_groups", "Groups by phase", ["phase"], registry=self.registry)
        self.complete_to_released = Histogram(
            "gangkeeper_complete_to_released_seconds", "Seconds from a group being complete to its release",
            buckets=(0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 14400), registry=self.registry)
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

    def observe_pass(self, phases: dict, reserved_accelerators: int, released_after, rollbacks: int,
                     seconds: float, preemptions: Mapping[str, int] | None = None) -> None:
        for phase in PHASES:
            self.groups.labels(phase).set(phases.get(phase, 0))
        self.reserved_accelerators.set(reserved_accelerators)
        for delay in released_after:
            self.complete_to_released.observe(delay)
        self.rollbacks.inc(rollbacks)
        for reason, count in (preemptions or {}).items():
            self.preemptions.labels(reason).inc(count)
        self.planner_seconds.observe(seconds)

    def serve(self, port: int, host: str = "0.0.0.0"):
        """Serve /metrics on a thread; returns the server, to shut down."""
        server, _ = start_http_server(port, addr=host, registry=self.registry)
        return server
