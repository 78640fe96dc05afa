"""What a run cost, measured from the pods alone, the same way under every policy.

`Holdings` is a cluster component that watches pods and splits, per training run (one workload,
`sim.training.run_key`), the GPU-seconds its pods hold into three kinds:
  - useful: all `size` members run, so the run trains (what `sim.accounting` calls useful);
  - partial: some members are bound to nodes and others are not — an incomplete group holding
    GPUs that nothing can use, the waste (and, when it lasts forever, the deadlock) gang
    scheduling exists to prevent;
  - start-up: every member is bound but not all of them run yet (the kubelet's start delay) —
    the same few seconds per job under every policy, reported apart so that it is not
    mistaken for partial placement.
partial + start-up is what `sim.accounting.Accounting` reports as waiting GPU-seconds.

`summarise` turns the per-job rows of a run into the study's figures; it is pure.
"""

import math
from dataclasses import dataclass, field
from statistics import mean

from sim.api import WatchEvent
from sim.names import PODS
from sim.training import member, run_key, world_size


@dataclass
class _Run:
    size: int
    members: dict = field(default_factory=dict)  # pod key → sim.training.Member
    since: float = 0.0
    useful: float = 0.0
    partial: float = 0.0
    startup: float = 0.0

    def accrue(self, now: float) -> None:
        elapsed, self.since = now - self.since, now
        if elapsed <= 0:
            return
        held = sum(m.gpus for m in self.members.values() if m.holding)
        if not held:
            return
        bound = sum(1 for m in self.members.values() if m.holding)
        running = sum(1 for m in self.members.values() if m.running)
        if running >= self.size:
            self.useful += float(held) * elapsed
        elif bound >= self.size:
            self.startup += float(held) * elapsed
        else:
            self.partial += float(held) * elapsed

    def state(self) -> str:
        bound = sum(1 for m in self.members.values() if m.holding)
        if not bound:
            return "unplaced"
        return "partial" if bound < self.size else "placed"


class Holdings:
    resources = (PODS,)

    def __init__(self):
        self.runs: dict[str, _Run] = {}

    def observe(self, event: WatchEvent, now: float) -> None:
        pod = event.object
        key = run_key(PODS, pod)
        run = self.runs.get(key)
        if run is None:
            run = self.runs[key] = _Run(world_size(pod), since=now)
        run.accrue(now)
        name = f"{pod['metadata'].get('namespace', '')}/{pod['metadata']['name']}"
        if event.type == "DELETED":
            run.members.pop(name, None)
        else:
            run.members[name] = member(pod, run.members.get(name))

    def step(self, now: float) -> bool:
        return False

    def next_due(self) -> float | None:
        return None

    def snapshot(self, now: float) -> dict[str, dict]:
        """Per run: GPU-seconds of each kind up to `now`, and whether it is placed at `now`."""
        rows = {}
        for key, run in self.runs.items():
            run.accrue(now)
            rows[key] = {"useful": run.useful, "partial": run.partial, "startup": run.startup,
                         "state": run.state()}
        return rows


def percentile(values: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile: the smallest value with at least `fraction` of values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def summarise(jobs: list[dict], *, cluster_gpus: int, window: tuple[float, float], horizon: float,
              useful_in_window: float) -> dict:
    """The study's figures for one policy at one load.

    `jobs`: one row per job with `submitted`, `started`, `finished` (None when it did not),
    `partial`, `startup`, `useful` GPU-seconds up to the horizon and `state` at the horizon.
    `useful_in_window`: useful GPU-seconds accrued within `window` (the arrival span after a
    warm-up, where the offered load applies); utilisation is that over the window's GPU-seconds.
    """
    started = [j for j in jobs if j["started"] is not None]
    finished = [j for j in jobs if j["finished"] is not None]
    unfinished = [j for j in jobs if j["finished"] is None]
    delays = [j["started"] - j["submitted"] for j in started]
    first_submit = min(j["submitted"] for j in jobs)
    span = window[1] - window[0]
    return {
        "jobs": len(jobs),
        "never_started": len(jobs) - len(started),
        "not_completed": len(unfinished),
        "stuck_partial": sum(1 for j in unfinished if j["state"] == "partial"),
        "partial_gpu_hours": sum(j["partial"] for j in jobs) / 3600,
        "startup_gpu_hours": sum(j["startup"] for j in jobs) / 3600,
        "useful_gpu_hours": sum(j["useful"] for j in jobs) / 3600,
        "utilisation": useful_in_window / (cluster_gpus * span) if span > 0 else None,
        "mean_delay_s": mean(delays) if delays else None,
        "p95_delay_s": percentile(delays, 0.95),
        "makespan_s": (max(j["finished"] for j in finished) - first_submit) if finished else None,
        "all_completed": not unfinished,
        "horizon_s": horizon - first_submit,
    }
