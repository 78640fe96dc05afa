"""Trees of groups end to end on the emulated cluster's virtual clock (issue 25): an inference pair,
a prefill group (2 pods) and a decode group (4 pods), tied into one parent Gang: each a Gang of
plain labelled pods naming it in `spec.parent`, or each a Job whose pods name it with the label
`gangkeeper.io/parent`. gangkeeper's real webhook and its controller's loop run in process
(`study.policies`); `sim.invariants` checks every change of each group, and `TreeHold` the tree:
no member of it is released while any member of it holds no reservation.
"""

from collections.abc import Callable

import pytest

from gangkeeper import names
from gangkeeper.controller.deciding.settings import Settings
from sim.api import APIError, WatchEvent
from sim.clock import VirtualClock
from sim.cluster import emulated_cluster
from sim.invariants import Checker, Watch
from sim.names import DURATION_ANNOTATION, JOBS, JOBSETS, LEADERWORKERSETS, NODES, PODS
from sim.reservations import GANGS
from sim.spec import load
from study.policies import GangkeeperController, gangkeeper_api

NS = "ml"
SIZES = {"prefill": 2, "decode": 4}
SETTINGS = Settings(bind_timeout_seconds=60.0)


def gang(name: str, spec: dict) -> dict:
    return {"apiVersion": "gangkeeper.io/v1alpha1", "kind": "Gang", "metadata": {"name": name}, "spec": spec}


def member(name: str, group: str) -> dict:
    return {"metadata": {"name": name, "labels": {names.GROUP_LABEL: group},
                         "annotations": {DURATION_ANNOTATION: "3600"}},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "main", "image": "vllm/vllm-openai:v0.6.0",
                "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}


def job(name: str, size: int) -> dict:
    """A Job of `size` pods of 8 GPUs, its pods naming the parent Gang `pair`."""
    container = {"name": "main", "image": "vllm/vllm-openai:v0.6.0", "resources": {"limits": {"nvidia.com/gpu": "8"}}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"parallelism": size, "completions": size, "backoffLimit": 0, "template": {
                "metadata": {"labels": {names.PARENT_LABEL: "pair"}, "annotations": {DURATION_ANNOTATION: "3600"}},
                "spec": {"restartPolicy": "Never", "containers": [container]}}}}


def child_of(pod: dict) -> str:
    """The child group a pod is in: its group label, or its Job."""
    labels = pod["metadata"].get("labels") or {}
    return labels.get(names.JOB_NAME_LABEL) or labels.get(names.GROUP_LABEL, "")


def size_of(pod: dict) -> int | None:
    return SIZES.get(child_of(pod))


class TreeHold:
    """The tree's promise, checked on every pod and Gang change: while any member of the tree (the
    pods `member_of` says, `size` of them) is released (its gate gone), every member of it holds a
    reservation or is released."""

    resources = (PODS, GANGS)

    def __init__(self, member_of: Callable[[dict], bool], size: int) -> None:
        self.member_of, self.size = member_of, size
        self.gated: dict[str, bool] = {}  # member → still gated
        self.reserved: dict[str, set[str]] = {}  # Gang → the members its status reserves
        self.broken: list[str] = []
        self.released_at: float | None = None

    def observe(self, event: WatchEvent, now: float) -> None:
        obj = event.object
        name = obj["metadata"]["name"]
        if event.resource == GANGS:
            self.reserved[name] = set((obj.get("status") or {}).get("reservations") or {})
        elif self.member_of(obj):
            if event.type == "DELETED":
                self.gated.pop(name, None)
            else:
                self.gated[name] = bool(obj["spec"].get("schedulingGates"))
        released = [pod for pod, gated in self.gated.items() if not gated]
        if released:
            self.released_at = self.released_at if self.released_at is not None else now
            booked = set().union(*self.reserved.values()) | set(released)
            unbooked = sorted(set(self.gated) - booked)
            if unbooked or len(self.gated) < self.size:
                self.broken.append(f"at {now}: {released} released while {unbooked} hold no reservation")

    def step(self, now: float) -> bool:
        return False

    def next_due(self) -> float | None:
        return None


class TreeCluster:
    """An emulated cluster of `nodes` (a `sim.spec` text) with gangkeeper and an enforced namespace,
    its invariants and its tree (`TreeHold`: pods `size_of` sizes, `tree_size` of them) watched."""

    def __init__(self, nodes: str, size_of: Callable[[dict], int | None], tree_size: int) -> None:
        self.clock = VirtualClock()
        self.start = self.clock.now()
        self.api, _ = gangkeeper_api(self.clock.now)
        self.api.create("namespaces", {"metadata": {"name": NS, "labels": {names.ENFORCE_LABEL: names.ENFORCE_VALUE}}})
        self.api.create("namespaces", {"metadata": {"name": "others"}})
        self.watch = Watch(self.api, Checker(bind_timeout=SETTINGS.bind_timeout_seconds, reaction=30.0,
                                             size_of=size_of), clock=self.clock.now)
        self.tree = TreeHold(lambda pod: size_of(pod) is not None, tree_size)
        self.controller = GangkeeperController(self.api, clock=self.clock.now, settings=SETTINGS)
        self.cluster = emulated_cluster(self.api, self.clock, spec=load(nodes), extra=[self.controller, self.tree])

    def at(self, seconds: float) -> None:
        self.cluster.run_until(self.start + seconds)


class Emulation(TreeCluster):
    """Six 8-GPU nodes, two of them held by another team's Job for its first 300 s; the tree's pods
    are those `size_of` sizes, `tree_size` of them."""

    def __init__(self, size_of: Callable[[dict], int | None] = size_of, tree_size: int = sum(SIZES.values())) -> None:
        super().__init__("nodes: [{count: 6, gpusPerNode: 8}]\nworkloads: [{kind: Job, name: busy, namespace: "
                         "others, size: 2, gpusPerPod: 8, durationSeconds: 300}]", size_of, tree_size)

    def running(self, group: str) -> int:
        return sum(1 for p in self.api.list(PODS, namespace=NS)
                   if child_of(p) == group and p["status"].get("phase") == "Running")

    def status(self, name: str) -> dict:
        return self.api.get(GANGS, name, namespace=NS).get("status") or {}


def test_an_inference_pair_is_bound_together_or_not_at_all():
    emulation = Emulation()
    emulation.at(10)  # the other team's Job holds 2 of the 6 nodes: room for decode or prefill, not both
    emulation.api.create(GANGS, gang("pair", {"minGroupCount": 2}), namespace=NS)
    for group, size in SIZES.items():
        emulation.api.create(GANGS, gang(group, {"minCount": size, "parent": "pair"}), namespace=NS)
        for i in range(size):
            emulation.api.create(PODS, member(f"{group}-{i}", group), namespace=NS)
    emulation.at(240)
    assert (emulation.running("prefill"), emulation.running("decode")) == (0, 0), "neither alone"
    pair = emulation.status("pair")
    assert (pair["phase"], pair["present"], pair["minCount"], pair["placed"]) == ("Waiting", 2, 2, 0)
    assert [(c["name"], c["present"], c["placed"]) for c in pair["children"]] == [("decode", 4, 0), ("prefill", 2, 0)]
    assert "tree pair: 1 of min group count 2 children fit together" in pair["conditions"][0]["message"]
    assert emulation.status("decode")["reason"] == "NoFit"
    emulation.at(600)  # the other team's Job ended at 310 s
    assert (emulation.running("prefill"), emulation.running("decode")) == (2, 4), "both, together"
    pair = emulation.status("pair")
    assert (pair["phase"], pair["placed"]) == ("Running", 2)
    assert [c["placed"] for c in pair["children"]] == [4, 2]
    assert emulation.tree.released_at is not None and emulation.tree.broken == []
    assert emulation.watch.violations() == []


def test_two_jobs_tied_into_one_parent_by_a_label_come_up_together():
    emulation = Emulation()
    emulation.at(10)
    emulation.api.create(GANGS, gang("pair", {"minGroupCount": 2}), namespace=NS)
    for name, size in SIZES.items():
        emulation.api.create(JOBS, job(name, size), namespace=NS)
    emulation.at(240)
    assert (emulation.running("prefill"), emulation.running("decode")) == (0, 0), "neither alone"
    children = {g["metadata"]["name"]: g["spec"].get("parent") for g in emulation.api.list(GANGS, namespace=NS)
                if g["metadata"]["name"] != "pair"}
    assert sorted(children.values()) == ["pair", "pair"], "the Gangs gangkeeper made name the parent"
    assert emulation.status("pair")["phase"] == "Waiting"
    emulation.at(600)
    assert (emulation.running("prefill"), emulation.running("decode")) == (2, 4), "both, together"
    assert emulation.status("pair")["phase"] == "Running"
    assert emulation.tree.released_at is not None and emulation.tree.broken == []
    assert emulation.watch.violations() == []


def test_a_parent_refused_by_the_webhook_names_the_field():
    emulation = Emulation()
    with pytest.raises(APIError) as refused:
        emulation.api.create(GANGS, gang("pair", {"minGroupCount": 2, "parent": "pair"}), namespace=NS)
    assert 'spec.parent: "pair" is not accepted: a Gang cannot be its own parent' in str(refused.value)


# --- a JobSet as a tree (stage 3) -----------------------------------------------------------------

RACK = "example.com/rack"
ZONE = "topology.kubernetes.io/zone"
JOBSET_JOBS = 4  # replicated jobs of one Job of 4 pods, 8 GPUs each


def tree_jobset() -> dict:
    """JobSet `train`: 4 replicated jobs × 4 pods, each job in one rack, all in one zone, min group count 4."""
    container = {"name": "main", "image": "pytorch/pytorch:2.4.0", "resources": {"limits": {"nvidia.com/gpu": "8"}}}
    template = {"spec": {"parallelism": 4, "completions": 4, "backoffLimit": 0, "template": {
        "metadata": {"annotations": {DURATION_ANNOTATION: "3600", names.TOPOLOGY_REQUIRED_ANNOTATION: RACK}},
        "spec": {"restartPolicy": "Never", "containers": [container]}}}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "train", "annotations": {names.TREE_ANNOTATION: names.TREE_BY_REPLICATED_JOB,
                                                          names.MIN_GROUP_COUNT_ANNOTATION: "4",
                                                          names.TOPOLOGY_REQUIRED_ANNOTATION: ZONE}},
            "spec": {"replicatedJobs": [{"name": f"job{i}", "replicas": 1, "template": template}
                                        for i in range(JOBSET_JOBS)]}}


class Racks(TreeCluster):
    """Two zones of 4 racks of 4 8-GPU nodes; one node of a rack in each zone held by another team's
    pod (zone a's for its first 300 s): 3 free racks a zone, 6 in all, until zone a has 4."""

    def __init__(self) -> None:
        super().__init__("nodes: [{count: 32, gpusPerNode: 8, topology: ["
                         f"{{label: {ZONE}, nodes: 16, values: [a, b]}}, {{label: {RACK}, nodes: 4}}]}}]",
                         lambda pod: 4 if _job_of(pod) else None, JOBSET_JOBS * 4)
        for zone, seconds in (("a", "300"), ("b", None)):
            node = next(n for n in self.api.list(NODES) if n["metadata"]["labels"][ZONE] == zone)
            annotations = {DURATION_ANNOTATION: seconds} if seconds else {}
            self.api.create(PODS, {"metadata": {"name": f"busy-{zone}", "annotations": annotations},
                                   "spec": {"nodeName": node["metadata"]["name"], "restartPolicy": "Never",
                                            "containers": [{"name": "main", "image": "busybox:1.36", "resources": {
                                                "limits": {"nvidia.com/gpu": "8"}}}]}}, namespace="others")

    def placed(self) -> dict[str, set[tuple[str, str]]]:
        """Per replicated job, the (zone, rack) of its pods bound."""
        labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in self.api.list(NODES)}
        found: dict[str, set[tuple[str, str]]] = {}
        for pod in self.api.list(PODS, namespace=NS):
            node = pod["spec"].get("nodeName")
            if node:
                found.setdefault(_job_of(pod), set()).add((labels[node][ZONE], labels[node][RACK]))
        return found


def _job_of(pod: dict) -> str:
    return (pod["metadata"].get("labels") or {}).get("jobset.sigs.k8s.io/replicatedjob-name", "")


def test_a_jobset_as_a_tree_is_never_partly_placed_and_is_admitted_when_one_zone_has_four_free_racks():
    emulation = Racks()
    emulation.api.create(JOBSETS, tree_jobset(), namespace=NS)
    emulation.at(240)
    assert emulation.placed() == {}, "6 free racks, but no zone with 4"
    parent = emulation.api.get(GANGS, "train", namespace=NS)
    assert parent["spec"] == {"minGroupCount": 4, "topology": {"required": ZONE}}
    assert parent["metadata"]["ownerReferences"][0]["kind"] == "JobSet"
    status = parent["status"]
    assert (status["phase"], status["present"], status["minCount"], status["placed"]) == ("Waiting", 4, 4, 0)
    assert "needs 128 nvidia.com/gpu for 4 of its children in one zone" in status["conditions"][0]["message"]
    emulation.at(600)  # zone a's held node came free at 300 s
    placed = emulation.placed()
    assert sorted(placed) == [f"job{i}" for i in range(JOBSET_JOBS)]
    assert all(len(domains) == 1 for domains in placed.values()), "each job in one rack"
    assert {zone for domains in placed.values() for zone, _ in domains} == {"a"}, "all in one zone"
    assert len({rack for domains in placed.values() for _, rack in domains}) == 4
    assert emulation.api.get(GANGS, "train", namespace=NS)["status"]["phase"] == "Running"
    assert emulation.tree.released_at is not None and emulation.tree.broken == []
    assert emulation.watch.violations() == []


# --- a LeaderWorkerSet's replica groups as a tree (stage 4) --------------------------------------------

def tree_lws() -> dict:
    """LWS `serve`: 2 replica groups of 3 pods of 8 GPUs, asked to form one tree."""
    container = {"name": "vllm", "image": "vllm/vllm-openai:v0.6.0", "resources": {"limits": {"nvidia.com/gpu": "8"}}}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "serve", "annotations": {names.TREE_ANNOTATION: names.TREE_BY_REPLICA_GROUP}},
            "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 3, "workerTemplate": {
                "metadata": {"annotations": {DURATION_ANNOTATION: "3600"}},
                "spec": {"containers": [container]}}}}}


def lws_size(pod: dict) -> int | None:
    return 3 if (pod["metadata"].get("labels") or {}).get(names.LWS_NAME_LABEL) == "serve" else None


def test_a_leaderworkersets_replica_groups_asked_to_form_one_tree_come_up_together():
    emulation = Emulation(lws_size, 6)
    emulation.at(10)  # 4 nodes free: room for one replica group of 3, not both
    emulation.api.create(LEADERWORKERSETS, tree_lws(), namespace=NS)
    emulation.at(240)
    serving = [p for p in emulation.api.list(PODS, namespace=NS) if lws_size(p)]
    assert len(serving) == 6 and not any(p["spec"].get("nodeName") for p in serving), "neither group alone"
    parent = emulation.api.get(GANGS, "serve", namespace=NS)
    assert parent["spec"] == {"minGroupCount": 2} and parent["status"]["phase"] == "Waiting"
    emulation.at(600)  # the other team's Job ended at 310 s
    serving = [p for p in emulation.api.list(PODS, namespace=NS) if lws_size(p)]
    assert sum(1 for p in serving if p["status"].get("phase") == "Running") == 6, "both, together"
    assert emulation.status("serve")["phase"] == "Running"
    assert emulation.tree.released_at is not None and emulation.tree.broken == []
    assert emulation.watch.violations() == []
