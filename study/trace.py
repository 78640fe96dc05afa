"""Synthetic job traces for the study: pure functions of a seed, no I/O, no clock.

Job sizes (GPUs per job) follow the shape reported for Microsoft's Philly cluster — Jeon et al.,
"Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training Workloads", USENIX ATC 2019,
and its public trace (github.com/msr-fiddle/philly-traces): most jobs use one GPU, with a tail of
multi-GPU and multi-node jobs. The shares in `PHILLY_LIKE_SIZES` are OUR APPROXIMATION of that
shape, not figures copied from the paper: the published per-size table could not be retrieved
while this was written. Re-derive them from `cluster_job_log` before quoting them as Philly's.

Durations are log-normal (`DURATIONS`: median 30 min, σ 1.2 — mean ≈ 1 h), independent of size,
clipped to [1 min, 12 h].
Arrivals are Poisson. One trace is drawn per seed — sizes, durations and the exponential gaps
between arrivals — and each offered load only rescales the gaps, so every load replays the same
jobs in the same order and the loads differ in nothing but arrival rate.

Offered load = Σ (GPUs × duration) over the jobs ÷ (arrival span × cluster GPUs): the GPU-seconds
demanded per second of arrivals, per GPU of the cluster.

A priority mix (`with_priorities`) puts a fixed share of the jobs in the PriorityClass `HIGH` and
the rest in `LOW`; which jobs is drawn from the seed alone, independently of sizes, durations and
arrivals, so every load puts the same jobs in the same class.
"""

import math
import random
from dataclasses import dataclass, replace

# (GPUs per job, share of jobs). Approximation of the Philly shape; see the module docstring.
PHILLY_LIKE_SIZES: tuple[tuple[int, float], ...] = (
    (1, 0.72), (2, 0.08), (4, 0.08), (8, 0.07), (16, 0.03), (32, 0.015), (64, 0.005))


@dataclass(frozen=True)
class LogNormal:
    """exp(N(ln median, sigma²)), clipped to [low, high] seconds."""

    median: float = 1800.0
    sigma: float = 1.2
    low: float = 60.0
    high: float = 12 * 3600.0

    def draw(self, rng: random.Random) -> float:
        return min(self.high, max(self.low, rng.lognormvariate(math.log(self.median), self.sigma)))


DURATIONS = LogNormal()
WHOLE_NODE_FROM = 8  # jobs of 8 GPUs or more run as 8-GPU workers; smaller ones as 1-GPU workers


@dataclass(frozen=True)
class PriorityClass:
    name: str
    value: int  # the pods' spec.priority; both classes preempt lower priorities (the default policy)


HIGH = PriorityClass("high", 1000)
LOW = PriorityClass("low", 100)
PRIORITY_CLASSES = {c.name: c for c in (HIGH, LOW)}


@dataclass(frozen=True)
class Job:
    name: str
    submit: float  # seconds after the start of the run
    gpus: int
    duration: float  # seconds of training progress, counted only while all workers run
    priority_class: str | None = None  # a name in PRIORITY_CLASSES; None: no class (priority 0)

    @property
    def pods(self) -> int:
        return self.gpus // self.gpus_per_pod

    @property
    def gpus_per_pod(self) -> int:
        return 8 if self.gpus >= WHOLE_NODE_FROM else 1

    @property
    def gpu_seconds(self) -> float:
        return self.gpus * self.duration


@dataclass(frozen=True)
class Draw:
    """The load-independent part of a trace: sizes, durations and unit-rate arrival gaps."""

    gpus: tuple[int, ...]
    durations: tuple[float, ...]
    gaps: tuple[float, ...]


def draw(jobs: int, seed: int, cluster_gpus: int, sizes=PHILLY_LIKE_SIZES, durations: LogNormal = DURATIONS) -> Draw:
    """`jobs` jobs; sizes larger than the cluster are left out of the distribution (renormalised)."""
    fitting = [(size, share) for size, share in sizes if size <= cluster_gpus]
    if not fitting:
        raise ValueError(f"no job size in {sizes} fits a cluster of {cluster_gpus} GPUs")
    rng = random.Random(seed)
    gpus = tuple(rng.choices([s for s, _ in fitting], weights=[w for _, w in fitting], k=jobs))
    lengths = tuple(round(durations.draw(rng), 1) for _ in range(jobs))
    gaps = tuple(rng.expovariate(1.0) for _ in range(jobs))
    return Draw(gpus, lengths, gaps)


def trace(drawn: Draw, load: float, cluster_gpus: int) -> list[Job]:
    """The jobs of `drawn` arriving as a Poisson process whose offered load is `load`.

    Arrival rate λ = load × cluster GPUs ÷ mean GPU-seconds per job of this draw; the first job
    arrives at 0. The gaps are scaled to a mean of exactly 1/λ (a Poisson process conditioned on
    its span), so that the offered load of the trace is `load`, not `load` ± sampling noise.
    """
    if load <= 0:
        raise ValueError(f"load must be above 0, not {load}")
    demand = sum(g * d for g, d in zip(drawn.gpus, drawn.durations)) / len(drawn.gpus)
    rate = load * cluster_gpus / demand
    later = drawn.gaps[1:]
    unit = sum(later) / len(later) if later else 1.0
    jobs, moment = [], 0.0
    for index, (gpus, duration, gap) in enumerate(zip(drawn.gpus, drawn.durations, drawn.gaps)):
        if index:
            moment += gap / unit / rate
        jobs.append(Job(f"job-{index:05d}", round(moment, 3), gpus, duration))
    return jobs


def offered_load(jobs: list[Job], cluster_gpus: int) -> float:
    """Σ GPU-seconds ÷ (arrival span × cluster GPUs); the span counts one mean gap past the last
    arrival, as n arrivals take n gaps at the arrival rate."""
    if len(jobs) < 2:
        return 0.0
    span = jobs[-1].submit * len(jobs) / (len(jobs) - 1)
    return sum(job.gpu_seconds for job in jobs) / (span * cluster_gpus)


def size_shares(jobs: list[Job]) -> dict[int, float]:
    """Share of jobs per size, as drawn (to set beside the target shares)."""
    counts: dict[int, int] = {}
    for job in jobs:
        counts[job.gpus] = counts.get(job.gpus, 0) + 1
    return {size: counts[size] / len(jobs) for size in sorted(counts)}


def with_priorities(jobs: list[Job], high_share: float, seed: int) -> list[Job]:
    """The jobs with exactly round(`high_share` × len(jobs)) of them in `HIGH` and the rest in `LOW`.

    The high ones are a uniform sample of positions in the trace, drawn from `seed` by a generator
    of their own (not the one that drew sizes, durations and gaps), so they are the same jobs at
    every load and the mix is independent of size, duration and arrival.
    """
    if not 0 <= high_share <= 1:
        raise ValueError(f"high_share must be within [0, 1], not {high_share}")
    high = set(random.Random(f"priorities/{seed}").sample(range(len(jobs)), round(high_share * len(jobs))))
    return [replace(job, priority_class=(HIGH if index in high else LOW).name) for index, job in enumerate(jobs)]


def priority_shares(jobs: list[Job]) -> dict[str, float]:
    """Share of jobs per PriorityClass name ("" for jobs without one), as drawn."""
    counts: dict[str, int] = {}
    for job in jobs:
        name = job.priority_class or ""
        counts[name] = counts.get(name, 0) + 1
    return {name: counts[name] / len(jobs) for name in sorted(counts)}
