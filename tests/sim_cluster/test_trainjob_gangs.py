"""TrainJobs under gangkeeper, rolled back and preempted through the TrainJob's own switch, end to
end on the emulated cluster's virtual clock.

A TrainJob on the shipped `torch-distributed` runtime, its two `node` pods training for 60 seconds,
runs in an enforced namespace on two 8-GPU nodes: the emulated Trainer renders its JobSet, the
JobSet and Job controllers make its pods, gangkeeper's webhook gates them as one gang, its
controller runs in process (`study.policies`) and `sim.invariants` checks every change. Taken
back, because a release was spoilt or a gang of higher priority needs the room, the TrainJob is
suspended, not its JobSet (the Trainer would set the JobSet's switch back to the TrainJob's), and
resumed once the backoff ends. The TrainJob then says so as the real Trainer writes it (its
`Suspended` condition True, then False with reason `Resumed`), nothing below it counts a failure
(its Job deletes the pods of a suspended Job uncounted), and it completes.
"""

from pathlib import Path

import yaml

from gangkeeper import names
from gangkeeper.controller.deciding.settings import Settings
from sim.api import WatchEvent
from sim.clock import VirtualClock
from sim.cluster import emulated_cluster
from sim.invariants import Checker, Watch
from sim.names import DURATION_ANNOTATION, JOBSETS, TRAINJOBS
from sim.spec import load
from study.policies import GangkeeperController, gangkeeper_api
from tests.sim_cluster.disturbances import PRIORITY_CLASSES, URGENT, Spoiler, urgent_job

RUNTIME = Path(__file__).resolve().parents[1] / "fixtures" / "ecosystem" / "examples" / \
    "trainer-runtime-torch-distributed.yaml"
NS = "ml"
TRAINJOB = "mnist"
SETTINGS = Settings(bind_timeout_seconds=60.0, rollback_backoff_seconds=5.0)
CLUSTER = f"""nodes: [{{count: 2, gpusPerNode: 8}}]
{PRIORITY_CLASSES}"""
SUSPENDED, RESUMED = ("True", "Suspended"), ("False", "Resumed")


def runtime(priority_class: str | None = None) -> dict:
    """The shipped runtime, its nodes training for 60 seconds (at `priority_class`)."""
    shipped = yaml.safe_load(RUNTIME.read_text())
    for replicated in shipped["spec"]["template"]["spec"]["replicatedJobs"]:
        pod_template = replicated["template"]["spec"]["template"]
        pod_template["metadata"] = {"annotations": {DURATION_ANNOTATION: "60"}}
        if priority_class:
            pod_template["spec"]["priorityClassName"] = priority_class
    return shipped


def trainjob(gpus_per_node: int) -> dict:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": TRAINJOB},
            "spec": {"runtimeRef": {"name": "torch-distributed"},
                     "trainer": {"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": str(gpus_per_node)}}}}}


def suspended_condition(obj: dict) -> tuple[str, str] | None:
    found = next((c for c in (obj.get("status") or {}).get("conditions") or () if c["type"] == "Suspended"), None)
    return None if found is None else (found["status"], found["reason"])


def marked(obj: dict) -> bool:
    """Carries gangkeeper's mark of an owner it suspended."""
    return names.SUSPENDED_BY_ANNOTATION in (obj["metadata"].get("annotations") or {})


class Recorder:
    """The TrainJob's switch (suspended, and marked by gangkeeper) and its `Suspended` condition,
    each in the order it changed, and whether its JobSet ever carried gangkeeper's mark."""

    resources = (TRAINJOBS, JOBSETS)

    def __init__(self):
        self.switch: list[tuple[bool, bool]] = []
        self.conditions: list[tuple[str, str] | None] = []
        self.jobset_marked = False

    def observe(self, event: WatchEvent, now: float) -> None:
        obj = event.object
        if event.resource == JOBSETS:
            self.jobset_marked |= marked(obj)
            return
        for seen, changes in (((obj["spec"].get("suspend") is True, marked(obj)), self.switch),
                              (suspended_condition(obj), self.conditions)):
            if not changes or changes[-1] != seen:
                changes.append(seen)

    def step(self, now: float) -> bool:
        return False

    def next_due(self) -> float | None:
        return None


def group_size(pod: dict) -> int:
    """The TrainJob's gang is its two nodes; the urgent Job's, its one pod."""
    return 1 if pod["metadata"]["name"].startswith(URGENT) else 2


class Emulation:
    """Two 8-GPU nodes with gangkeeper, the runtime installed; the TrainJob is created in an enforced namespace."""

    def __init__(self, trainjob_: dict, *, priority_class: str | None = None, spoil: bool = False):
        self.clock = VirtualClock()
        self.api, _ = gangkeeper_api(self.clock.now)
        self.api.create("namespaces", {"metadata": {"name": NS, "labels": {names.ENFORCE_LABEL: names.ENFORCE_VALUE}}})
        self.watch = Watch(self.api, Checker(bind_timeout=SETTINGS.bind_timeout_seconds, reaction=30.0,
                                             size_of=group_size), clock=self.clock.now)
        self.recorder, self.spoiler = Recorder(), Spoiler(self.api)
        extra = [GangkeeperController(self.api, clock=self.clock.now, settings=SETTINGS), self.recorder,
                 *([self.spoiler] if spoil else [])]
        self.cluster = emulated_cluster(self.api, self.clock, spec=load(CLUSTER), extra=extra)
        self.api.create("clustertrainingruntimes", runtime(priority_class))
        self.api.create(TRAINJOBS, trainjob_, namespace=NS)

    def run(self, seconds: float) -> None:
        self.cluster.run_until(self.clock.now() + seconds)

    def finish(self) -> None:
        self.run(600.0)
        self.watch.finish()

    def get(self, resource: str, name: str) -> dict:
        return self.api.get(resource, name, namespace=NS)

    def events_on_trainjob(self, reason: str) -> list[dict]:
        return [e for e in self.api.list("events", namespace=NS)
                if e["reason"] == reason and e["involvedObject"]["kind"] == "TrainJob"]


def conditions(obj: dict) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or ()}


def assert_taken_back_once_and_completed_with_no_failure_counted(emulation: Emulation) -> None:
    """The TrainJob was suspended by gangkeeper and resumed, and said so as the Trainer writes it;
    it completed and never failed; its JobSet neither failed nor restarted; its Job counted no pod
    as failed (the Job controller counts every pod deleted from a Job that is not suspended)."""
    assert emulation.recorder.switch == [(False, False), (True, True), (False, False)], "suspended by gangkeeper"
    assert emulation.recorder.conditions == [None, SUSPENDED, RESUMED]
    done = emulation.get(TRAINJOBS, TRAINJOB)
    assert conditions(done) == {"Suspended": "False", "Complete": "True"}
    assert [s["failed"] for s in done["status"]["jobsStatus"]] == [0]
    jobset = emulation.get(JOBSETS, TRAINJOB)
    assert jobset["status"]["restarts"] == 0 and jobset["status"]["terminalState"] == "Completed"
    assert [s["failed"] for s in jobset["status"]["replicatedJobsStatus"]] == [0]
    job = emulation.get("jobs", f"{TRAINJOB}-node-0")
    assert (job["status"]["failed"], job["status"]["succeeded"]) == (0, 2)
    assert not emulation.recorder.jobset_marked, "gangkeeper suspended the TrainJob, never its JobSet"


def test_a_trainjob_whose_nodes_fail_to_bind_is_suspended_through_its_own_switch_and_resumed_whole():
    emulation = Emulation(trainjob(gpus_per_node=4), spoil=True)
    emulation.finish()
    assert emulation.spoiler.tainted, "a release was spoilt"
    [suspension] = emulation.events_on_trainjob("Suspended")
    assert suspension["involvedObject"]["name"] == TRAINJOB
    assert "rolled back 1×" in suspension["message"]
    assert_taken_back_once_and_completed_with_no_failure_counted(emulation)
    assert emulation.watch.violations() == []


def test_a_trainjob_preempted_by_a_gang_of_higher_priority_is_suspended_and_completes_once_room_returns():
    emulation = Emulation(trainjob(gpus_per_node=8), priority_class="low")
    emulation.run(20.0)
    running = emulation.get(TRAINJOBS, TRAINJOB)
    assert [s["ready"] for s in running["status"]["jobsStatus"]] == [1] and conditions(running) == {}
    emulation.api.create("jobs", urgent_job(), namespace=NS)
    emulation.finish()
    [suspension] = emulation.events_on_trainjob("Suspended")
    assert suspension["involvedObject"]["name"] == TRAINJOB
    assert "(preempted)" in suspension["message"]
    urgent = emulation.get("jobs", URGENT)
    assert "Complete" in conditions(urgent)
    done = emulation.get(TRAINJOBS, TRAINJOB)
    complete = next(c for c in done["status"]["conditions"] if c["type"] == "Complete")
    assert complete["lastTransitionTime"] > urgent["status"]["completionTime"], "ran again once the room returned"
    assert_taken_back_once_and_completed_with_no_failure_counted(emulation)
    assert emulation.watch.violations() == []
