"""Prometheus metrics of the webhook, correct with any number of gunicorn workers.

Each worker is a process with its own counters. With `PROMETHEUS_MULTIPROC_DIR` set (the server
launcher sets it to a fresh directory before anything imports prometheus_client) every worker
writes its values to files there, a scrape of any worker sums them all, and the master marks a
dead worker's files (`child_exit` hook) so that its gauges stop counting. Without it (tests,
`flask run`) the process's default registry is used.
"""

import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)

MULTIPROC_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"

REQUESTS = Counter("gangkeeper_webhook_requests", "Admission requests answered, by endpoint and decision.",
                   ["endpoint", "decision"])
LATENCY = Histogram("gangkeeper_webhook_request_duration_seconds",
                    "Time from reading the request to having the answer, by endpoint and decision.",
                    ["endpoint", "decision"],
                    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5))


# The children of REQUESTS and LATENCY by (endpoint, decision): `labels()` checks and looks up
# its arguments under a lock on every call, for a handful of pairs that never change.
_CHILDREN: dict[tuple[str, str], tuple] = {}


def observe(endpoint: str, decision: str, seconds: float) -> None:
    key = (endpoint, decision)
    children = _CHILDREN.get(key)
    if children is None:
        children = _CHILDREN.setdefault(key, (REQUESTS.labels(endpoint, decision), LATENCY.labels(endpoint, decision)))
    requests, latency = children
    requests.inc()
    latency.observe(seconds)


def exposition() -> tuple[bytes, str]:
    """The text format of every worker's metrics (or this process's), and its content type."""
    if os.environ.get(MULTIPROC_DIR_ENV):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def mark_worker_dead(pid: int) -> None:
    if os.environ.get(MULTIPROC_DIR_ENV):
        multiprocess.mark_process_dead(pid)
