"""Load (issue 6 §4): a sustained stream of gang pods on the live emulation, with the real webhook
(gunicorn, two workers, over TLS) and the real controller process.

Pods are created at a steady rate, in groups of `group_size` one-GPU pods that train a few
seconds once all run; finished pods are deleted (as a job's TTL would), so that the cluster holds
a steady amount and any growth of a process's memory is its own. Measured:
- admission latency: how long each create takes, from the call to the pod stored with its gate
  (the API server calls the webhook over HTTPS inside it);
- controller lag: from the moment a group is complete (its last member stored, gated) to the
  moment its last member's gate is removed;
- RSS of the controller, of the webhook's gunicorn master and workers, and of this process (the
  emulated API server and cluster), sampled from /proc.
A process "levels off" when its RSS slope over the last half of the run is under
`LEVEL_SLOPE_MIB_PER_MIN`, or under a quarter of its slope over the first half (warm-up growth
that stops); otherwise its growth is reported as not levelling off (a leak suspect).
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gangkeeper import names
from reliability.stack import NAMESPACE, Stack, children, gated, member, percentile, rss_mib, wait_for
from sim import spec as sim_spec
from sim.api import APIError

LEVEL_SLOPE_MIB_PER_MIN = 0.5
DURATION_ANNOTATION = "sim.gangkeeper.io/duration-seconds"
WORLD_SIZE_ANNOTATION = "sim.gangkeeper.io/world-size"


@dataclass(frozen=True)
class Load:
    pods_per_minute: int = 1000
    seconds: float = 600.0
    group_size: int = 4
    train_seconds: float = 3.0
    nodes: int = 32
    gpus_per_node: int = 8
    sample_seconds: float = 5.0
    bind_timeout: int = 120


@dataclass
class Result:
    load: Load
    created: int = 0
    refused: int = 0
    ungated: int = 0
    admission_ms: list[tuple[float, float]] = field(default_factory=list)  # (t, ms)
    lag_ms: list[tuple[float, float]] = field(default_factory=list)  # (t, ms)
    groups: int = 0
    groups_released: int = 0
    rss: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # process → [(t, MiB)]
    seconds: float = 0.0
    achieved_per_minute: float = 0.0


def slope_per_minute(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MiB) points, in MiB per minute."""
    if len(points) < 2:
        return 0.0
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    denominator = sum((x - mx) ** 2 for x in xs)
    return 60 * sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / denominator if denominator else 0.0


def leak_verdict(points: list[tuple[float, float]]) -> dict:
    """Slopes over the first and the last half of the samples, and whether the growth levels off."""
    half = len(points) // 2
    first, last = slope_per_minute(points[:half]), slope_per_minute(points[half:])
    levels_off = last <= LEVEL_SLOPE_MIB_PER_MIN or last <= 0.25 * first
    return {"first_half_mib_per_min": round(first, 3), "last_half_mib_per_min": round(last, 3),
            "start_mib": round(points[0][1], 1) if points else None,
            "end_mib": round(points[-1][1], 1) if points else None,
            "max_mib": round(max(p[1] for p in points), 1) if points else None, "levels_off": levels_off}


def _pod(index: int, load: Load) -> dict:
    group = f"g-{index // load.group_size:05d}"
    return member(f"{group}-{index % load.group_size}", group, load.group_size,
                  annotations={WORLD_SIZE_ANNOTATION: str(load.group_size),
                               DURATION_ANNOTATION: f"{load.train_seconds:g}"})


class LagObserver:
    """Group complete (last member stored gated) → last member's gate removed, from the API's commits."""

    def __init__(self, group_size: int, origin: float):
        self.group_size, self.origin = group_size, origin
        self.stored: dict[str, int] = {}
        self.complete_at: dict[str, float] = {}
        self.released: dict[str, set[str]] = {}
        self.lag_ms: list[tuple[float, float]] = []
        self.lock = threading.Lock()

    def __call__(self, event) -> None:
        if event.resource != "pods" or event.object["metadata"].get("namespace") != NAMESPACE:
            return
        now = time.monotonic()
        pod = event.object
        group = (pod["metadata"].get("labels") or {}).get(names.GROUP_LABEL)
        if not group:
            return
        with self.lock:
            if event.type == "ADDED" and gated(pod):
                self.stored[group] = self.stored.get(group, 0) + 1
                if self.stored[group] == self.group_size:
                    self.complete_at[group] = now
            elif event.type == "MODIFIED" and not gated(pod) and group in self.complete_at:
                released = self.released.setdefault(group, set())
                if pod["metadata"]["name"] not in released:
                    released.add(pod["metadata"]["name"])
                    if len(released) == self.group_size:
                        self.lag_ms.append((now - self.origin, 1000 * (now - self.complete_at[group])))


def run(workdir: Path, load: Load = Load(), progress=lambda message: None) -> Result:
    result = Result(load)
    stack = Stack(workdir, real_webhook=True, webhook_workers=2)
    stop = threading.Event()
    try:
        spec = sim_spec.load(yaml.safe_dump({"nodes": [{"count": load.nodes, "gpusPerNode": load.gpus_per_node,
                                                        "namePrefix": "node"}]}))
        stack.start_cluster(spec)
        controller = stack.controller("controller", identity="load-controller", bind_timeout=load.bind_timeout)
        controller.wait_ready()
        origin = time.monotonic()
        observer = LagObserver(load.group_size, origin)
        unsubscribe = stack.api.subscribe(observer)

        def processes() -> dict[str, int]:
            found = {"controller": controller.popen.pid, "webhook master": stack.webhook.popen.pid,
                     "emulation (API server, cluster; this process)": os.getpid()}
            for number, pid in enumerate(children(stack.webhook.popen.pid), 1):
                found[f"webhook worker {number}"] = pid
            return found

        def sample() -> None:
            while True:
                at = time.monotonic() - origin
                for name, pid in processes().items():
                    mib = rss_mib(pid)
                    if mib is not None:
                        result.rss.setdefault(name, []).append((at, mib))
                if stop.wait(load.sample_seconds):
                    return

        def reap() -> None:
            """Delete finished pods, as a job's TTL after finishing would."""
            while not stop.wait(2.0):
                for pod in stack.api.list("pods", namespace=NAMESPACE):
                    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                        try:
                            stack.api.delete("pods", pod["metadata"]["name"], namespace=NAMESPACE,
                                             grace_period_seconds=0)
                        except APIError:
                            pass

        threads = [threading.Thread(target=sample, daemon=True), threading.Thread(target=reap, daemon=True)]
        for thread in threads:
            thread.start()
        total = int(load.pods_per_minute * load.seconds / 60) // load.group_size * load.group_size
        interval = 60.0 / load.pods_per_minute
        next_report = 60.0
        for index in range(total):
            due = origin + index * interval
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            began = time.monotonic()
            try:
                created = stack.api.create("pods", _pod(index, load), namespace=NAMESPACE)
                result.admission_ms.append((began - origin, 1000 * (time.monotonic() - began)))
                result.created += 1
                result.ungated += not gated(created)
            except APIError:
                result.refused += 1
            if began - origin >= next_report:
                next_report += 60.0
                progress(f"load: {result.created} pods in {began - origin:.0f} s, {len(observer.lag_ms)} groups "
                         f"released, controller RSS {rss_mib(controller.popen.pid)} MiB")
        result.achieved_per_minute = 60 * result.created / max(time.monotonic() - origin, 1e-9)
        result.groups = total // load.group_size
        try:
            wait_for(lambda: len(observer.lag_ms) >= result.groups, 120, "every group released")
        except TimeoutError as error:
            progress(f"load: {error}")
        result.groups_released = len(observer.lag_ms)
        result.lag_ms = list(observer.lag_ms)
        result.seconds = time.monotonic() - origin
        unsubscribe()
    finally:
        stop.set()
        stack.close()
    return result


def summary(result: Result) -> dict:
    admission = [ms for _, ms in result.admission_ms]
    lag = [ms for _, ms in result.lag_ms]
    per_minute = []
    minutes = int(result.seconds // 60) + 1
    for minute in range(minutes):
        window_a = [ms for t, ms in result.admission_ms if minute * 60 <= t < (minute + 1) * 60]
        window_l = [ms for t, ms in result.lag_ms if minute * 60 <= t < (minute + 1) * 60]
        if window_a or window_l:
            rss = {name: round(next((mib for t, mib in points if t >= (minute + 1) * 60), points[-1][1]), 1)
                   for name, points in result.rss.items()}
            per_minute.append({"minute": minute + 1, "pods": len(window_a),
                               "admission_p99_ms": round(percentile(window_a, 99), 1),
                               "lag_p99_ms": round(percentile(window_l, 99), 1), "rss_mib": rss})
    return {
        "created": result.created, "refused": result.refused, "ungated": result.ungated,
        "achieved_per_minute": round(result.achieved_per_minute),
        "admission_ms": {"p50": round(percentile(admission, 50), 1), "p99": round(percentile(admission, 99), 1),
                         "max": round(max(admission, default=float("nan")), 1)},
        "groups": result.groups, "groups_released": result.groups_released,
        "lag_ms": {"p50": round(percentile(lag, 50), 1), "p99": round(percentile(lag, 99), 1),
                   "max": round(max(lag, default=float("nan")), 1)},
        "per_minute": per_minute,
        "rss": {name: leak_verdict(points) for name, points in result.rss.items()},
    }
