"""MPIJobs under gangkeeper, end to end on the emulated cluster's virtual clock.

The shipped example (`tests/fixtures/ecosystem/examples/mpijob-pi.yaml`), its two workers asking
for 8 GPUs each and its CPU launcher running `mpirun` for 30 seconds (the emulation's duration
annotation), is created in an enforced namespace: the emulated MPI operator makes the workers and
the launcher Job, the emulated Job controller the launcher pod; gangkeeper's real webhook and its
controller's loop run in process (`study.policies`), and `sim.invariants` checks every change.
Which pods each Gang reserved is read off the Gangs' `status.reservations` as the controller
writes them. Once the launcher has succeeded, the example's `cleanPodPolicy: Running` deletes the
workers, which still serve sshd.
"""

from pathlib import Path

import yaml

from gangkeeper import names
from gangkeeper.controller.deciding.settings import Settings
from sim.api import ADMIN, WatchEvent
from sim.clock import VirtualClock
from sim.cluster import emulated_cluster
from sim.invariants import Checker, Watch
from sim.names import DURATION_ANNOTATION, JOBS, MPIJOBS, PODS
from sim.reservations import GANGS
from sim.spec import load
from study.policies import GangkeeperController, gangkeeper_api
from tests.sim_cluster.disturbances import PRIORITY_CLASSES, URGENT, Spoiler, urgent_job

EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "ecosystem" / "examples" / "mpijob-pi.yaml"
NS = "hpc"
ELSEWHERE = "urgent"  # the enforced namespace of the Job of higher priority
GROUP = "pi-mpijob"
WORKERS = {"pi-worker-0", "pi-worker-1"}
SETTINGS = Settings(bind_timeout_seconds=60.0, rollback_backoff_seconds=5.0)


def gpu_example(policy: str | None = None, seconds: float = 30) -> dict:
    """The shipped pi MPIJob, its workers asking for 8 GPUs each, its launcher running for `seconds`."""
    mpijob = yaml.safe_load(EXAMPLE.read_text())
    specs = mpijob["spec"]["mpiReplicaSpecs"]
    specs["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 8
    specs["Launcher"]["template"]["metadata"] = {"annotations": {DURATION_ANNOTATION: f"{seconds:g}"}}
    if policy:
        mpijob["spec"]["launcherCreationPolicy"] = policy
    return mpijob


def role(pod: dict) -> str:
    return (pod["metadata"].get("labels") or {}).get(names.KUBEFLOW_JOB_ROLE_LABEL, "")


def part(pod: dict) -> str:
    """Under WaitForWorkersReady the workers and the launcher are groups apart: the checker counts them so."""
    label = (pod["metadata"].get("labels") or {}).get(names.GROUP_LABEL)
    return f"{label}/{role(pod)}" if label else ""


def gang_size(pod: dict, apart: bool) -> int:
    """The example's gang is its launcher and 2 workers, or the workers and the launcher apart; the urgent Job's, its pod."""
    if not role(pod):
        return 1
    if apart:
        return 1 if role(pod) == "launcher" else 2
    return 3


class Recorder:
    """In the order the API server committed it: every pod's creation and first readiness, every
    pod as created, the pods each Gang ever reserved, and the conditions the MPIJob ever had."""

    resources = (PODS, GANGS, MPIJOBS)

    def __init__(self):
        self.seen = 0
        self.created: dict[str, dict] = {}
        self.order: dict[str, int] = {}
        self.ready: dict[str, int] = {}
        self.reserved: dict[str, set[str]] = {}
        self.conditions: set[tuple[str, str, str]] = set()  # the MPIJob's (type, status, reason)

    def observe(self, event: WatchEvent, now: float) -> None:
        self.seen += 1
        obj = event.object
        if event.resource == GANGS:
            self.reserved.setdefault(obj["metadata"]["name"], set()).update(
                (obj.get("status") or {}).get("reservations") or {})
        elif event.resource == MPIJOBS:
            self.conditions |= {(c["type"], c["status"], c["reason"])
                                for c in (obj.get("status") or {}).get("conditions") or ()}
        elif event.type == "ADDED":
            self.created.setdefault(obj["metadata"]["name"], obj)
            self.order.setdefault(obj["metadata"]["name"], self.seen)
        elif any(c["type"] == "Ready" and c["status"] == "True" for c in (obj.get("status") or {}).get("conditions")
                 or ()):
            self.ready.setdefault(obj["metadata"]["name"], self.seen)

    def step(self, now: float) -> bool:
        return False

    def next_due(self) -> float | None:
        return None


class Emulation:
    """Three 8-GPU nodes (or `nodes`) with gangkeeper; the MPIJob created in an enforced namespace."""

    def __init__(self, mpijob: dict, *, spoil: bool = False, nodes: int = 3):
        self.clock = VirtualClock()
        self.api, _ = gangkeeper_api(self.clock.now)
        for namespace in (NS, ELSEWHERE):
            self.api.create("namespaces", {"metadata": {"name": namespace,
                                                        "labels": {names.ENFORCE_LABEL: names.ENFORCE_VALUE}}})
        apart = mpijob["spec"].get("launcherCreationPolicy") == names.MPI_WAIT_FOR_WORKERS_READY
        checker = Checker(bind_timeout=SETTINGS.bind_timeout_seconds, reaction=30.0,
                          size_of=lambda pod: gang_size(pod, apart),
                          group_of=part if apart else Checker.group_of)
        self.watch = Watch(self.api, checker, clock=self.clock.now)
        self.recorder, self.spoiler = Recorder(), Spoiler(self.api)
        extra = [GangkeeperController(self.api, clock=self.clock.now, settings=SETTINGS), self.recorder,
                 *([self.spoiler] if spoil else [])]
        self.cluster = emulated_cluster(
            self.api, self.clock, spec=load(f"nodes: [{{count: {nodes}, gpusPerNode: 8}}]\n{PRIORITY_CLASSES}"),
            extra=extra)
        self.api.create(MPIJOBS, mpijob, namespace=NS)

    def run(self, seconds: float = 300.0) -> None:
        self.cluster.run_until(self.clock.now() + seconds)
        self.watch.finish()

    def mpijob(self) -> dict:
        return self.api.get(MPIJOBS, "pi", namespace=NS)

    def reserved_together(self) -> set[frozenset[str]]:
        return {frozenset(pods) for pods in self.recorder.reserved.values() if pods}

    def gangs(self) -> dict[str, dict]:
        return {gang["metadata"]["name"]: gang for gang in self.api.list(GANGS, namespace=NS)}

    def launchers(self) -> set[str]:
        return {name for name, pod in self.recorder.created.items() if role(pod) == "launcher"}


def condition(obj: dict, kind: str) -> tuple[str, str]:
    found = next(c for c in obj["status"]["conditions"] if c["type"] == kind)
    return found["status"], found["reason"]


def assert_succeeded_and_cleaned_up(emulation: Emulation) -> None:
    """The MPIJob succeeded, its workers deleted by its cleanPodPolicy, its launcher pod kept, and
    every Gang of it reads Succeeded."""
    mpijob = emulation.mpijob()
    assert condition(mpijob, "Succeeded") == ("True", "MPIJobSucceeded")
    [launcher] = emulation.api.list(PODS, namespace=NS)
    assert role(launcher) == "launcher" and launcher["status"]["phase"] == "Succeeded"
    gangs = emulation.gangs().values()
    assert gangs and {gang["status"]["phase"] for gang in gangs} == {"Succeeded"}
    assert {gang["metadata"]["ownerReferences"][0]["uid"] for gang in gangs} == {mpijob["metadata"]["uid"]}


def test_the_shipped_mpijob_runs_to_its_end_its_launcher_and_workers_released_as_one_gang():
    emulation = Emulation(gpu_example())
    emulation.run()
    assert_succeeded_and_cleaned_up(emulation)
    [launcher] = emulation.launchers()
    members = WORKERS | {launcher}
    created = emulation.recorder.created
    assert {created[name]["metadata"]["labels"][names.GROUP_LABEL] for name in members} == {GROUP}
    assert all(created[name]["spec"].get("schedulingGates") for name in members), "gated when created"
    assert emulation.reserved_together() == {frozenset(members)}, "the CPU launcher with its GPU workers"
    assert emulation.watch.checker.first_bound == {(NS, GROUP): (3, 3)}, "the first bound only once all were placed"
    assert emulation.watch.violations() == []


def test_waiting_for_its_workers_the_workers_are_one_gang_and_the_launcher_comes_after_alone():
    emulation = Emulation(gpu_example(names.MPI_WAIT_FOR_WORKERS_READY))
    emulation.run()
    assert_succeeded_and_cleaned_up(emulation)
    [launcher] = emulation.launchers()
    assert emulation.reserved_together() == {frozenset(WORKERS), frozenset({launcher})}
    recorder = emulation.recorder
    assert all(recorder.order[launcher] > recorder.ready[worker] for worker in WORKERS), \
        "the launcher is made only once every worker is Ready"
    assert emulation.watch.checker.first_bound == {(NS, f"{GROUP}/worker"): (2, 2), (NS, f"{GROUP}/launcher"): (1, 1)}
    assert len(emulation.gangs()) == 2
    assert emulation.watch.violations() == []


def test_an_mpijob_that_fails_to_bind_is_suspended_by_its_run_policy_and_runs_again_whole():
    emulation = Emulation(gpu_example(), spoil=True)
    emulation.run()
    assert emulation.spoiler.tainted, "a release was spoilt"
    events = emulation.api.list("events", namespace=NS)
    assert any(e["reason"] == "Suspended" and e["involvedObject"]["kind"] == "MPIJob" for e in events)
    assert {("Suspended", "True", "MPIJobSuspended"), ("Suspended", "False", "MPIJobResumed")} <= \
        emulation.recorder.conditions
    assert_succeeded_and_cleaned_up(emulation)
    mpijob = emulation.mpijob()
    assert condition(mpijob, "Suspended") == ("False", "MPIJobResumed")
    assert mpijob["spec"]["runPolicy"]["suspend"] is False and not mpijob["metadata"].get("annotations")
    assert "failed" not in mpijob["status"]["replicaStatuses"]["Launcher"], "no failure counted"
    assert emulation.api.get(JOBS, "pi-launcher", namespace=NS)["status"]["failed"] == 0
    assert len(emulation.launchers()) == 2, "its launcher pod made again, gated, by its resumed Job"
    assert emulation.watch.violations() == []


def test_an_mpijob_preempted_by_a_gang_of_higher_priority_is_suspended_by_its_run_policy_and_ends_once_room_returns():
    mpijob = gpu_example(seconds=120)
    for spec in mpijob["spec"]["mpiReplicaSpecs"].values():
        spec["template"]["spec"]["priorityClassName"] = "low"
    emulation = Emulation(mpijob, nodes=2)
    emulation.run(20)
    assert condition(emulation.mpijob(), "Running") == ("True", "MPIJobRunning")
    emulation.api.create(JOBS, urgent_job(), namespace=ELSEWHERE)
    emulation.run(900)
    [suspension] = [e for e in emulation.api.list("events", namespace=NS)
                    if e["reason"] == "Suspended" and e["involvedObject"]["kind"] == "MPIJob"]
    assert "(preempted)" in suspension["message"]
    assert {("Suspended", "True", "MPIJobSuspended"), ("Suspended", "False", "MPIJobResumed")} <= \
        emulation.recorder.conditions
    urgent = emulation.api.get(JOBS, URGENT, namespace=ELSEWHERE)
    assert urgent["status"]["succeeded"] == 1
    assert_succeeded_and_cleaned_up(emulation)
    mpijob = emulation.mpijob()
    succeeded = next(c for c in mpijob["status"]["conditions"] if c["type"] == "Succeeded")
    assert succeeded["lastTransitionTime"] > urgent["status"]["completionTime"], "ran again once the room returned"
    assert mpijob["spec"]["runPolicy"]["suspend"] is False and not mpijob["metadata"].get("annotations")
    assert "failed" not in mpijob["status"]["replicaStatuses"]["Launcher"], "no failure counted"
    assert emulation.api.get(JOBS, "pi-launcher", namespace=NS)["status"]["failed"] == 0
    assert emulation.watch.violations() == []


def test_an_mpijob_someone_else_suspended_is_never_resumed_by_gangkeeper():
    """Kueue suspends the MPIJobs it queues, and preempts them so: gangkeeper leaves such a switch alone."""
    emulation = Emulation(gpu_example(seconds=600))
    emulation.run(30)
    assert condition(emulation.mpijob(), "Running") == ("True", "MPIJobRunning")
    emulation.api.patch(MPIJOBS, "pi", {"spec": {"runPolicy": {"suspend": True}}}, namespace=NS, user=ADMIN)
    emulation.run(600)
    mpijob = emulation.mpijob()
    assert mpijob["spec"]["runPolicy"]["suspend"] is True
    assert condition(mpijob, "Suspended") == ("True", "MPIJobSuspended")
    assert emulation.api.list(PODS, namespace=NS) == [], "its workers deleted, its launcher Job suspended"
    events = emulation.api.list("events", namespace=NS)
    assert not any(e["reason"] in ("Suspended", "Resumed") and e["involvedObject"]["kind"] == "MPIJob" for e in events)
    assert emulation.watch.violations() == []
