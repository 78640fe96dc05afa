"""The autoscaled cluster (`gangkeeper bench autoscaling`): a few static GPU nodes beside a node group
that the emulated cluster-autoscaler (`sim.autoscaler`) grows and shrinks, and a trace of small jobs
and large ones that the static nodes cannot hold.

The cluster: `STATIC` nodes of 8 GPUs (the study's node shape, `study.run.Cluster`) and a node group
(`Pool`) of the same nodes, none at the start, up to `max_nodes`, each Ready `provisioning_seconds`
after the autoscaler asks for it; the autoscaler runs with cluster-autoscaler's defaults
(`sim.autoscaler.AutoscalerSettings`: a scan every 10 s; an empty node removed once unneeded for
10 min and 10 min after the last scale-up; bookings of 10 min).

The trace (`draw_jobs`, then `study.trace.trace` for Poisson arrivals): a `large_share` of the jobs,
drawn from the seed, are large — `LARGE_SIZES`, more GPUs than the static nodes hold (`large`) —
and the rest small (`SMALL_SIZES`, one node at most); durations log-normal (`DURATIONS`: median
30 min, clipped to [5 min, 4 h]); the offered load is counted against the most GPUs the cluster
can have (the static nodes and the group at its max). Jobs are PyTorchJobs, as in the study.

Policies (`POLICIES`, each a `study.run` policy replayed by `study.run.run_policy`):
  - `stock`: the kube-scheduler alone. Every pod is pending as soon as it exists, the autoscaler
    adds nodes for those that fit nowhere, and a large job may be bound in part while the rest
    of it waits for nodes the group's max no longer allows;
  - `gangkeeper`: the product with `--capacity-provisioning None` (its default): every member is
    gated until its whole group fits, and the autoscaler ignores gated pods, so nothing is added;
  - `gangkeeper-provisioning-request`: `--capacity-provisioning ProvisioningRequest`: a group
    waiting for capacity asks for its nodes, all or none (best-effort-atomic-scale-up);
  - `gangkeeper-placeholders`: `--capacity-provisioning Placeholders`: pause pods in the group's
    shape, which the autoscaler serves as pending pods, swapped for the members once all are bound.

Measured: per job, submission to all its workers first running together (`sim.accounting`) and the
GPU-seconds its pods held while it was partly placed (`study.metrics.Holdings`); over the nodes the
autoscaler added, their GPU-hours and those no job's pod requested (`study.metrics.AddedNodes`);
and, on every change, gangkeeper's invariants (`sim.invariants.Checker`, through `Invariants`).
`job_rows` and `autoscaling_figures` make the figures of it (pure).
"""

import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from sim.api import WatchEvent
from sim.invariants import WATCHED, Checker
from sim.names import GPU
from study.metrics import AddedNodes, percentile
from study.run import GANGKEEPER, NAMESPACE, Cluster, run_policy, spec_for
from study.trace import Draw, Job, LogNormal, offered_load, trace

POLICIES = ("stock", "gangkeeper", "gangkeeper-provisioning-request", "gangkeeper-placeholders")
STATIC = Cluster(nodes=3)
# (GPUs per job, share): small jobs fit one node; large ones need more GPUs than the static nodes hold.
SMALL_SIZES: tuple[tuple[int, float], ...] = ((1, 0.5), (2, 0.15), (4, 0.15), (8, 0.2))
LARGE_SIZES: tuple[tuple[int, float], ...] = ((32, 0.6), (64, 0.4))
LARGE_SHARE = 0.2
DURATIONS = LogNormal(median=1800.0, sigma=1.0, low=300.0, high=4 * 3600.0)
LOAD = 0.5  # of the most GPUs the cluster can have
DRAIN_SECONDS = 8 * 3600.0  # past the last arrival: the longest job (4 h) and the backlog fit in it
REACTION_SECONDS = 30.0  # the invariants' allowance for a controller that sees a deadline a resync late


@dataclass(frozen=True)
class Pool:
    """The autoscaled node group: nodes of the static nodes' shape, none at the start."""

    name: str = "gpu-pool"
    max_nodes: int = 16
    provisioning_seconds: float = 90.0

    def node_group(self, cluster: Cluster) -> dict:
        """The group as a `sim.spec` nodeGroups entry."""
        return {"name": self.name, "min": 0, "max": self.max_nodes, "provisioningSeconds": self.provisioning_seconds,
                "gpusPerNode": cluster.gpus_per_node, "cpu": str(cluster.gpus_per_node * cluster.cpu_per_gpu * 2),
                "memory": f"{cluster.gpus_per_node * cluster.memory_gi_per_gpu * 2}Gi"}

    def gpus(self, cluster: Cluster) -> int:
        return self.max_nodes * cluster.gpus_per_node


def capacity(cluster: Cluster, pool: Pool) -> int:
    """The most GPUs the cluster can have: its static nodes and the group at its max."""
    return cluster.gpus + pool.gpus(cluster)


def large(job: Job, cluster: Cluster) -> bool:
    """More GPUs than the static nodes hold: it runs only on nodes the autoscaler adds."""
    return job.gpus > cluster.gpus


def draw_jobs(jobs: int, seed: int, large_share: float = LARGE_SHARE) -> Draw:
    """Sizes, durations and unit-rate gaps of `jobs` jobs, round(`large_share` × jobs) of them large
    (a uniform sample of positions), all drawn from `seed` by a generator of their own."""
    if not 0 <= large_share <= 1:
        raise ValueError(f"large_share must be within [0, 1], not {large_share}")
    rng = random.Random(f"autoscaling/{seed}")
    chosen = set(rng.sample(range(jobs), round(large_share * jobs)))
    gpus = []
    for index in range(jobs):
        sizes = LARGE_SIZES if index in chosen else SMALL_SIZES
        gpus.append(rng.choices([size for size, _ in sizes], weights=[share for _, share in sizes])[0])
    durations = tuple(round(DURATIONS.draw(rng), 1) for _ in range(jobs))
    gaps = tuple(rng.expovariate(1.0) for _ in range(jobs))
    return Draw(tuple(gpus), durations, gaps)


# --- measuring ------------------------------------------------------------------------------------

class Invariants:
    """`sim.invariants.Checker` as a component of the replay: every change to the objects it checks,
    in the order the API server committed them, and a tick at every moment the cluster settles. A
    failure of the checker is recorded as an `unchecked` violation, as `sim.invariants.Watch` does."""

    resources = WATCHED

    def __init__(self, checker: Checker):
        self.checker = checker

    def observe(self, event: WatchEvent, now: float) -> None:
        try:
            self.checker.observe(event.resource, event.type, event.object, now)
        except Exception as error:  # noqa: BLE001 - reported as a violation: it could hide a break
            self.checker.unchecked(now, f"could not check {event.type} {event.resource} "
                                        f"{event.object.get('metadata', {}).get('name')}: {error!r}")

    def step(self, now: float) -> bool:
        self.checker.tick(now)
        return False

    def next_due(self) -> float | None:
        return None


def job_rows(jobs: Sequence[Job], measured: Sequence[dict], cluster: Cluster) -> list[dict]:
    """One row per job of the trace (placeholders, which the cluster's accounting sees as pods of
    their own, are no job): its GPUs, whether it is large, and what `run_policy` measured."""
    by_key = {row["job"]: row for row in measured}
    rows = []
    for job in jobs:
        key = f"PyTorchJob {NAMESPACE}/{job.name}"
        row = by_key[key]
        rows.append({"job": key, "gpus": job.gpus, "large": large(job, cluster), "submitted": row["submitted"],
                     "started": row["started"], "finished": row["finished"], "partial": row["partial"]})
    return rows


def _percentile_to_start(times: list[float], fraction: float) -> float | None:
    value = percentile(times, fraction)
    return None if value is None or math.isinf(value) else value


def start_figures(rows: Sequence[dict]) -> dict:
    """Over some jobs' rows: how many, started, never started (by the horizon), completed, and the
    time from submission to start at p50 and p95 (nearest rank) over all of them, a job that never
    started counting as later than any that did: None when the rank falls on one that never did."""
    times = [row["started"] - row["submitted"] if row["started"] is not None else math.inf for row in rows]
    started = sum(1 for time in times if not math.isinf(time))
    return {"jobs": len(rows), "started": started, "never_started": len(rows) - started,
            "completed": sum(1 for row in rows if row["finished"] is not None),
            "p50_to_start_s": _percentile_to_start(times, 0.5), "p95_to_start_s": _percentile_to_start(times, 0.95)}


def autoscaling_figures(rows: Sequence[dict], added: dict) -> dict:
    """`start_figures` of the large jobs, the small ones and all; GPU-hours the jobs held while
    partly placed (`Holdings`' partial); and `added`, what `AddedNodes.snapshot` measured."""
    return {"large": start_figures([row for row in rows if row["large"]]),
            "small": start_figures([row for row in rows if not row["large"]]),
            "all": start_figures(rows), "partial_gpu_hours": sum(row["partial"] for row in rows) / 3600,
            "added": dict(added)}


# --- replaying ------------------------------------------------------------------------------------

def replay_once(policy: str, jobs: Sequence[Job], cluster: Cluster, pool: Pool, drain: float) -> dict:
    """One replay under `policy` on the static nodes and the pool: its figures (`autoscaling_figures`),
    `run_policy`'s counters, and the invariants broken: by kind, at how many distinct moments, and
    the first few in words, timed from the first arrival."""
    spec = spec_for(jobs, cluster, node_groups=[pool.node_group(cluster)])
    bind_timeout = GANGKEEPER.get(policy, GANGKEEPER["gangkeeper"]).bind_timeout_seconds
    added, invariants = AddedNodes(), Invariants(Checker(bind_timeout=bind_timeout, reaction=REACTION_SECONDS))
    outcome = run_policy(policy, jobs, spec, cluster, drain, watchers=[added, invariants])
    invariants.checker.finish(outcome["horizon"])
    broken, start = invariants.checker.violations, outcome["horizon"] - jobs[-1].submit - drain
    return {"policy": policy, "counters": outcome["counters"],
            "figures": autoscaling_figures(job_rows(jobs, outcome["jobs"], cluster), added.snapshot(outcome["horizon"])),
            "violations": dict(Counter(violation.kind for violation in broken)),
            "violation_moments": len({violation.at for violation in broken}),
            "violations_shown": [f"{violation.kind} at {violation.at - start:.1f} s: {violation.message}"
                                 for violation in broken[:5]]}


def run(jobs: int = 300, seed: int = 20190710, load: float = LOAD, large_share: float = LARGE_SHARE,
        horizon: float | None = None, *, cluster: Cluster = STATIC, pool: Pool = Pool(),
        policies_run: Sequence[str] = POLICIES, progress: Callable[[str], None] = lambda line: None) -> dict:
    """One trace on the autoscaled cluster, replayed under each policy; `horizon`: seconds the replay
    runs past the last arrival (default `DRAIN_SECONDS`)."""
    unknown = [policy for policy in policies_run if policy not in POLICIES]
    if unknown:
        raise ValueError(f"policies {unknown} are not among {', '.join(POLICIES)}")
    drain = DRAIN_SECONDS if horizon is None else float(horizon)
    most = capacity(cluster, pool)
    replay = trace(draw_jobs(jobs, seed, large_share), load, most)
    big = [job for job in replay if large(job, cluster)]
    results = {"setup": {"jobs": jobs, "seed": seed, "load": load, "large_share": large_share,
                         "offered_load": round(offered_load(replay, most), 3), "drain_seconds": drain,
                         "arrival_span_s": replay[-1].submit, "cluster": asdict(cluster), "static_gpus": cluster.gpus,
                         "pool": asdict(pool), "most_gpus": most, "gpu_resource": GPU,
                         "large_jobs": len(big), "large_sizes": dict(sorted(Counter(job.gpus for job in big).items())),
                         "small_sizes": dict(sorted(Counter(job.gpus for job in replay if not large(job, cluster))
                                                    .items())),
                         "large_gpu_share": (sum(job.gpu_seconds for job in big)
                                             / sum(job.gpu_seconds for job in replay))},
               "runs": []}
    for policy in policies_run:
        progress(f"autoscaling: {policy}, {len(replay)} jobs ...")
        outcome = replay_once(policy, replay, cluster, pool, drain)
        progress(f"autoscaling: {policy}: {outcome['counters']['wall_seconds']} s wall")
        results["runs"].append(outcome)
    return results
