"""Elastic groups end to end on the emulated cluster's virtual clock: an elastic PyTorchJob
(`elasticPolicy` min 4, max 8; 8 workers of 4 GPUs each) on four 8-GPU nodes, and a Gang whose
minimum is lowered while it waits. gangkeeper's real webhook and its controller's loop run in
process (`study.policies`); the emulated training operator follows `elasticPolicy` as the real
one does (`sim.operators.pytorchjob`), and `sim.invariants` checks every change: no group is ever
partly placed before its minimum is booked whole.

A node is drained as `kubectl drain` does it: cordoned, then each of its pods evicted through the
Eviction API. The operator recreates an evicted worker under its name, gated by admission.
"""

from collections import Counter

from gangkeeper import names
from gangkeeper.controller.deciding.settings import Settings
from sim.api import ADMIN, WatchEvent
from sim.clock import VirtualClock
from sim.cluster import emulated_cluster
from sim.invariants import Checker, Watch
from sim.names import DURATION_ANNOTATION, JOBS, NODES, PODS, PYTORCHJOBS
from sim.reservations import GANGS
from sim.spec import load
from study.policies import GangkeeperController, gangkeeper_api
from tests.sim_cluster.disturbances import PRIORITY_CLASSES, URGENT, urgent_job

NS = "ml"
OTHERS = "others"  # not enforced: its pods are nobody's group
JOB = "bert"
MIN, MAX = 4, 8
SETTINGS = Settings(bind_timeout_seconds=60.0, rollback_backoff_seconds=5.0)


def elastic_job(priority_class: str | None = None) -> dict:
    """Job `bert`: 8 workers of 4 GPUs, no master, torchrun between 4 and 8 nodes, an hour of training."""
    container = {"name": "pytorch", "image": "pytorch/pytorch:2.4.0", "command": ["torchrun", "train.py"],
                 "resources": {"limits": {"nvidia.com/gpu": "4"}}}
    spec = {"restartPolicy": "OnFailure", "containers": [container]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": JOB},
            "spec": {"elasticPolicy": {"minReplicas": MIN, "maxReplicas": MAX, "maxRestarts": 3},
                     "pytorchReplicaSpecs": {"Worker": {"replicas": MAX, "restartPolicy": "OnFailure", "template": {
                         "metadata": {"annotations": {DURATION_ANNOTATION: "3600"}}, "spec": spec}}}}}


def size_of(pod: dict) -> int | None:
    """The gangs' minimums: the job's 4, the lowered Gang's 6, the urgent Job's 1."""
    labels = pod["metadata"].get("labels") or {}
    if labels.get(names.KUBEFLOW_JOB_NAME_LABEL) == JOB:
        return MIN
    return {"eight": 6}.get(labels.get(names.GROUP_LABEL, ""), 1)


class Recorder:
    """What happened, in commit order: the controller's passes when each Gang changed (its
    `spec.minCount` and whether it reserved anything), and every time the job was suspended."""

    resources = (GANGS, PYTORCHJOBS)

    def __init__(self, controller: GangkeeperController):
        self.controller = controller
        self.gangs: list[tuple[int, int, bool]] = []  # (passes, spec.minCount, reserved anything)
        self.suspended: list[float] = []  # when the job went from running to suspended
        self._suspended = False

    def observe(self, event: WatchEvent, now: float) -> None:
        obj = event.object
        if event.resource == GANGS:
            self.gangs.append((self.controller.passes, obj["spec"]["minCount"],
                               bool((obj.get("status") or {}).get("reservations"))))
            return
        suspended = ((obj.get("spec") or {}).get("runPolicy") or {}).get("suspend") is True
        if suspended and not self._suspended:
            self.suspended.append(now)
        self._suspended = suspended

    def step(self, now: float) -> bool:
        return False

    def next_due(self) -> float | None:
        return None


class Emulation:
    """Four 8-GPU nodes (two held by another team's Job for `busy_seconds`), gangkeeper, and its
    namespaces `ml` and `urgent`, enforced."""

    def __init__(self, busy_seconds: int | None = None):
        self.clock = VirtualClock()
        self.start = self.clock.now()
        self.api, _ = gangkeeper_api(self.clock.now)
        for namespace in (NS, URGENT):
            self.api.create("namespaces", {"metadata": {"name": namespace,
                                                        "labels": {names.ENFORCE_LABEL: names.ENFORCE_VALUE}}})
        self.api.create("namespaces", {"metadata": {"name": OTHERS}})
        self.watch = Watch(self.api, Checker(bind_timeout=SETTINGS.bind_timeout_seconds, reaction=30.0,
                                             size_of=size_of), clock=self.clock.now)
        self.controller = GangkeeperController(self.api, clock=self.clock.now, settings=SETTINGS)
        self.recorder = Recorder(self.controller)
        busy = ("workloads: [{kind: Job, name: busy, namespace: others, size: 2, gpusPerPod: 8, "
                f"durationSeconds: {busy_seconds}}}]") if busy_seconds else ""
        spec = load(f"nodes: [{{count: 4, gpusPerNode: 8}}]\n{PRIORITY_CLASSES}\n{busy}")
        self.cluster = emulated_cluster(self.api, self.clock, spec=spec, extra=[self.controller, self.recorder])

    def at(self, seconds: float) -> None:
        self.cluster.run_until(self.start + seconds)

    def workers(self) -> list[dict]:
        return [p for p in self.api.list(PODS, namespace=NS)
                if (p["metadata"].get("labels") or {}).get(names.KUBEFLOW_JOB_NAME_LABEL) == JOB]

    def running(self) -> int:
        return sum(1 for p in self.workers() if p["status"].get("phase") == "Running"
                   and not p["metadata"].get("deletionTimestamp"))

    def gated(self) -> int:
        return sum(1 for p in self.workers() if p["spec"].get("schedulingGates"))

    def gang(self, prefix: str = JOB) -> dict:
        (gang,) = [g for g in self.api.list(GANGS, namespace=NS) if g["metadata"]["name"].startswith(prefix)]
        return gang

    def degraded(self) -> dict | None:
        return next((c for c in self.gang()["status"].get("conditions") or () if c["type"] == "Degraded"), None)

    def events(self, reason: str, kind: str = "Gang") -> list[dict]:
        return [e for e in self.api.list("events", namespace=NS)
                if e.get("reason") == reason and e["involvedObject"]["kind"] == kind]

    def nodes_of_workers(self) -> Counter:
        return Counter(p["spec"].get("nodeName") for p in self.workers() if p["spec"].get("nodeName"))

    def drain(self, node: str) -> None:
        """`kubectl drain`: the node cordoned, each of its pods evicted."""
        self.api.patch(NODES, node, {"spec": {"unschedulable": True}}, user=ADMIN)
        for pod in self.api.list(PODS):
            if pod["spec"].get("nodeName") == node and not pod["metadata"].get("deletionTimestamp"):
                self.api.evict(pod["metadata"]["namespace"], pod["metadata"]["name"])

    def uncordon(self, node: str) -> None:
        self.api.patch(NODES, node, {"spec": {"unschedulable": False}}, user=ADMIN)


def running_whole() -> Emulation:
    """The elastic job, running with all 8 of its workers."""
    emulation = Emulation()
    emulation.api.create(PYTORCHJOBS, elastic_job(), namespace=NS)
    emulation.at(60)
    assert emulation.running() == MAX
    return emulation


def test_an_elastic_job_is_admitted_at_its_minimum_when_only_that_fits_and_grows_to_its_maximum():
    emulation = Emulation(busy_seconds=300)
    emulation.at(10)
    emulation.api.create(PYTORCHJOBS, elastic_job(), namespace=NS)
    emulation.at(120)
    assert (emulation.running(), emulation.gated()) == (MIN, MAX - MIN), "admitted at 4: only two nodes are free"
    status = emulation.gang()["status"]
    assert (status["phase"], status["minCount"], status["placed"], status["peak"]) == ("Running", MIN, MIN, MIN)
    emulation.at(600)  # the other team's Job ended at 300 s
    assert emulation.running() == MAX and emulation.gated() == 0, "grew to 8 as room freed"
    assert emulation.gang()["status"]["peak"] == MAX and emulation.degraded() is None
    assert emulation.events("MembersLost") == [] and emulation.recorder.suspended == []
    assert emulation.watch.violations() == []


def test_an_elastic_job_keeps_running_degraded_when_two_members_node_is_drained_and_says_so():
    emulation = running_whole()
    (node, _), *_ = emulation.nodes_of_workers().most_common()
    emulation.drain(node)
    emulation.at(600)
    assert emulation.running() == MAX - 2 and emulation.gated() == 2, "the operator recreated them; no room"
    assert emulation.recorder.suspended == [] and emulation.controller.rollbacks == 0, "6 of min 4: no rollback"
    condition = emulation.degraded()
    assert (condition["status"], condition["reason"], condition["message"]) == ("True", "MembersLost",
                                                                                 "6/8 members, min 4")
    (event,) = emulation.events("MembersLost")
    assert event["type"] == "Warning" and "6/8 members, min 4" in event["message"]
    emulation.uncordon(node)
    emulation.at(900)
    assert emulation.running() == MAX, "its replacements placed as room came back"
    assert emulation.degraded() is None and len(emulation.events("Recovered")) == 1
    assert len(emulation.events("MembersLost")) == 1, "said once"
    assert emulation.watch.violations() == []


def test_an_elastic_job_is_rolled_back_only_once_fewer_than_its_minimum_remain():
    emulation = running_whole()
    nodes = [node for node, _ in emulation.nodes_of_workers().most_common()]
    for node in nodes[:2]:
        emulation.drain(node)
    emulation.at(600)
    assert emulation.running() == MIN and emulation.recorder.suspended == [], "4 of min 4: it runs on"
    assert emulation.degraded()["message"] == "4/8 members, min 4"
    emulation.drain(nodes[2])
    emulation.at(900)
    assert len(emulation.recorder.suspended) == 1 and emulation.controller.rollbacks == 1, \
        "2 of min 4: taken back whole, its operator suspended"
    assert emulation.running() == 0
    assert emulation.watch.violations() == []


def test_a_gang_lowered_from_8_to_6_while_it_waits_is_admitted_in_the_next_pass():
    emulation = Emulation()
    emulation.api.create(GANGS, {"apiVersion": "gangkeeper.io/v1alpha1", "kind": "Gang",
                                 "metadata": {"name": "eight"}, "spec": {"minCount": 8}}, namespace=NS)
    emulation.api.patch(NODES, emulation.api.list(NODES)[0]["metadata"]["name"], {"spec": {"unschedulable": True}},
                        user=ADMIN)  # three nodes: room for 6 members of 4 GPUs, not 8
    for i in range(8):
        emulation.api.create(PODS, {"metadata": {"name": f"eight-{i}", "labels": {names.GROUP_LABEL: "eight"},
                                                 "annotations": {DURATION_ANNOTATION: "3600"}},
                                    "spec": {"restartPolicy": "Never", "containers": [{
                                        "name": "main", "image": "busybox:1.36",
                                        "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}, namespace=NS)
    emulation.at(120)
    assert emulation.gang("eight")["status"]["reason"] == "NoFit"
    lowered = emulation.controller.passes
    emulation.api.patch(GANGS, "eight", {"spec": {"minCount": 6}}, namespace=NS, user=ADMIN)
    emulation.at(240)
    reserved = [passes for passes, _, booked in emulation.recorder.gangs if booked]
    assert reserved and reserved[0] == lowered + 1, "reserved by the first pass after the change"
    running = [p for p in emulation.api.list(PODS, namespace=NS) if p["status"].get("phase") == "Running"]
    assert len(running) == 6
    assert emulation.watch.violations() == []


def test_a_group_of_higher_priority_takes_two_elastic_extras_and_the_job_runs_on():
    emulation = Emulation()
    emulation.api.create(PYTORCHJOBS, elastic_job("low"), namespace=NS)
    emulation.at(60)
    assert emulation.running() == MAX
    before = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in emulation.workers()}
    emulation.api.create(JOBS, urgent_job(), namespace=URGENT)
    emulation.at(75)
    (taken,) = emulation.events("ExtrasPreempted")
    assert taken["type"] == "Warning" and "took 2 elastic extras" in taken["message"]
    pods_told = emulation.events("ExtrasPreempted", kind="Pod")
    assert len(pods_told) == 2 and len({before[e["involvedObject"]["name"]] for e in pods_told}) == 1, \
        "the two workers of one node"
    assert emulation.recorder.suspended == [] and emulation.controller.preemptions == {"extras": 2}
    assert emulation.running() == MAX - 2 and emulation.gated() == 2
    emulation.at(300)  # the urgent Job ran its 30 s
    assert emulation.api.get(JOBS, URGENT, namespace=URGENT)["status"]["succeeded"] == 1
    assert emulation.running() == MAX, "the extras back once the room returned"
    assert emulation.watch.violations() == []
