"""The priority mix (`gangkeeper bench priorities`): one trace of the study with a share of its
jobs in a high PriorityClass, replayed at one offered load under each policy, every one of them
with the kube-scheduler's own pod preemption.

The trace is the study's (`study.trace.draw`, same seed: the same jobs as the main study's at
the same load) with `study.trace.with_priorities` putting `HIGH_SHARE` of the jobs in `high`
(priority 1000) and the rest in `low` (100); both classes may preempt lower priorities.
Policies (`POLICIES`):
  - `stock`: the kube-scheduler alone; its DefaultPreemption deletes low-priority pods, one
    node's worth at a time, to place a high-priority pod;
  - `quota`: the quota-only gate (`study.policies.QuotaGate`), releasing high-priority jobs
    first; it never preempts, the kube-scheduler beneath it does as under `stock`;
  - `gangkeeper`: the product with its defaults — workload-aware preemption of whole
    lower-priority jobs (suspended, resumed after the rollback backoff);
  - `gangkeeper-no-preemption`: the product with `Settings(preemption=Preempting.NEVER)`: high
    priority only orders the queue.
Each replay is `study.run.run_policy` with `study.metrics.Preemptions` watching beside
`Holdings`; `job_rows` joins what they measured to the trace's jobs (pure). The policies of
`REPLAYED_TWICE` are replayed once more from the same trace.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict

from study.metrics import Preemptions, by_class
from study.run import DRAIN_SECONDS, NAMESPACE, Cluster, run_policy, spec_for
from study.trace import HIGH, LOW, Job, draw, offered_load, priority_shares, trace, with_priorities

POLICIES = ("stock", "quota", "gangkeeper", "gangkeeper-no-preemption")
# Replayed a second time, to show that one replay can be trusted: gangkeeper's preemption breaks
# ties between equally cheap victims (and its queue, between groups first seen in one turn) by
# names and uids, which the emulated API server draws from `policies.CLUSTER_SEED`; while they
# were random, 2 of 7 full-size replays differed from the others.
REPLAYED_TWICE = ("gangkeeper",)
LOAD = 0.9  # the study's middle load: busy enough to queue, not overloaded
HIGH_SHARE = 0.2
CLASSES = (HIGH.name, LOW.name)


def job_rows(jobs: Sequence[Job], measured: Sequence[dict], preempted: Mapping[str, dict]) -> list[dict]:
    """One row per job of the trace: its class, GPUs and duration, what `run_policy` measured
    (`submitted`, `started`, `finished`, `useful`) and what `Preemptions.snapshot` counted."""
    by_key = {row["job"]: row for row in measured}
    rows = []
    for job in jobs:
        key = f"PyTorchJob {NAMESPACE}/{job.name}"
        row = by_key[key]
        hit = preempted.get(key, {"preemptions": 0, "interruptions": 0, "at_stake": 0.0, "other_interruptions": 0})
        rows.append({"job": key, "class": job.priority_class, "gpus": job.gpus, "duration": job.duration,
                     "submitted": row["submitted"], "started": row["started"], "finished": row["finished"],
                     "useful": row["useful"], **hit})
    return rows


def replay_once(policy: str, replay: Sequence[Job], spec: dict, cluster: Cluster, drain: float) -> dict:
    """One replay under `policy`: the study's figures, the controller's counters, the figures per
    PriorityClass (`by_class`) and the interruptions nothing explains."""
    preemptions = Preemptions()
    outcome = run_policy(policy, replay, spec, cluster, drain, watchers=[preemptions])
    rows = job_rows(replay, outcome["jobs"], preemptions.snapshot())
    return {"policy": policy, "figures": outcome["figures"], "counters": outcome["counters"],
            "classes": {name: by_class([row for row in rows if row["class"] == name]) for name in CLASSES},
            "other_interruptions": sum(row["other_interruptions"] for row in rows)}


def run(jobs: int = 2000, seed: int = 20190710, load: float = LOAD, high_share: float = HIGH_SHARE,
        horizon: float | None = None, *, cluster: Cluster = Cluster(), policies_run: Sequence[str] = POLICIES,
        progress: Callable[[str], None] = lambda line: None) -> dict:
    """One trace with the priority mix, replayed under each policy, and under each policy of
    `REPLAYED_TWICE` once more (`repeats`); `horizon` as in `study.run.run`."""
    drain = DRAIN_SECONDS if horizon is None else float(horizon)
    replay = with_priorities(trace(draw(jobs, seed, cluster.gpus), load, cluster.gpus), high_share, seed)
    spec = spec_for(replay, cluster)
    results = {"setup": {"jobs": jobs, "seed": seed, "load": load, "high_share": high_share,
                         "offered_load": round(offered_load(replay, cluster.gpus), 3),
                         "shares": priority_shares(replay), "classes": {c.name: c.value for c in (HIGH, LOW)},
                         "drain_seconds": drain, "cluster": asdict(cluster), "cluster_gpus": cluster.gpus},
               "runs": [], "repeats": []}
    schedule = [(policy, "runs") for policy in policies_run]
    schedule += [(policy, "repeats") for policy in REPLAYED_TWICE if policy in policies_run]
    for policy, into in schedule:
        again = " again" if into == "repeats" else ""
        progress(f"priorities: {policy}{again}, {len(replay)} jobs at load {load:g} ...")
        outcome = replay_once(policy, replay, spec, cluster, drain)
        progress(f"priorities: {policy}{again}: {outcome['counters']['wall_seconds']} s wall")
        results[into].append(outcome)
    return results
