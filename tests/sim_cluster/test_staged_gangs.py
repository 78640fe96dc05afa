"""Workloads whose pods come in stages, under gangkeeper, end to end on the emulated cluster's virtual clock.

The shipped examples (`tests/fixtures/ecosystem/examples/`) run in an enforced namespace: the
JobSet `dependsOn` example (an initializer, a launcher once it completed, 4 GPU workers once the
launcher is Ready) and a TrainJob on the torchtune runtime (two CPU initializers that must complete
before its GPU `node` pods are created). The emulated JobSet, Job and Trainer controllers create
the pods as the real ones do, gangkeeper's webhook and controller run in process
(`study.policies`), and `sim.invariants` checks every change: no group is ever bound or released in
part, nothing holds GPUs while its group is incomplete. A gang that counted a later stage would
wait forever, and these runs would never complete.
"""

import copy
from pathlib import Path

import yaml

from gangkeeper import names
from gangkeeper.controller.deciding.settings import Settings
from sim.api import WatchEvent
from sim.clock import VirtualClock
from sim.cluster import emulated_cluster
from sim.invariants import Checker, Watch
from sim.names import DURATION_ANNOTATION, PODS
from sim.reservations import GANGS
from sim.spec import load
from study.policies import GangkeeperController, gangkeeper_api

EXAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "ecosystem" / "examples"
NS = "ml"
SETTINGS = Settings(bind_timeout_seconds=60.0, rollback_backoff_seconds=5.0)
RUN_SECONDS = 600.0


class Recorder:
    """Which pods each Gang reserved, and whether each pod was gated when created."""

    resources = (PODS, GANGS)

    def __init__(self):
        self.reserved: dict[str, set[str]] = {}
        self.gated: dict[str, bool] = {}

    def observe(self, event: WatchEvent, now: float) -> None:
        name = event.object["metadata"]["name"]
        if event.resource == GANGS:
            self.reserved.setdefault(name, set()).update((event.object.get("status") or {}).get("reservations") or {})
        elif event.type == "ADDED":
            self.gated.setdefault(name, bool(event.object["spec"].get("schedulingGates")))

    def step(self, now: float) -> bool:
        return False

    def next_due(self) -> float | None:
        return None

    def reserved_together(self) -> set[frozenset[str]]:
        return {frozenset(pods) for pods in self.reserved.values() if pods}


def stage(pod: dict) -> str:
    """The group a member's stage forms: its group label and its replicated job (the checker's unit)."""
    labels = pod["metadata"].get("labels") or {}
    group = labels.get(names.GROUP_LABEL)
    return f"{group}/{labels.get(names.JOBSET_REPLICATED_JOB_LABEL, '')}" if group else ""


class Emulation:
    """Two 8-GPU nodes with gangkeeper installed and an enforced namespace; `size_of` gives each
    member's stage size to the invariant checker."""

    def __init__(self, size_of, group_of=stage):
        self.clock = VirtualClock()
        self.api, _ = gangkeeper_api(self.clock.now)
        self.api.create("namespaces", {"metadata": {"name": NS, "labels": {names.ENFORCE_LABEL: names.ENFORCE_VALUE}}})
        self.watch = Watch(self.api, Checker(bind_timeout=SETTINGS.bind_timeout_seconds, reaction=30.0,
                                             size_of=size_of, group_of=group_of), clock=self.clock.now)
        self.recorder = Recorder()
        self.cluster = emulated_cluster(
            self.api, self.clock, spec=load("nodes: [{count: 2, gpusPerNode: 8}]"),
            extra=[GangkeeperController(self.api, clock=self.clock.now, settings=SETTINGS), self.recorder])

    def run(self) -> None:
        self.cluster.run_until(self.clock.now() + RUN_SECONDS)
        self.watch.finish()

    def pods(self) -> dict[str, dict]:
        return {p["metadata"]["name"]: p for p in self.api.list("pods", namespace=NS)}


def timed(pod_template: dict, seconds: int) -> None:
    pod_template.setdefault("metadata", {}).setdefault("annotations", {})[DURATION_ANNOTATION] = str(seconds)


def depends_on_example(*, staged: bool = True) -> dict:
    """examples/jobset-depends-on.yaml with GPU workers (2 each) and durations; `staged=False`
    removes its `dependsOn`, so every replicated job starts at once."""
    jobset = yaml.safe_load((EXAMPLES / "jobset-depends-on.yaml").read_text())
    for replicated in jobset["spec"]["replicatedJobs"]:
        pod_template = replicated["template"]["spec"]["template"]
        timed(pod_template, 20)
        if replicated["name"] == "worker":
            pod_template["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "2"}}
        if not staged:
            replicated.pop("dependsOn", None)
    return jobset


def jobset_status(emulation: Emulation, name: str) -> dict:
    return emulation.api.get("jobsets", name, namespace=NS).get("status") or {}


def test_a_jobset_that_depends_on_its_stages_runs_each_as_a_gang_of_its_own_to_completion():
    sizes = {"initializer": 1, "launcher": 1, "worker": 4}
    emulation = Emulation(lambda pod: sizes[pod["metadata"]["labels"][names.JOBSET_REPLICATED_JOB_LABEL]])
    emulation.api.create("jobsets", depends_on_example(), namespace=NS)
    emulation.run()
    assert jobset_status(emulation, "depends-on").get("terminalState") == "Completed"
    pods = emulation.pods()
    by_job = {job: {n for n, p in pods.items() if p["metadata"]["labels"][names.JOBSET_REPLICATED_JOB_LABEL] == job}
              for job in sizes}
    assert {len(members) for members in by_job.values()} == {1, 4} and len(pods) == 6
    assert all(emulation.recorder.gated.values()), "every pod of the JobSet was gated: all are gangkeeper's"
    assert emulation.recorder.reserved_together() == {frozenset(members) for members in by_job.values()}
    assert emulation.watch.violations() == [], "no stage partly placed, nothing held while incomplete"


def test_the_same_jobset_without_depends_on_is_one_gang():
    emulation = Emulation(lambda pod: 6, group_of=Checker.group_of)
    emulation.api.create("jobsets", depends_on_example(staged=False), namespace=NS)
    emulation.run()
    assert jobset_status(emulation, "depends-on").get("terminalState") == "Completed"
    assert emulation.recorder.reserved_together() == {frozenset(emulation.pods())}
    assert emulation.watch.violations() == []


def torchtune_runtime() -> dict:
    """The shipped torchtune runtime, each pod running for a while so the stages follow one another."""
    runtime = yaml.safe_load((EXAMPLES / "trainer-runtime-torchtune-llama3.2-1b.yaml").read_text())
    for replicated in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        timed(replicated["template"]["spec"]["template"], 30)
    return runtime


def trainjob(runtime: str, nodes: int) -> dict:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "tune"},
            "spec": {"runtimeRef": {"name": runtime}, "trainer": {"numNodes": nodes}}}


def test_a_trainjobs_initializers_run_alone_and_its_nodes_are_one_gang():
    emulation = Emulation(lambda pod: 2)
    runtime = torchtune_runtime()
    emulation.api.create("clustertrainingruntimes", runtime)
    emulation.api.create("trainjobs", trainjob(runtime["metadata"]["name"], nodes=2), namespace=NS)
    emulation.run()
    trainjob_status = emulation.api.get("trainjobs", "tune", namespace=NS).get("status") or {}
    assert {c["type"]: c["status"] for c in trainjob_status.get("conditions") or ()}.get("Complete") == "True"
    pods = emulation.pods()
    steps = {n: p["metadata"]["labels"][names.JOBSET_REPLICATED_JOB_LABEL] for n, p in pods.items()}
    initializers = {n for n, step in steps.items() if step in names.TRAINER_INITIALIZER_STEPS}
    nodes = {n for n, step in steps.items() if step == "node"}
    assert len(initializers) == 2 and len(nodes) == 2
    assert not any(emulation.recorder.gated[n] for n in initializers), "the initializers are left alone"
    assert all(names.GROUP_LABEL not in pods[n]["metadata"]["labels"] for n in initializers)
    assert emulation.recorder.reserved_together() == {frozenset(nodes)}
    assert emulation.watch.violations() == []


def test_a_trainjob_whose_runtime_starts_everything_at_once_is_still_one_gang_of_its_nodes():
    emulation = Emulation(lambda pod: 2)
    runtime = torchtune_runtime()
    runtime["metadata"]["name"] = "torchtune-at-once"
    for replicated in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        replicated.pop("dependsOn", None)
    emulation.api.create("clustertrainingruntimes", copy.deepcopy(runtime))
    emulation.api.create("trainjobs", trainjob("torchtune-at-once", nodes=2), namespace=NS)
    emulation.run()
    pods = emulation.pods()
    nodes = {n for n, p in pods.items() if p["metadata"]["labels"][names.JOBSET_REPLICATED_JOB_LABEL] == "node"}
    assert emulation.recorder.reserved_together() == {frozenset(nodes)} and len(nodes) == 2
    assert emulation.watch.violations() == []
