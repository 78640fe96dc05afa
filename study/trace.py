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
"""

import math
import random
from dataclasses import dataclass

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
class Job:
    name: str
    submit: float  # seconds after the start of the run
    gpus: int
    duration: float  # seconds of training progress, counted only while all workers run

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
