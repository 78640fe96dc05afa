"""Gangs on an autoscaled cluster, end to end on the emulated cluster's virtual clock: the emulated
cluster-autoscaler (`sim.autoscaler`), gangkeeper's real webhook and its controller's loop in
process (`study.policies`), `sim.invariants` checking every change.

Two static 8-GPU nodes run a Job of another team (a namespace gangkeeper does not enforce) that
never ends; a node group adds up to `max` more 8-GPU nodes, each Ready 60 s after it is asked for.
A 4 × 8-GPU Job (`train`) cannot fit on today's nodes: it needs the autoscaler, which ignores its
gated pods unless gangkeeper asks for them (`--capacity-provisioning`).
"""

from collections import Counter

from gangkeeper import names
from gangkeeper.controller.deciding.settings import CapacityProvisioning, Provisioning, Settings
from sim.api import WatchEvent
from sim.clock import VirtualClock
from sim.cluster import emulated_cluster
from sim.deployed import install_placeholder_priority_class
from sim.invariants import Checker, Watch
from sim.names import NODE_GROUP_LABEL
from sim.reservations import GANGS
from sim.spec import load
from study.policies import GangkeeperController, gangkeeper_api

NS = "ml"
OTHERS = "others"  # not enforced: its pods are nobody's group
SIZE = 4


def spec(max_nodes: int = 8, extra: str = "", provisioning_seconds: int = 60) -> str:
    return f"""
nodes: [{{count: 2, gpusPerNode: 8}}]
nodeGroups: [{{name: pool, max: {max_nodes}, gpusPerNode: 8, provisioningSeconds: {provisioning_seconds}}}]
priorityClasses: [{{name: urgent, value: 1000}}]
workloads:
  - {{kind: Job, name: busy, namespace: {OTHERS}, size: 2, gpusPerPod: 8}}
  - {{kind: Job, name: train, namespace: {NS}, size: {SIZE}, gpusPerPod: 8, durationSeconds: 600, submitSeconds: 5}}
{extra}"""


def size_of(pod: dict) -> int | None:
    group = (pod["metadata"].get("labels") or {}).get(names.GROUP_LABEL, "")
    return SIZE if group.startswith("train") else None


class Recorder:
    """Every ProvisioningRequest and placeholder ever created, and every node added."""

    resources = ("provisioningrequests", "pods", "nodes")

    def __init__(self):
        self.requests: list[str] = []
        self.placeholders: list[str] = []
        self.added: list[str] = []

    def observe(self, event: WatchEvent, now: float) -> None:
        obj = event.object
        if event.type != "ADDED":
            return
        name = obj["metadata"]["name"]
        if event.resource == "provisioningrequests":
            self.requests.append(name)
        elif event.resource == "pods" and names.CAPACITY_FOR_LABEL in (obj["metadata"].get("labels") or {}):
            self.placeholders.append(name)
        elif event.resource == "nodes" and NODE_GROUP_LABEL in obj["metadata"]["labels"]:
            self.added.append(name)

    def step(self, now: float) -> bool:
        return False

    def next_due(self) -> float | None:
        return None


class Autoscaled:
    """The emulated cluster with gangkeeper asking for capacity by `mode`."""

    def __init__(self, mode: CapacityProvisioning, *, max_nodes: int = 8, extra: str = "",
                 provisioning_seconds: int = 60, **provisioning):
        self.clock = VirtualClock()
        self.start = self.clock.now()
        self.api, _ = gangkeeper_api(self.clock.now)
        self.api.create("namespaces", {"metadata": {"name": NS, "labels": {names.ENFORCE_LABEL: names.ENFORCE_VALUE}}})
        self.api.create("namespaces", {"metadata": {"name": OTHERS}})
        install_placeholder_priority_class(self.api)
        settings = Settings(provisioning=Provisioning(mode=mode, **provisioning))
        self.watch = Watch(self.api, Checker(bind_timeout=settings.bind_timeout_seconds, reaction=30.0, size_of=size_of),
                           clock=self.clock.now)
        self.recorder = Recorder()
        self.controller = GangkeeperController(self.api, clock=self.clock.now, settings=settings)
        self.cluster = emulated_cluster(self.api, self.clock, spec=load(spec(max_nodes, extra, provisioning_seconds)),
                                        extra=[self.controller, self.recorder])

    def at(self, seconds: float) -> None:
        self.cluster.run_until(self.start + seconds)

    def train_pods(self) -> list[dict]:
        return [p for p in self.api.list("pods", namespace=NS)
                if (p["metadata"].get("labels") or {}).get(names.GROUP_LABEL, "").startswith("train")]

    def bound_on(self) -> Counter:
        """Where the train pods run: on a node the autoscaler added, or on one of the static ones."""
        added = set(self.recorder.added)
        return Counter("added" if p["spec"].get("nodeName") in added else p["spec"].get("nodeName") or "nowhere"
                       for p in self.train_pods())

    def left(self, resource: str) -> list[str]:
        return [o["metadata"]["name"] for o in self.api.list(resource, namespace=NS)
                if names.CAPACITY_FOR_LABEL in (o["metadata"].get("labels") or {})]

    def gang(self) -> dict:
        (gang,) = [g for g in self.api.list(GANGS, namespace=NS) if g["metadata"]["name"].startswith("train")]
        return gang

    def events(self, reason: str, kind: str = "Gang") -> list[dict]:
        return [e for e in self.api.list("events", namespace=NS)
                if e.get("reason") == reason and e["involvedObject"]["kind"] == kind]


def test_without_provisioning_the_job_waits_for_ever_and_nothing_scales():
    cluster = Autoscaled(CapacityProvisioning.NONE)
    cluster.at(1800)
    assert cluster.recorder.added == [] and cluster.bound_on() == Counter(nowhere=SIZE)
    assert cluster.gang()["status"]["reason"] == "NoFit"


def test_provisioned_one_request_brings_four_nodes_and_the_job_is_bound_whole_on_them():
    cluster = Autoscaled(CapacityProvisioning.PROVISIONING_REQUEST)
    cluster.at(30)
    assert cluster.gang()["status"]["reason"] == "Provisioning"
    assert len(cluster.left("provisioningrequests")) == 1 and len(cluster.left("podtemplates")) == 1
    (asked,) = cluster.events("Provisioning")
    assert "32 nvidia.com/gpu" in asked["message"] and cluster.left("provisioningrequests")[0] in asked["message"]
    cluster.at(300)
    assert len(cluster.recorder.requests) == 1, "one request, asked once"
    assert len(cluster.recorder.added) == SIZE
    assert cluster.bound_on() == Counter(added=SIZE)
    (request,) = cluster.recorder.requests
    assert {p["metadata"]["annotations"][names.CONSUME_PROVISIONING_REQUEST_ANNOTATION] for p in cluster.train_pods()} \
        == {request}, "its members consume the booking"
    assert cluster.left("provisioningrequests") == [] and cluster.left("podtemplates") == [], "taken back once it runs"
    assert cluster.watch.checker.first_bound[(NS, cluster.gang()["spec"]["groupName"])] == (SIZE, SIZE)
    assert cluster.watch.violations() == []


def test_placeholders_bring_four_nodes_and_are_swapped_for_the_job_bound_whole():
    cluster = Autoscaled(CapacityProvisioning.PLACEHOLDERS)
    cluster.at(30)
    assert len(cluster.left("pods")) == SIZE and cluster.recorder.requests == []
    cluster.at(400)
    assert len(cluster.recorder.placeholders) == SIZE, "made once"
    assert len(cluster.recorder.added) == SIZE
    assert cluster.bound_on() == Counter(added=SIZE)
    assert cluster.left("pods") == [], "the placeholders went for the members"
    assert cluster.watch.violations() == []


def test_a_booking_that_expires_before_the_nodes_take_the_job_is_asked_for_again():
    """The nodes take 15 minutes to come; the autoscaler books them for 10 from when it asked."""
    cluster = Autoscaled(CapacityProvisioning.PROVISIONING_REQUEST, provisioning_seconds=900)
    cluster.at(800)
    assert len(cluster.events("ProvisioningFailed")) == 1
    assert "bookingexpired" in cluster.events("ProvisioningFailed")[0]["message"].lower()
    cluster.at(1200)
    assert len(cluster.recorder.requests) == 2, "asked again after the backoff"
    assert len(cluster.recorder.added) == SIZE, "the nodes on their way served the second request"
    assert cluster.bound_on() == Counter(added=SIZE)
    assert cluster.watch.violations() == []


def test_a_job_larger_than_the_node_groups_max_is_reported_once_and_nothing_scales():
    cluster = Autoscaled(CapacityProvisioning.PROVISIONING_REQUEST, max_nodes=3)
    cluster.at(3600)
    assert cluster.recorder.added == [] and cluster.bound_on() == Counter(nowhere=SIZE)
    assert len(cluster.recorder.requests) == 1, "never asked again while the autoscaler keeps looking"
    assert len(cluster.events("ProvisioningFailed")) == 1
    assert len(cluster.events("ProvisioningFailed", kind="Pod")) == SIZE, "each member told once, on itself"
    assert cluster.gang()["status"]["reason"] == "ProvisioningFailed"
    assert cluster.watch.violations() == []


def test_a_deleted_job_leaves_no_request_template_or_placeholder_behind():
    for mode in (CapacityProvisioning.PROVISIONING_REQUEST, CapacityProvisioning.PLACEHOLDERS):
        cluster = Autoscaled(mode, max_nodes=3)
        cluster.at(60)
        assert cluster.left("provisioningrequests") or cluster.left("pods")
        cluster.api.delete("jobs", "train", namespace=NS, propagation_policy="Foreground")
        cluster.at(120)
        assert (cluster.left("provisioningrequests"), cluster.left("podtemplates"), cluster.left("pods")) == ([], [], [])
        assert cluster.watch.violations() == []


def test_a_high_priority_pod_preempts_placeholders_and_never_waits_on_them():
    cluster = Autoscaled(CapacityProvisioning.PLACEHOLDERS, max_nodes=3)  # too few nodes: the placeholders stay
    cluster.at(300)
    held = {p["spec"]["nodeName"] for p in cluster.api.list("pods", namespace=NS)
            if names.CAPACITY_FOR_LABEL in p["metadata"]["labels"] and p["spec"].get("nodeName")}
    assert held, "placeholders hold the nodes added for them"
    cluster.api.create("pods", {"metadata": {"name": "urgent"}, "spec": {
        "priorityClassName": "urgent", "containers": [{"name": "c", "image": "busybox:1.36", "resources": {
            "limits": {"nvidia.com/gpu": "8", "cpu": "1", "memory": "1Gi"}}}]}}, namespace=OTHERS)
    cluster.at(310)
    urgent = cluster.api.get("pods", "urgent", namespace=OTHERS)
    assert urgent["spec"].get("nodeName") in held, "it took a placeholder's node at once"
    assert cluster.watch.violations() == []
