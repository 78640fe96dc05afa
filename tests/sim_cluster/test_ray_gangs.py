"""RayJobs under gangkeeper, end to end on the emulated cluster's virtual clock.

The shipped example (`tests/fixtures/ecosystem/examples/rayjob.yaml`), its worker group of
`minReplicas` 2 asking for 2 GPUs a pod, is created in an enforced namespace: the emulated
KubeRay operator makes its RayCluster, the cluster's head and workers, and once the cluster is
ready the submitter Job, whose one pod runs the Ray job (20 seconds, by the emulation's duration
annotation on `submitterPodTemplate`); gangkeeper's real webhook and its controller's loop run in
process (`study.policies`), and `sim.invariants` checks every change. A RayJob taken back (its
cluster's release spoilt, or its place wanted by a gang of higher priority) is suspended through
its own switch and resumed: its status goes through Suspending, Suspended and New as KubeRay
writes it, it counts no failure, and it completes on a cluster made anew.
"""

from pathlib import Path

import yaml

from gangkeeper import names
from gangkeeper.controller.deciding.settings import Settings
from sim.api import WatchEvent
from sim.clock import VirtualClock
from sim.cluster import emulated_cluster
from sim.invariants import Checker, Watch
from sim.names import DURATION_ANNOTATION, PODS
from sim.operators.ray import RAYCLUSTERS, RAYJOBS
from sim.reservations import GANGS
from sim.spec import load
from study.policies import GangkeeperController, gangkeeper_api
from tests.sim_cluster.disturbances import PRIORITY_CLASSES, URGENT, Spoiler, urgent_job

EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "ecosystem" / "examples" / "rayjob.yaml"
NS = "ml"
RAYJOB = "rayjob-sample"
SETTINGS = Settings(bind_timeout_seconds=60.0, rollback_backoff_seconds=5.0)
CLUSTER = f"""nodes: [{{count: 2, gpusPerNode: 8}}]
{PRIORITY_CLASSES}"""
# The deployment statuses of a RayJob from when it is taken back to its end: suspended, resumed
# (New: no deployment status), started anew. Never Failed.
TAKEN_BACK = ["Suspending", "Suspended", "New", "Initializing", "Running", "Complete"]


def gpu_example(replicas: int = 2, gpus: int = 2) -> dict:
    """The shipped RayJob, its workers asking for `gpus` GPUs each, at least 2 of them, its submitter
    KubeRay's default container with the emulation's duration."""
    rayjob = next(yaml.safe_load_all(EXAMPLE.read_text()))
    group = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    group.update(replicas=replicas, minReplicas=2)
    group["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = str(gpus)
    rayjob["spec"]["submitterPodTemplate"] = {
        "metadata": {"annotations": {DURATION_ANNOTATION: "20"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "my-custom-rayjob-submitter-pod",
                                                           "image": "rayproject/ray:2.52.0"}]}}
    return rayjob


def suspendable(rayjob: dict, priority_class: str | None = None) -> dict:
    """The RayJob as KubeRay lets it be suspended (it deletes its cluster once it finished), its
    cluster's pods at `priority_class`."""
    rayjob["spec"]["shutdownAfterJobFinishes"] = True
    if priority_class:
        cluster = rayjob["spec"]["rayClusterSpec"]
        for group in [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]:
            group["template"]["spec"]["priorityClassName"] = priority_class
    return rayjob


class Recorder:
    """Every pod as it was created, the pods each Gang ever reserved, and the RayJob's deployment
    statuses in the order it went through them (New for none)."""

    resources = (PODS, GANGS, RAYJOBS)

    def __init__(self):
        self.created: dict[str, dict] = {}
        self.reserved: dict[str, set[str]] = {}
        self.deployments: list[str] = []

    def observe(self, event: WatchEvent, now: float) -> None:
        if event.resource == GANGS:
            self.reserved.setdefault(event.object["metadata"]["name"], set()).update(
                (event.object.get("status") or {}).get("reservations") or {})
        elif event.resource == RAYJOBS:
            deployment = (event.object.get("status") or {}).get("jobDeploymentStatus", "New")
            if event.type != "ADDED" and (not self.deployments or self.deployments[-1] != deployment):
                self.deployments.append(deployment)
        elif event.type == "ADDED":
            self.created.setdefault(event.object["metadata"]["name"], event.object)

    def step(self, now: float) -> bool:
        return False

    def next_due(self) -> float | None:
        return None


def node_type(pod: dict) -> str:
    return (pod["metadata"].get("labels") or {}).get(names.RAY_NODE_TYPE_LABEL, "submitter")


class Emulation:
    """Two 8-GPU nodes with gangkeeper; the example RayJob created in an enforced namespace."""

    def __init__(self, rayjob: dict, *, min_count: int, spoil: bool = False):
        self.clock = VirtualClock()
        self.api, _ = gangkeeper_api(self.clock.now)
        self.api.create("namespaces", {"metadata": {"name": NS, "labels": {names.ENFORCE_LABEL: names.ENFORCE_VALUE}}})
        checker = Checker(bind_timeout=SETTINGS.bind_timeout_seconds, reaction=30.0,
                          size_of=lambda pod: min_count if node_type(pod) != "submitter" else 1)
        self.watch = Watch(self.api, checker, clock=self.clock.now)
        self.recorder, self.spoiler = Recorder(), Spoiler(self.api)
        extra = [GangkeeperController(self.api, clock=self.clock.now, settings=SETTINGS), self.recorder,
                 *([self.spoiler] if spoil else [])]
        self.cluster = emulated_cluster(self.api, self.clock, spec=load(CLUSTER), extra=extra)
        self.api.create(RAYJOBS, rayjob, namespace=NS)

    def run(self, seconds: float = 300.0) -> None:
        self.run_for(seconds)
        self.watch.finish()

    def run_for(self, seconds: float) -> None:
        self.cluster.run_until(self.clock.now() + seconds)

    def rayjob(self) -> dict:
        return self.api.get(RAYJOBS, RAYJOB, namespace=NS)

    def created(self, kind: str) -> dict[str, dict]:
        return {name: pod for name, pod in self.recorder.created.items() if node_type(pod) == kind}


def test_the_shipped_rayjob_runs_to_completion_its_head_and_minimum_workers_released_whole():
    emulation = Emulation(gpu_example(), min_count=3)
    emulation.run()
    status = emulation.rayjob()["status"]
    assert (status["jobDeploymentStatus"], status["jobStatus"]) == ("Complete", "SUCCEEDED")
    cluster = emulation.api.get(RAYCLUSTERS, status["rayClusterName"], namespace=NS)
    group = f"{cluster['metadata']['name']}-{cluster['metadata']['uid']}"
    members = {**emulation.created(names.RAY_HEAD), **emulation.created(names.RAY_WORKER)}
    assert len(members) == 3
    assert {pod["metadata"]["labels"][names.GROUP_LABEL] for pod in members.values()} == {group}
    assert all(pod["spec"].get("schedulingGates") for pod in members.values()), "gated when created"
    assert {frozenset(pods) for pods in emulation.recorder.reserved.values() if pods} == {frozenset(members)}
    assert emulation.watch.checker.first_bound[(NS, group)] == (3, 3), "the first bound only once all were placed"
    assert emulation.watch.violations() == []


def test_the_submitter_is_created_once_the_cluster_runs_and_is_never_gated():
    emulation = Emulation(gpu_example(), min_count=3)
    emulation.run()
    [submitter] = emulation.created("submitter").values()
    assert not submitter["spec"].get("schedulingGates")
    assert names.GROUP_LABEL not in submitter["metadata"]["labels"]
    assert submitter["metadata"]["labels"][names.RAY_ORIGINATED_FROM_NAME_LABEL] == RAYJOB
    order = list(emulation.recorder.created)
    assert order.index(submitter["metadata"]["name"]) == len(order) - 1, "made after every pod of the cluster"
    assert emulation.api.get(PODS, submitter["metadata"]["name"], namespace=NS)["status"]["phase"] == "Succeeded"


def test_a_worker_beyond_the_minimum_follows_the_admitted_gang():
    emulation = Emulation(gpu_example(replicas=3), min_count=3)
    emulation.run()
    assert emulation.rayjob()["status"]["jobDeploymentStatus"] == "Complete"
    workers = emulation.created(names.RAY_WORKER)
    assert len(workers) == 3
    running = [emulation.api.get(PODS, name, namespace=NS) for name in workers]
    assert {pod["status"]["phase"] for pod in running} == {"Running"}
    assert emulation.watch.violations() == [], "the extra worker booked only once the gang of 3 was placed"


def suspensions_of_the_rayjob(emulation: Emulation) -> list[dict]:
    return [e for e in emulation.api.list("events", namespace=NS)
            if e["reason"] == "Suspended" and e["involvedObject"]["kind"] == "RayJob"]


def assert_taken_back_once_and_completed_with_no_failure_counted(emulation: Emulation, taken_when: list[str]) -> None:
    """Taken back once it had gone through `taken_when`: suspended and resumed through its switch
    as KubeRay writes it, never Failed, counted as one success and no failure; run to its end on a
    cluster made anew, gangkeeper's mark gone."""
    assert emulation.recorder.deployments == [*taken_when, *TAKEN_BACK]
    rayjob = emulation.rayjob()
    status = rayjob["status"]
    assert (status["jobDeploymentStatus"], status["jobStatus"]) == ("Complete", "SUCCEEDED")
    assert (status["succeeded"], status["failed"]) == (1, 0)
    assert names.SUSPENDED_BY_ANNOTATION not in (rayjob["metadata"].get("annotations") or {})
    clusters = {pod["metadata"]["labels"][names.RAY_CLUSTER_LABEL] for pod in emulation.created(names.RAY_HEAD).values()}
    assert len(clusters) == 2 and status["rayClusterName"] in clusters, "resumed on a cluster made anew"


def test_a_cluster_that_fails_to_bind_is_taken_back_whole_by_suspending_its_rayjob():
    emulation = Emulation(suspendable(gpu_example()), min_count=3, spoil=True)
    emulation.run()
    assert emulation.spoiler.tainted, "a release was spoilt"
    [suspension] = suspensions_of_the_rayjob(emulation)
    assert "rolled back 1×" in suspension["message"]
    assert_taken_back_once_and_completed_with_no_failure_counted(emulation, taken_when=["Initializing"])
    assert len(emulation.created("submitter")) == 1, "the submitter only once a cluster ran"
    ran = emulation.rayjob()["status"]["rayClusterName"]
    assert [counts for (_, group), counts in emulation.watch.checker.first_bound.items()
            if group.startswith(f"{ran}-")] == [(3, 3)], "the cluster that ran was bound only once all of it was placed"
    assert emulation.watch.violations() == [], "its Gang deleted with the cluster took no released member's pin back"


def test_a_rayjob_preempted_by_a_gang_of_higher_priority_is_suspended_and_completes_once_room_returns():
    """Its two workers take both nodes' GPUs; an urgent Job needs one node's."""
    emulation = Emulation(suspendable(gpu_example(gpus=8), priority_class="low"), min_count=3)
    emulation.run_for(10.0)
    assert emulation.rayjob()["status"]["jobDeploymentStatus"] == "Running"
    emulation.api.create("jobs", urgent_job(), namespace=NS)
    emulation.run(600.0)
    [suspension] = suspensions_of_the_rayjob(emulation)
    assert "(preempted)" in suspension["message"]
    assert_taken_back_once_and_completed_with_no_failure_counted(emulation, taken_when=["Initializing", "Running"])
    urgent = emulation.api.get("jobs", URGENT, namespace=NS)
    assert emulation.rayjob()["status"]["endTime"] > urgent["status"]["completionTime"], "ran again once room returned"
    submitters = [pod for pod in emulation.created("submitter").values()
                  if pod["metadata"]["labels"].get(names.RAY_ORIGINATED_FROM_NAME_LABEL) == RAYJOB]
    assert len(submitters) == 2, "the preempted run's submitter went with its cluster, and came again"
    assert emulation.watch.violations() == []


def test_a_rayjob_kuberay_would_not_suspend_has_its_clusters_pods_deleted_instead():
    emulation = Emulation(gpu_example(), min_count=3, spoil=True)
    emulation.run()
    events = emulation.api.list("events", namespace=NS)
    assert not any(e["reason"] == "Suspended" for e in events)
    assert any("deleted 3 members for their owner to recreate them gated" in e["message"] for e in events)
    status = emulation.rayjob()["status"]
    assert (status["jobDeploymentStatus"], status["jobStatus"]) == ("Complete", "SUCCEEDED")
    assert len(emulation.created(names.RAY_HEAD)) == 2 and len(emulation.created(names.RAY_WORKER)) == 4
    assert emulation.watch.violations() == []
