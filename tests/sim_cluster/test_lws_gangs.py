"""LeaderWorkerSets under gangkeeper, end to end on the emulated cluster's virtual clock.

The shipped example (`tests/fixtures/ecosystem/examples/leaderworkerset.yaml`), with 2 replica
groups of 4 pods that ask for 2 GPUs each, is created in an enforced namespace: the emulated LWS
controllers and StatefulSet controller make the pods, LWS's pod webhook labels them before or
after gangkeeper's real webhook (`study.policies`: the product's webhook in process, its
controller's loop on the virtual clock), and `sim.invariants` checks every change: no group is
ever bound or released in part, nothing holds GPUs while its group is incomplete. Which pods
each Gang reserved is read off the Gangs' `status.reservations` as the controller writes them.
"""

from pathlib import Path

import pytest
import yaml

from gangkeeper import names
from gangkeeper.controller.deciding.settings import Settings
from sim.api import WatchEvent
from sim.clock import VirtualClock
from sim.cluster import emulated_cluster
from sim.invariants import Checker, Watch
from sim.names import PODS
from sim.operators import lws as emulated_lws
from sim.reservations import GANGS
from sim.spec import load
from study.policies import WEBHOOK_SERVICE, GangkeeperController, gangkeeper_api
from tests.sim_cluster.disturbances import Spoiler

EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "ecosystem" / "examples" / "leaderworkerset.yaml"
NS = "ml"
LWS = "leaderworkerset-sample"
GROUPS = {0: {f"{LWS}-0", f"{LWS}-0-1", f"{LWS}-0-2", f"{LWS}-0-3"},
          1: {f"{LWS}-1", f"{LWS}-1-1", f"{LWS}-1-2", f"{LWS}-1-3"}}
# A name that sorts before gangkeeper's configuration: the API server then calls LWS's webhook first.
LWS_WEBHOOK_FIRST = "0-lws-mutating-webhook-configuration"
RUN_SECONDS = 300.0
SETTINGS = Settings(bind_timeout_seconds=60.0, rollback_backoff_seconds=5.0)
WEBHOOK_ORDERS = pytest.mark.parametrize("lws_first", [False, True], ids=["gangkeeper-first", "lws-first"])


def gpu_example(startup_policy: str | None) -> dict:
    """The shipped LWS with 2 replica groups whose pods ask for 2 GPUs each."""
    lws = yaml.safe_load(EXAMPLE.read_text())
    lws["spec"]["replicas"] = 2
    if startup_policy:
        lws["spec"]["startupPolicy"] = startup_policy
    container = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    container["resources"]["limits"]["nvidia.com/gpu"] = "2"
    return lws


def part(pod: dict) -> str:
    """Under LeaderReady the leader and its workers are groups apart: the checker counts them so."""
    labels = pod["metadata"].get("labels") or {}
    role = "leader" if labels.get(names.LWS_WORKER_INDEX_LABEL) == "0" else "workers"
    return f"{labels.get(names.GROUP_LABEL, '')}/{role}" if labels.get(names.GROUP_LABEL) else ""


class Recorder:
    """The order of what the API server committed: every pod's creation and first readiness, and
    the pods each Gang ever reserved."""

    resources = (PODS, GANGS)

    def __init__(self):
        self.seen = 0
        self.created: dict[str, int] = {}
        self.ready: dict[str, int] = {}
        self.reserved: dict[str, set[str]] = {}  # Gang → pod names
        self.gangs: dict[str, dict] = {}

    def observe(self, event: WatchEvent, now: float) -> None:
        self.seen += 1
        name = event.object["metadata"]["name"]
        if event.resource == GANGS:
            self.gangs[name] = event.object
            self.reserved.setdefault(name, set()).update((event.object.get("status") or {}).get("reservations") or {})
        elif event.type == "ADDED":
            self.created.setdefault(name, self.seen)
        elif emulated_lws.pod_ready(event.object):
            self.ready.setdefault(name, self.seen)

    def step(self, now: float) -> bool:
        return False

    def next_due(self) -> float | None:
        return None


class Emulation:
    """An emulated cluster of `nodes` 8-GPU nodes with gangkeeper, the example LWS created in it."""

    def __init__(self, startup_policy: str | None, *, lws_first: bool, nodes: int = 2, spoil: bool = False):
        self.clock = VirtualClock()
        self.api, _ = gangkeeper_api(self.clock.now)
        if lws_first:
            emulated_lws.install(self.api, LWS_WEBHOOK_FIRST)
        self.api.create("namespaces", {"metadata": {"name": NS, "labels": {names.ENFORCE_LABEL: names.ENFORCE_VALUE}}})
        leader_ready = startup_policy == "LeaderReady"
        checker = Checker(bind_timeout=SETTINGS.bind_timeout_seconds, reaction=30.0,
                          size_of=lambda pod: (1 if part(pod).endswith("/leader") else 3) if leader_ready else 4,
                          group_of=part if leader_ready else Checker.group_of)
        self.watch = Watch(self.api, checker, clock=self.clock.now)
        self.recorder, self.spoiler = Recorder(), Spoiler(self.api)
        extra = [GangkeeperController(self.api, clock=self.clock.now, settings=SETTINGS), self.recorder,
                 *([self.spoiler] if spoil else [])]
        self.cluster = emulated_cluster(self.api, self.clock, spec=load(f"nodes: [{{count: {nodes}, gpusPerNode: 8}}]"),
                                        extra=extra)
        self.lws = self.api.create("leaderworkersets", gpu_example(startup_policy), namespace=NS)

    def run(self, seconds: float = RUN_SECONDS) -> None:
        self.cluster.run_until(self.clock.now() + seconds)
        self.watch.finish()

    def pods(self) -> dict[str, dict]:
        return {p["metadata"]["name"]: p for p in self.api.list("pods", namespace=NS)}

    def revision(self) -> str:
        return self.pods()[f"{LWS}-0"]["metadata"]["labels"][names.LWS_REVISION_LABEL]

    def reserved_together(self) -> set[frozenset[str]]:
        """The sets of pods that were reserved on one Gang."""
        return {frozenset(pods) for pods in self.recorder.reserved.values() if pods}


def assert_all_running_and_gated_at_creation(emulation: Emulation) -> None:
    pods = emulation.pods()
    assert set(pods) == GROUPS[0] | GROUPS[1]
    assert {p["status"]["phase"] for p in pods.values()} == {"Running"}
    lws = emulation.api.get("leaderworkersets", LWS, namespace=NS)
    assert lws["status"]["readyReplicas"] == 2
    assert {c["type"]: c["status"] for c in lws["status"]["conditions"]} == {"Available": "True",
                                                                              "Progressing": "False"}
    assert emulation.watch.violations() == [], "no group partly placed, nothing held while incomplete"


@WEBHOOK_ORDERS
def test_under_leader_created_each_replica_group_is_one_gang_released_whole(lws_first):
    emulation = Emulation(None, lws_first=lws_first)
    emulation.run()
    assert_all_running_and_gated_at_creation(emulation)
    revision = emulation.revision()
    labels = {name: pod["metadata"]["labels"][names.GROUP_LABEL] for name, pod in emulation.pods().items()}
    assert labels == {name: f"{LWS}-{group}-{revision}" for group, members in GROUPS.items() for name in members}
    assert emulation.reserved_together() == {frozenset(GROUPS[0]), frozenset(GROUPS[1])}
    for gang in emulation.recorder.gangs.values():
        assert gang["metadata"]["ownerReferences"][0]["kind"] == "LeaderWorkerSet"
    first_bound = emulation.watch.checker.first_bound
    assert first_bound == {(NS, f"{LWS}-{group}-{revision}"): (4, 4) for group in GROUPS}, \
        "each group's first member bound only once all four were placed"


@WEBHOOK_ORDERS
def test_under_leader_ready_the_leader_runs_alone_and_its_workers_are_one_gang(lws_first):
    emulation = Emulation("LeaderReady", lws_first=lws_first)
    emulation.run()
    assert_all_running_and_gated_at_creation(emulation)
    leaders = {f"{LWS}-{group}" for group in GROUPS}
    assert emulation.reserved_together() == {frozenset({leader}) for leader in leaders} | {
        frozenset(members - leaders) for members in GROUPS.values()}
    recorder = emulation.recorder
    for group, members in GROUPS.items():
        leader = f"{LWS}-{group}"
        assert all(recorder.created[worker] > recorder.ready[leader] for worker in members - {leader}), \
            "the workers are made only once their leader is Ready"
    revision = emulation.revision()
    first_bound = emulation.watch.checker.first_bound
    assert first_bound == {**{(NS, f"{LWS}-{group}-{revision}/leader"): (1, 1) for group in GROUPS},
                           **{(NS, f"{LWS}-{group}-{revision}/workers"): (3, 3) for group in GROUPS}}


def test_a_group_that_fails_to_bind_is_deleted_loudly_and_comes_back_whole():
    emulation = Emulation(None, lws_first=False, nodes=3, spoil=True)
    emulation.run()
    spoilt = emulation.spoiler.tainted
    assert spoilt, "a release was spoilt"
    events = [e for e in emulation.api.list("events", namespace=NS) if e["reason"] == "RolledBack"]
    assert events and all(e["type"] == "Warning" for e in events)
    on_pods = {(e["involvedObject"]["name"], e["involvedObject"]["uid"]) for e in events
               if e["involvedObject"]["kind"] == "Pod"}
    (rolled_back,) = [members for members in GROUPS.values() if {name for name, _ in on_pods} == members]
    assert "deleted 4 members for their owner to recreate them gated" in next(
        e["message"] for e in events if e["involvedObject"]["kind"] == "Gang")
    assert_all_running_and_gated_at_creation(emulation)
    pods = emulation.pods()
    assert not {(name, pods[name]["metadata"]["uid"]) for name in rolled_back} & on_pods, "made again, new pods"
    assert spoilt not in {pods[name]["spec"]["nodeName"] for name in rolled_back}
    assert len({pods[name]["spec"]["nodeName"] for name in rolled_back}) == 1, "the group together, elsewhere"


def leader_as_its_statefulset_makes_it() -> dict:
    """The leader of group 0 as the leader StatefulSet sends it to the API server."""
    labels = {names.LWS_NAME_LABEL: LWS, names.LWS_WORKER_INDEX_LABEL: "0", names.LWS_REVISION_LABEL: "7c9d5f",
              names.STATEFULSET_POD_NAME_LABEL: f"{LWS}-0", names.STATEFULSET_POD_INDEX_LABEL: "0"}
    return {"metadata": {"name": f"{LWS}-0", "labels": labels, "annotations": {"leaderworkerset.sigs.k8s.io/size": "4"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": LWS,
                                              "uid": "0f6a1c2e", "controller": True}]},
            "spec": {"containers": [{"name": "main", "image": "img:1",
                                     "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}


@pytest.mark.parametrize("lws_first, calls", [
    (False, [("gangkeeper", "/mutate"), ("lws", emulated_lws.POD_WEBHOOK_PATH), ("gangkeeper", "/mutate"),
             ("gangkeeper", "/validate")]),
    (True, [("lws", emulated_lws.POD_WEBHOOK_PATH), ("gangkeeper", "/mutate"), ("gangkeeper", "/validate")])],
    ids=["gangkeeper-first", "lws-first"])
def test_a_leader_gets_one_group_in_either_webhook_order(lws_first, calls):
    """Called before LWS's, gangkeeper's webhook is called again once LWS's has labelled the pod
    (reinvocationPolicy IfNeeded) and answers the same; called after it, once."""
    clock = VirtualClock()
    api, gangkeeper_webhook = gangkeeper_api(clock.now)
    emulated_lws.install(api, LWS_WEBHOOK_FIRST if lws_first else emulated_lws.WEBHOOK_CONFIGURATION)
    seen = []
    for who, service, handler in (("gangkeeper", WEBHOOK_SERVICE, gangkeeper_webhook),
                                  ("lws", emulated_lws.WEBHOOK_SERVICE, emulated_lws.webhook)):
        api.admission.services[service] = lambda path, review, who=who, handler=handler: (
            seen.append((who, path)), handler(path, review))[1]
    api.create("namespaces", {"metadata": {"name": NS, "labels": {names.ENFORCE_LABEL: names.ENFORCE_VALUE}}})
    stored = api.create("pods", leader_as_its_statefulset_makes_it(), namespace=NS)
    assert seen == calls
    metadata = stored["metadata"]
    assert metadata["labels"][names.GROUP_LABEL] == f"{LWS}-0-7c9d5f"
    assert metadata["annotations"][names.GROUP_SOURCE_ANNOTATION] == names.SOURCE_LEADERWORKERSET
    assert metadata["labels"][names.LWS_GROUP_INDEX_LABEL] == "0"
    assert stored["spec"]["schedulingGates"] == [{"name": names.SCHEDULING_GATE}]
