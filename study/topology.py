"""The topology run (`gangkeeper bench topology`): the study's trace on a cluster whose nodes carry
zone and block labels, with a share of the multi-node jobs declaring that they want one block.

The trace is the study's (`study.trace.draw` and `trace`, same seed and load as the priority mix:
the same jobs and arrivals as the main study's row for load 0.9). The cluster (`Layout`) is the
study's 64 nodes × 8 GPUs, labelled in 2 zones (`topology.kubernetes.io/zone`: zone-0, zone-1) of
32 nodes, each of 4 blocks (`cloud.google.com/gce-topology-block`: gce-topology-block-0 … -7) of
8 nodes: a block holds 64 GPUs, the largest job of the trace, so that every multi-node job can fit
one block but a 64-GPU job needs a whole one empty and a 32-GPU job half of one.

A multi-node job is one of more GPUs than a node has (16, 32 and 64 GPUs: 2, 4 and 8 workers of
8 GPUs). `declaring` draws `SHARE` of them — a uniform sample drawn from the seed alone, as
`study.trace.with_priorities` draws its classes — and only those carry a rule, the rest of the
trace being the same in every replay. Policies (`POLICIES`: the `study.run` policy replayed and
the rule the sample declares, as `gangkeeper.io/topology-*` on its pod templates):
  - `stock`: the kube-scheduler alone (it does not read the annotations; none are written);
  - `gangkeeper`: the product with its defaults and no rule on any job: the controller's
    cluster-level preference (`planning.plans.Topology`: one zone when the group fits there; no rack
    label is configured by default), then its packing (partly used nodes first, fewest nodes);
  - `gangkeeper-preferred`: the sample declares `topology-preferred: <block label>`: one block
    when the group fits in one now, else as few blocks as hold it;
  - `gangkeeper-required`: the sample declares `topology-required: <block label>`: it waits
    until one block holds it.

Measured per job (`Placements`, a cluster component watching pods): the nodes its workers ran
on when all of them first ran together, so from where the pods actually bound; `job_rows` joins
that, read through the node labels, to the trace and to `study.run.run_policy`'s rows, and
`topology_figures` makes the run's figures of it (pure): the share of multi-node jobs whose
workers all ran within one block (and one zone), the queueing delay (mean, p95) of all jobs, of
the multi-node ones, of the sample and of the other multi-node jobs, and jobs completed.
Utilisation and the rest are `study.run.run_policy`'s (`study.metrics.summarise`).
"""

import random
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from statistics import mean

from gangkeeper.names import ZONE_LABEL
from sim.api import WatchEvent
from sim.names import PODS
from sim.spec import node_manifests
from sim.training import run_key, world_size
from study.metrics import percentile
from study.run import DRAIN_SECONDS, NAMESPACE, Cluster, run_policy, spec_for
from study.trace import Job, draw, offered_load, trace

BLOCK_LABEL = "cloud.google.com/gce-topology-block"
LOAD = 0.9  # the priority mix's load (`study.priorities.LOAD`): busy enough to queue, not overloaded
SHARE = 0.5  # of the multi-node jobs, those that declare a rule
# policy → (the `study.run` policy replayed, the rule the sample declares: a `sim.spec` workload
# topology key, or None for no rule on any job)
POLICIES: dict[str, tuple[str, str | None]] = {
    "stock": ("stock", None),
    "gangkeeper": ("gangkeeper", None),
    "gangkeeper-preferred": ("gangkeeper", "preferred"),
    "gangkeeper-required": ("gangkeeper", "required"),
}


@dataclass(frozen=True)
class Layout:
    """How the cluster's nodes are labelled: consecutive nodes share a zone of `zone_nodes` and,
    inside it, a block of `block_nodes` (`sim.spec` node-group topology levels)."""

    zone_nodes: int = 32
    block_nodes: int = 8
    zone_label: str = ZONE_LABEL
    block_label: str = BLOCK_LABEL

    def levels(self) -> list[dict]:
        return [{"label": self.zone_label, "nodes": self.zone_nodes},
                {"label": self.block_label, "nodes": self.block_nodes}]


def multi_node(job: Job, cluster: Cluster) -> bool:
    """More GPUs than one node has: its workers cannot all share a node."""
    return job.gpus > cluster.gpus_per_node


def declaring(jobs: Sequence[Job], share: float, seed: int, cluster: Cluster, layout: Layout) -> frozenset[str]:
    """Names of round(`share` × n) of the n multi-node jobs that fit one block, a uniform sample of
    them drawn from `seed` by a generator of its own (so the same jobs at every load and for
    every rule)."""
    if not 0 <= share <= 1:
        raise ValueError(f"share must be within [0, 1], not {share}")
    block_gpus = layout.block_nodes * cluster.gpus_per_node
    eligible = [job.name for job in jobs if multi_node(job, cluster) and job.gpus <= block_gpus]
    return frozenset(random.Random(f"topology/{seed}").sample(eligible, round(share * len(eligible))))


def topology_spec(jobs: Sequence[Job], cluster: Cluster, layout: Layout | None = None,
                  rules: Mapping[str, Mapping[str, str]] | None = None, nodes: Sequence[dict] | None = None) -> dict:
    """`study.run.spec_for`'s scenario with the nodes labelled by `layout` and, for each job named
    in `rules`, its `sim.spec` workload topology (e.g. {"required": BLOCK_LABEL}). `nodes`: the
    spec's node groups instead of the cluster's (a test's hand-made topology)."""
    return spec_for(jobs, cluster, node_topology=layout.levels() if layout else None, rules=rules, nodes=nodes)


# --- measuring ------------------------------------------------------------------------------------

@dataclass
class _Placed:
    size: int
    members: dict[str, tuple[str | None, bool]] = field(default_factory=dict)  # pod key → (node, running)
    together: bool = False
    placements: list[tuple[str, ...]] = field(default_factory=list)  # nodes, each time all ran together

    def change(self, key: str, now: tuple[str | None, bool] | None) -> None:
        if now is None:
            self.members.pop(key, None)
        else:
            self.members[key] = now
        running = [node for node, is_running in self.members.values() if is_running]
        if len(running) >= self.size and not self.together:
            self.placements.append(tuple(sorted(node for node in running if node)))
        self.together = len(running) >= self.size


class Placements:
    """Per training run (`sim.training.run_key`): the nodes its pods ran on, each time all `size`
    of them began to run together (a pod runs once it is bound and its phase is Running, until it
    is marked for deletion)."""

    resources = (PODS,)

    def __init__(self):
        self.runs: dict[str, _Placed] = {}

    def observe(self, event: WatchEvent, now: float) -> None:
        pod = event.object
        key = run_key(PODS, pod)
        run = self.runs.get(key)
        if run is None:
            run = self.runs[key] = _Placed(world_size(pod))
        name = f"{pod['metadata'].get('namespace', '')}/{pod['metadata']['name']}"
        if event.type == "DELETED":
            run.change(name, None)
            return
        running = (pod.get("status") or {}).get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")
        run.change(name, ((pod.get("spec") or {}).get("nodeName"), running))

    def step(self, now: float) -> bool:
        return False

    def next_due(self) -> float | None:
        return None

    def snapshot(self) -> dict[str, list[tuple[str, ...]]]:
        """Per run that ever ran together: its placements, in order."""
        return {key: list(run.placements) for key, run in self.runs.items() if run.placements}


def spanned(nodes: Collection[str], labels: Mapping[str, Mapping[str, str]], label: str) -> int:
    """Domains of `label` the nodes lie in; a node without the label is a domain of its own."""
    return len({labels.get(node, {}).get(label, f"\0{node}") for node in nodes})


def job_rows(jobs: Sequence[Job], measured: Sequence[dict], placements: Mapping[str, Sequence[Sequence[str]]],
             labels: Mapping[str, Mapping[str, str]], layout: Layout, cluster: Cluster,
             declared: Collection[str]) -> list[dict]:
    """One row per job of the trace: its GPUs, whether it is multi-node and declares a rule, what
    `run_policy` measured (`submitted`, `started`, `finished`) and, from its first placement, the
    nodes, blocks and zones it ran in (None when it never ran with all its workers)."""
    by_key = {row["job"]: row for row in measured}
    rows = []
    for job in jobs:
        key = f"PyTorchJob {NAMESPACE}/{job.name}"
        row = by_key[key]
        placed = placements.get(key) or ()
        first = placed[0] if placed else None
        rows.append({"job": key, "gpus": job.gpus, "multi_node": multi_node(job, cluster),
                     "declaring": job.name in declared, "submitted": row["submitted"], "started": row["started"],
                     "finished": row["finished"], "placements": len(placed),
                     "nodes": None if first is None else len(first),
                     "blocks": None if first is None else spanned(first, labels, layout.block_label),
                     "zones": None if first is None else spanned(first, labels, layout.zone_label)})
    return rows


def _within_one(rows: Sequence[dict], key: str) -> int:
    return sum(1 for row in rows if row[key] == 1)


def subset_figures(rows: Sequence[dict]) -> dict:
    """Figures over some jobs' rows (`job_rows`): how many, completed, queueing delay (submission to
    all workers first running together) mean and p95 over those that started, and over those
    placed (ran with all their workers): how many and what share of them ran within one block and
    within one zone, the mean blocks spanned, and how many were placed more than once."""
    delays = [row["started"] - row["submitted"] for row in rows if row["started"] is not None]
    blocks = [row["blocks"] for row in rows if row["blocks"] is not None]
    in_block, in_zone = _within_one(rows, "blocks"), _within_one(rows, "zones")
    return {"jobs": len(rows), "completed": sum(1 for row in rows if row["finished"] is not None),
            "placed": len(blocks), "mean_delay_s": mean(delays) if delays else None,
            "p95_delay_s": percentile(delays, 0.95), "in_one_block": in_block, "in_one_zone": in_zone,
            "within_one_block": in_block / len(blocks) if blocks else None,
            "within_one_zone": in_zone / len(blocks) if blocks else None,
            "mean_blocks": mean(blocks) if blocks else None,
            "placed_again": sum(1 for row in rows if row["placements"] > 1)}


def topology_figures(rows: Sequence[dict]) -> dict[str, dict]:
    """`subset_figures` of every job, the multi-node ones, the sample that declares a rule (in
    every policy, the same jobs: those that declare it where one is declared) and the other
    multi-node jobs."""
    multi = [row for row in rows if row["multi_node"]]
    return {"all": subset_figures(rows), "multi_node": subset_figures(multi),
            "declaring": subset_figures([row for row in multi if row["declaring"]]),
            "other_multi_node": subset_figures([row for row in multi if not row["declaring"]])}


# --- replaying ------------------------------------------------------------------------------------

def rules_for(policy: str, sample: Collection[str], layout: Layout) -> dict[str, dict[str, str]]:
    """The workload topology each job of `sample` declares under `policy` (none for a policy
    without a rule)."""
    rule = POLICIES[policy][1]
    return {} if rule is None else {name: {rule: layout.block_label} for name in sample}


def replay_once(policy: str, replay: Sequence[Job], cluster: Cluster, layout: Layout, sample: Collection[str],
                drain: float, *, nodes: Sequence[dict] | None = None) -> dict:
    """One replay under `policy`: `run_policy`'s figures and counters, and the topology figures
    (`topology_figures`) of the jobs of `sample`, which declare the policy's rule; `nodes` as in
    `topology_spec`."""
    spec = topology_spec(replay, cluster, layout, rules_for(policy, sample, layout), nodes)
    placements = Placements()
    outcome = run_policy(POLICIES[policy][0], replay, spec, cluster, drain, watchers=[placements])
    labels = {node["metadata"]["name"]: node["metadata"].get("labels") or {} for node in node_manifests(spec)}
    rows = job_rows(replay, outcome["jobs"], placements.snapshot(), labels, layout, cluster, sample)
    return {"policy": policy, "figures": outcome["figures"], "counters": outcome["counters"],
            "topology": topology_figures(rows)}


def run(jobs: int = 2000, seed: int = 20190710, load_value: float = LOAD, share: float = SHARE,
        horizon: float | None = None, *, cluster: Cluster = Cluster(), layout: Layout = Layout(),
        policies_run: Sequence[str] = tuple(POLICIES), progress: Callable[[str], None] = lambda line: None) -> dict:
    """One trace on the labelled cluster, replayed under each policy; `horizon` as in
    `study.run.run`."""
    unknown = [policy for policy in policies_run if policy not in POLICIES]
    if unknown:
        raise ValueError(f"policies {unknown} are not among {', '.join(POLICIES)}")
    drain = DRAIN_SECONDS if horizon is None else float(horizon)
    replay = trace(draw(jobs, seed, cluster.gpus), load_value, cluster.gpus)
    sample = declaring(replay, share, seed, cluster, layout)
    multi = [job for job in replay if multi_node(job, cluster)]
    results = {"setup": {"jobs": jobs, "seed": seed, "load": load_value, "share": share,
                         "offered_load": round(offered_load(replay, cluster.gpus), 3), "drain_seconds": drain,
                         "cluster": asdict(cluster), "cluster_gpus": cluster.gpus, "layout": asdict(layout),
                         "zones": cluster.nodes // layout.zone_nodes, "blocks": cluster.nodes // layout.block_nodes,
                         "multi_node_jobs": len(multi), "declaring_jobs": len(sample),
                         "multi_node_sizes": {size: sum(1 for job in multi if job.gpus == size)
                                              for size in sorted({job.gpus for job in multi})},
                         "multi_node_gpu_share": (sum(job.gpu_seconds for job in multi)
                                                  / sum(job.gpu_seconds for job in replay))},
               "runs": []}
    for policy in policies_run:
        progress(f"topology: {policy}, {len(replay)} jobs at load {load_value:g} ...")
        outcome = replay_once(policy, replay, cluster, layout, sample, drain)
        progress(f"topology: {policy}: {outcome['counters']['wall_seconds']} s wall")
        results["runs"].append(outcome)
    return results
