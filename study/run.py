"""Replay one trace per load under each policy on the emulated cluster's virtual clock.

Every run gets a fresh emulated API server, kube-scheduler (default profile, LeastAllocated),
kubelets (2 s container start), Kubeflow PyTorchJob operator and the same scaffolding:
`Holdings` (study.metrics) measuring GPU-seconds, `sim.accounting.Accounting` timing jobs, and
`FinishedJobCleaner`, which deletes a PyTorchJob once it has succeeded (as
`runPolicy.ttlSecondsAfterFinished: 0` would), so that the store and the controller's cache hold
live objects only, as on a production cluster. Only the policy's own components differ
(`study.policies`).

A job is a PyTorchJob of N × 1-GPU workers when N < 8, else N/8 × 8-GPU workers (one Master
counted among them). Pods request 4 CPUs and 32 GiB per GPU on nodes of 8 GPUs, 64 CPUs and
512 GiB: GPUs are the only resource that runs out.
"""

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass

import yaml

from gangkeeper import names
from gangkeeper.controller.deciding.settings import CapacityProvisioning, Preempting, Provisioning, Settings
from sim.accounting import Accounting
from sim.api import ADMIN, APIError, WatchEvent
from sim.apiserver import APIServer
from sim.clock import VirtualClock
from sim.cluster import Component, emulated_cluster
from sim.deployed import install_placeholder_priority_class
from sim.names import GPU, PYTORCHJOBS
from sim.placement import MOST_ALLOCATED, Scoring
from sim.spec import load
from study import policies
from study.metrics import Holdings, summarise
from study.trace import (
    DURATIONS,
    PHILLY_LIKE_SIZES,
    PRIORITY_CLASSES,
    Draw,
    Job,
    draw,
    offered_load,
    size_shares,
    trace,
)

# The three policies of the study, and a sensitivity variant: the stock scheduler with the
# bin-packing profile many GPU clusters configure (NodeResourcesFit MostAllocated, GPUs weighted),
# to show how much of the difference is packing rather than gang admission.
POLICIES = ("stock", "stock-binpack", "quota", "gangkeeper")
BASELINES = ("stock", "quota")
# gangkeeper's settings by policy name: its defaults (preemption of lower priorities on, no capacity
# provisioning); with preemption off, a variant the priority mix (`study.priorities`) replays beside
# them; asking an autoscaler for capacity by each `--capacity-provisioning` mode (`study.autoscaling`).
GANGKEEPER = {"gangkeeper": Settings(), "gangkeeper-no-preemption": Settings(preemption=Preempting.NEVER),
              "gangkeeper-provisioning-request": Settings(provisioning=Provisioning(
                  mode=CapacityProvisioning.PROVISIONING_REQUEST)),
              "gangkeeper-placeholders": Settings(provisioning=Provisioning(mode=CapacityProvisioning.PLACEHOLDERS))}
KNOWN_POLICIES = (*POLICIES, *(policy for policy in GANGKEEPER if policy not in POLICIES))
BINPACK = Scoring(MOST_ALLOCATED, {"cpu": 1, "memory": 1, GPU: 3})
NAMESPACE = "ml"
DRAIN_SECONDS = 24 * 3600.0  # past the last arrival: the longest job (12 h) and the backlog fit in it
WARM_UP = 0.25  # utilisation is measured over the arrival span after its first quarter


@dataclass(frozen=True)
class Cluster:
    nodes: int = 64
    gpus_per_node: int = 8
    cpu_per_gpu: int = 4
    memory_gi_per_gpu: int = 32

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


class FinishedJobCleaner:
    """Deletes each PyTorchJob when it has succeeded (scaffolding; see the module docstring)."""

    resources = (PYTORCHJOBS,)

    def __init__(self, api: APIServer):
        self.api = api
        self.finished: list[tuple[str, str]] = []

    def observe(self, event: WatchEvent, now: float) -> None:
        job = event.object
        if event.type != "DELETED" and policies._succeeded(job):
            self.finished.append((job["metadata"]["namespace"], job["metadata"]["name"]))

    def step(self, now: float) -> bool:
        wrote = False
        while self.finished:
            namespace, name = self.finished.pop()
            try:
                self.api.delete(PYTORCHJOBS, name, namespace=namespace, user=ADMIN)
                wrote = True
            except APIError:
                pass  # already gone
        return wrote

    def next_due(self) -> float | None:
        return None


def spec_for(jobs: Sequence[Job], cluster: Cluster, *, node_topology: Sequence[Mapping] | None = None,
             rules: Mapping[str, Mapping[str, str]] | None = None, nodes: Sequence[dict] | None = None,
             node_groups: Sequence[Mapping] = ()) -> dict:
    """The emulation's scenario: the nodes, the PriorityClasses the jobs name, and each job as a
    PyTorchJob submitted on time (its pods in its PriorityClass, when it has one). For the
    topology run: the nodes labelled by `node_topology` (`sim.spec` node topology levels), the
    jobs named in `rules` with their workload topology, or `nodes` instead of the cluster's. For
    the autoscaled cluster: `node_groups` (`sim.spec` nodeGroups) the emulated cluster-autoscaler
    grows and shrinks."""
    rules = rules or {}
    workloads = [{"kind": "PyTorchJob", "name": job.name, "namespace": NAMESPACE, "size": job.pods,
                  "gpusPerPod": job.gpus_per_pod, "cpuPerPod": str(cluster.cpu_per_gpu * job.gpus_per_pod),
                  "memoryPerPod": f"{cluster.memory_gi_per_gpu * job.gpus_per_pod}Gi",
                  "durationSeconds": job.duration, "submitSeconds": job.submit,
                  **({"priorityClassName": job.priority_class} if job.priority_class else {}),
                  **({"topology": dict(rules[job.name])} if job.name in rules else {})} for job in jobs]
    classes = [{"name": name, "value": PRIORITY_CLASSES[name].value}
               for name in sorted({job.priority_class for job in jobs if job.priority_class})]
    if nodes is None:
        nodes = [{"count": cluster.nodes, "gpusPerNode": cluster.gpus_per_node,
                  "cpu": str(cluster.gpus_per_node * cluster.cpu_per_gpu * 2),
                  "memory": f"{cluster.gpus_per_node * cluster.memory_gi_per_gpu * 2}Gi",
                  **({"topology": list(node_topology)} if node_topology else {})}]
    return load(yaml.safe_dump({"nodes": list(nodes), "nodeGroups": [dict(group) for group in node_groups],
                                "priorityClasses": classes, "workloads": workloads}))


def run_policy(policy: str, jobs: Sequence[Job], spec: dict, cluster: Cluster, drain: float, *,
               watchers: Sequence[Component] = ()) -> dict:
    """One replay; returns the figures, the per-job rows, counters of the policy's components and
    the horizon (the moment on the virtual clock the replay ran to).

    `watchers`: more measuring components, added to the cluster beside `Holdings`; the caller
    reads them once the replay is over.
    """
    if policy not in KNOWN_POLICIES:
        raise ValueError(f"policy {policy!r} is not one of {', '.join(KNOWN_POLICIES)}")
    clock = VirtualClock()
    if policy in GANGKEEPER:
        api, webhook = policies.gangkeeper_api(clock.now)
        if GANGKEEPER[policy].provisioning.mode is CapacityProvisioning.PLACEHOLDERS:
            install_placeholder_priority_class(api)  # deploy/base ships it; the placeholders name it
        component = controller = policies.GangkeeperController(api, clock=clock.now, settings=GANGKEEPER[policy])
    elif policy == "quota":
        api = policies.quota_api(clock.now)
        component = gate = policies.QuotaGate(api)
    else:
        api, component = APIServer(clock=clock.now, seed=policies.CLUSTER_SEED), None
    scoring = BINPACK if policy == "stock-binpack" else Scoring()
    api.create("namespaces", {"metadata": {"name": NAMESPACE, "labels": {
        names.ENFORCE_LABEL: names.ENFORCE_VALUE, "kubernetes.io/metadata.name": NAMESPACE}}})
    extra = [Holdings(), *watchers, FinishedJobCleaner(api)] + ([component] if component else [])
    started_wall = time.perf_counter()
    emulated = emulated_cluster(api, clock, spec=spec, extra=extra, scoring=scoring)
    holdings, accounting = emulated.component(Holdings), emulated.component(Accounting)
    start = clock.now()
    window = (start + WARM_UP * jobs[-1].submit, start + jobs[-1].submit)
    emulated.run_until(window[0])
    useful_before = sum(row["useful"] for row in holdings.snapshot(window[0]).values())
    emulated.run_until(window[1])
    useful_in_window = sum(row["useful"] for row in holdings.snapshot(window[1]).values()) - useful_before
    horizon = window[1] + drain
    emulated.run_until(horizon)
    emulated.close()
    measured = holdings.snapshot(horizon)
    rows = []
    for row in accounting.jobs(horizon):
        held = measured.get(row["job"], {"useful": 0.0, "partial": 0.0, "startup": 0.0, "state": "unplaced"})
        rows.append({**row, **held})
    figures = summarise(rows, cluster_gpus=cluster.gpus, window=window, horizon=horizon,
                        useful_in_window=useful_in_window)
    counters = {"wall_seconds": round(time.perf_counter() - started_wall, 1), "writes": api.store.resource_version}
    if policy in GANGKEEPER:
        counters.update(passes=controller.passes, failed_actions=controller.failed_actions,
                        index_inconsistencies=controller.inconsistencies,
                        webhook_requests=webhook.requests, controller_writes=controller.kube.requests,
                        rollbacks=controller.rollbacks, preemptions=controller.preemptions,
                        capacity=controller.capacity)
    elif policy == "quota":
        counters.update(releases=gate.releases)
    return {"policy": policy, "figures": figures, "counters": counters, "horizon": horizon,
            "jobs": [{k: row[k] for k in ("job", "submitted", "started", "finished", "partial", "useful", "state")}
                     for row in rows]}


def run(loads: Sequence[float] = (0.7, 0.9, 1.1), jobs: int = 2000, seed: int = 20190710,
        horizon: float | None = None, *, cluster: Cluster = Cluster(), policies_run: Sequence[str] = POLICIES,
        progress: Callable[[str], None] = lambda line: None) -> dict:
    """The study: for each load, one trace replayed under each policy.

    `horizon`: seconds the replay runs past the last arrival (default `DRAIN_SECONDS`); jobs not
    finished by then count as not completed. The same `seed` draws the same jobs at every load.
    """
    drain = DRAIN_SECONDS if horizon is None else float(horizon)
    drawn: Draw = draw(jobs, seed, cluster.gpus)
    results = {"setup": {"jobs": jobs, "seed": seed, "loads": list(loads), "drain_seconds": drain,
                         "cluster": asdict(cluster), "cluster_gpus": cluster.gpus,
                         "sizes": [list(pair) for pair in PHILLY_LIKE_SIZES], "durations": asdict(DURATIONS)},
               "runs": []}
    for load_value in loads:
        replay = trace(drawn, load_value, cluster.gpus)
        spec = spec_for(replay, cluster)
        for policy in policies_run:
            progress(f"study: load {load_value:g}, {policy}, {len(replay)} jobs ...")
            outcome = run_policy(policy, replay, spec, cluster, drain)
            outcome.update(load=load_value, offered_load=round(offered_load(replay, cluster.gpus), 3),
                           arrival_span_s=replay[-1].submit, sizes_drawn=size_shares(replay))
            progress(f"study: load {load_value:g}, {policy}: {outcome['counters']['wall_seconds']} s wall")
            results["runs"].append(outcome)
    return results
