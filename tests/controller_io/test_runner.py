"""The controller's loop on a fake clock: what one turn does, when the next one is due, and that
`run()` turns exactly when `due()` says, waiting only through the clock it was given."""

import copy
import json
import threading

import jsonpatch

from gangkeeper import names
from gangkeeper.audit import AuditLog
from gangkeeper.controller.deciding.decisions import Release, Reserve
from gangkeeper.controller.deciding.outcome import HELD_RELEASE_RETRY_SECONDS
from gangkeeper.controller.deciding.settings import Settings
from gangkeeper.controller.metrics import Metrics
from gangkeeper.controller.reading import kube
from gangkeeper.controller.reading.informer import Cache, object_key
from gangkeeper.controller.runner import Clock, Controller
from sim.patching import apply_merge_patch
from tests.controller.world import booked

START = 1_000.0  # the fake monotonic clock's first moment
WALL = 1_800_000_000.0  # the cluster's time at START: whole seconds, as the annotations the controller writes
RESYNC, DEBOUNCE, CONSISTENCY = 30.0, 0.5, 100.0
NS = "ml"


class FakeClock:
    """Time moves only when the loop waits (or a test says so); `at(moment, action)` runs `action`
    when a wait reaches `moment`, as a watch event arriving then would."""

    def __init__(self):
        self.now = START
        self.scheduled: list[tuple[float, callable]] = []

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return WALL + self.now - START

    def wait(self, event: threading.Event, timeout: float) -> bool:
        if not event.is_set() and self.scheduled and self.scheduled[0][0] <= self.now + timeout:
            self.now, action = self.scheduled.pop(0)
            action()
        elif not event.is_set():
            self.now += timeout
        return event.is_set()

    def at(self, moment: float, action) -> None:
        self.scheduled = sorted([*self.scheduled, (moment, action)], key=lambda pair: pair[0])

    def clock(self) -> Clock:
        return Clock(monotonic=self.monotonic, wall=self.wall, wait=self.wait)


class FakeInformer:
    """An informer the test feeds by hand (`Informer`'s keyword arguments, no client, synced at once)."""

    def __init__(self, resource, transform, *, namespace=None, reading=None, hooks=None, on_change, on_object,
                 keeps_unserved=False):
        self.resource, self.transform, self.on_change = resource, transform, on_change
        self.told = True
        self.cache = Cache(lambda key, value: on_object(key, value) if self.told else None)
        self.has_synced, self.served = True, True

    def start(self):
        return self

    def stop(self):
        return None

    def add(self, obj: dict, *, told: bool = True) -> None:
        """A watch event, or (`told=False`) a change the controller's queue never hears of: a drift."""
        self.told = told
        self.cache.put(object_key(obj), self.transform(obj))
        self.told = True
        if told:
            self.on_change(self.resource.name)


class FakeKube:
    """Answers the Executor's writes as an API server would, keeping the pods it was given."""

    def __init__(self):
        self.pods: dict[str, dict] = {}
        self.gangs: dict[str, dict] = {}
        self.pod_writes: list[str] = []

    def patch(self, resource, namespace, name, body, patch_type=kube.MERGE_PATCH, *, subresource=""):
        if resource != kube.PODS:
            return {}
        key = f"{namespace}/{name}"
        pod = self.pods[key]
        if patch_type == kube.JSON_PATCH:
            pod = jsonpatch.apply_patch(pod, body)
        else:
            pod = {**pod, "metadata": {**pod["metadata"], "annotations": {
                **pod["metadata"]["annotations"], **body["metadata"]["annotations"]}}}
        pod["metadata"]["resourceVersion"] = str(int(pod["metadata"]["resourceVersion"]) + 1)
        self.pods[key] = pod
        self.pod_writes.append(name)
        return pod

    def resource_versions(self, resource, namespace, label_selector):
        label = label_selector.partition("=")[2]
        return {pod["metadata"]["name"]: pod["metadata"]["resourceVersion"] for pod in self.pods.values()
                if pod["metadata"]["namespace"] == namespace
                and pod["metadata"]["labels"].get(names.GROUP_LABEL) == label}

    def patch_status(self, resource, namespace, name, body, patch_type=kube.MERGE_PATCH):
        """A Gang's status as a merge patch merges it (a null removes the key), on the Gang created."""
        key = f"{namespace}/{name}"
        gang = self.gangs.get(key) or {"apiVersion": "gangkeeper.io/v1alpha1", "kind": names.GANG_KIND,
                                       "metadata": {"name": name, "namespace": namespace}}
        gang = {**gang, "metadata": {**gang["metadata"], "uid": f"uid-{name}",
                                     "resourceVersion": str(int(gang["metadata"].get("resourceVersion", 0)) + 1)},
                "status": apply_merge_patch(gang.get("status") or {}, body["status"])}
        self.gangs[key] = gang
        return gang

    def create(self, resource, namespace, body):
        if resource == kube.GANGS:
            self.gangs.setdefault(f"{namespace}/{body['metadata']['name']}", dict(body))
        return dict(body)

    def delete(self, resource, namespace, name, **_):
        return {}


class _Discard:
    def __init__(self):
        self.events: list[str] = []  # the audit lines' events, kept for the tests that read them

    def write_line(self, line: str) -> None:
        self.events.append(json.loads(line)["event"])


def node(name: str) -> dict:
    return {"metadata": {"name": name}, "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110",
                                                                  "nvidia.com/gpu": "8"},
                                                  "conditions": [{"type": "Ready", "status": "True"}]}}


def member(name: str, group: str = "pair", size: int = 2) -> dict:
    resources = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "4"}
    return {"metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}", "resourceVersion": "1",
                         "creationTimestamp": "2027-01-01T00:00:00Z", "labels": {names.GROUP_LABEL: group},
                         "annotations": {names.GROUP_SOURCE_ANNOTATION: names.SOURCE_EXPLICIT,
                                         names.MIN_COUNT_ANNOTATION: str(size)}},
            "spec": {"schedulingGates": [{"name": names.SCHEDULING_GATE}],
                     "containers": [{"name": "c", "resources": {"requests": resources, "limits": resources}}]},
            "status": {"phase": "Pending"}}


def controller(clock: FakeClock, api: FakeKube, resync: float = RESYNC, audit: _Discard | None = None) -> Controller:
    return Controller(api, Settings(), AuditLog("controller", audit or _Discard()), Metrics(), resync_seconds=resync,
                      debounce_seconds=DEBOUNCE, consistency_seconds=CONSISTENCY, clock=clock.clock(),
                      make_informer=FakeInformer)


def submit(controller: Controller, api: FakeKube, *pods: dict) -> None:
    for pod in pods:
        api.pods[object_key(pod)] = pod
        controller.pods.add(pod)


def reserved(outcome) -> set[str]:
    return {booking.pod for booking in booked(outcome)}


def released(outcome) -> set[str]:
    return {action.pod for action in outcome.actions if isinstance(action, Release)}


def reserve_and_release_a_pair(clock: FakeClock, resync: float = RESYNC) -> tuple[Controller, FakeKube]:
    """Two turns: the pair reserved, then released (each turn at once after the one before)."""
    api = FakeKube()
    loop = controller(clock, api, resync)
    clock.now = START + 1
    loop.nodes.add(node("n0"))
    clock.now = START + 2
    submit(loop, api, member("pair-0"), member("pair-1"))
    assert loop.due() == START + 1 + DEBOUNCE, "the first change counts: the burst after it is batched"
    assert reserved(loop.turn(lambda: True)) == {"pair-0", "pair-1"}
    assert sorted(api.gangs[f"{NS}/pair"]["status"]["reservations"]) == ["pair-0", "pair-1"], "in one write"
    assert loop.due() == clock.now, "the reservation was written: the next turn at once"
    assert released(loop.turn(lambda: True)) == {"pair-0", "pair-1"}
    assert loop.due() == clock.now
    assert api.pod_writes == ["pair-0", "pair-1"], "released what it had just reserved, without writing the pods first"
    return loop, api


def test_a_turn_is_due_a_debounce_after_a_change_at_once_after_pod_writes_and_else_at_the_resync():
    clock = FakeClock()
    loop = controller(clock, FakeKube())
    assert loop.due() == START + RESYNC + DEBOUNCE, "nothing changed: a resync"
    loop, api = reserve_and_release_a_pair(clock)
    loop.turn(lambda: True)
    assert api.pod_writes[2:] == [], "the released members wait for the scheduler: nothing written"
    assert loop.due() == clock.now + RESYNC + DEBOUNCE, "the resync comes before the bind timeout"
    clock.now += 1
    loop.pods.add(api.pods[f"{NS}/pair-0"])
    assert loop.due() == clock.now + DEBOUNCE
    assert loop.failed_actions == 0


def test_the_loop_wakes_when_a_timeout_falls_due_before_the_resync():
    clock = FakeClock()
    bind_timeout = Settings().bind_timeout_seconds
    loop, api = reserve_and_release_a_pair(clock, resync=10 * bind_timeout)
    loop.turn(lambda: True)
    assert api.pod_writes[2:] == []
    assert loop.due() == clock.now + bind_timeout + DEBOUNCE, "when the released members' bind timeout ends"


def test_a_follower_keeps_its_index_warm_and_decides_nothing_until_it_leads():
    clock, api = FakeClock(), FakeKube()
    loop = controller(clock, api)
    loop.nodes.add(node("n0"))
    submit(loop, api, member("pair-0"), member("pair-1"))
    assert loop.turn(lambda: False) is None
    assert api.pod_writes == []
    assert loop.due() == clock.now + RESYNC + DEBOUNCE
    assert reserved(loop.turn(lambda: True)) == {"pair-0", "pair-1"}


def test_a_replica_that_lost_the_lead_forgets_the_timeouts_it_was_waking_for():
    clock = FakeClock()
    bind_timeout = Settings().bind_timeout_seconds
    loop, _ = reserve_and_release_a_pair(clock, resync=10 * bind_timeout)
    loop.turn(lambda: True)
    clock.now += 2 * bind_timeout  # the bind timeout is past, and the lead was lost meanwhile
    assert loop.turn(lambda: False) is None
    assert loop.due() == clock.now + 10 * bind_timeout + DEBOUNCE, "a resync, not a turn every debounce"


def test_the_index_is_rebuilt_from_the_caches_when_a_consistency_check_is_due():
    clock, api = FakeClock(), FakeKube()
    loop = controller(clock, api)
    loop.nodes.add(node("n0"))
    loop.turn(lambda: True)
    for pod in (member("quiet-0", "quiet"), member("quiet-1", "quiet")):
        api.pods[object_key(pod)] = pod
        loop.pods.add(pod, told=False)
    clock.now = START + CONSISTENCY / 2
    assert reserved(loop.turn(lambda: True)) == set(), "the incremental index never heard of them"
    assert loop.metrics.registry.get_sample_value("gangkeeper_index_inconsistencies_total") == 0
    clock.now = START + CONSISTENCY
    assert reserved(loop.turn(lambda: True)) == {"quiet-0", "quiet-1"}, "decided on the rebuilt index"
    assert loop.metrics.registry.get_sample_value("gangkeeper_index_inconsistencies_total") == 1


def test_run_turns_when_due_waiting_only_through_its_clock_and_ends_when_told_to_stop():
    clock, api = FakeClock(), FakeKube()
    loop = controller(clock, api)
    stop, turned, turn = threading.Event(), [], loop.turn

    def recorded(is_leader):
        turned.append(clock.now)
        if len(turned) == 3:
            stop.set()
        return turn(is_leader)

    loop.turn = recorded
    first = START + RESYNC + DEBOUNCE
    clock.at(first + 7, lambda: loop.nodes.add(node("n0")))
    loop.run(stop, lambda: True)
    assert turned == [first, first + 7 + DEBOUNCE, first + 7 + DEBOUNCE + RESYNC + DEBOUNCE]
    assert "n0" in loop.index.pool.nodes, "the change that woke the loop reached the index"


def reserve_a_pair(clock: FakeClock, audit: _Discard | None = None) -> tuple[Controller, FakeKube]:
    """One turn: the pair reserved on its Gang, created with the reservations."""
    api = FakeKube()
    loop = controller(clock, api, audit=audit)
    loop.nodes.add(node("n0"))
    submit(loop, api, member("pair-0"), member("pair-1"))
    assert reserved(loop.turn(lambda: True)) == {"pair-0", "pair-1"}
    return loop, api


def test_a_consistency_check_keeps_the_gang_this_leader_reserved_on_until_its_watch_shows_it():
    clock = FakeClock()
    loop, api = reserve_a_pair(clock)
    clock.now = START + CONSISTENCY  # a rebuild from the caches, where the Gang is not yet
    assert released(loop.turn(lambda: True)) == {"pair-0", "pair-1"}, "still reserved after the rebuild"
    assert loop.metrics.registry.get_sample_value("gangkeeper_index_inconsistencies_total") == 0
    assert list(loop._assumed_gangs) == [f"{NS}/pair"]
    loop.gangs.add(api.gangs[f"{NS}/pair"])  # the watch catches up: the caches stand for it from now on
    assert loop._assumed_gangs == {}


def test_a_member_created_again_behind_the_caches_back_holds_its_whole_group_until_the_cache_catches_up():
    loop, api = reserve_a_pair(FakeClock())  # pair-1 reserved as the pod it was
    again = member("pair-1")  # deleted and created again; the pods' watch has not said so yet
    again["metadata"].update(uid="uid-pair-1-again", resourceVersion="5")
    api.pods[f"{NS}/pair-1"] = again
    loop.turn(lambda: True)
    assert api.pod_writes == [], "pair-0 is not released without pair-1"
    loop.pods.add(again)  # the cache catches up: the new pair-1 is planned, then the pair released
    assert reserved(loop.turn(lambda: True)) == {"pair-1"}
    assert released(loop.turn(lambda: True)) == {"pair-0", "pair-1"} and sorted(api.pod_writes) == ["pair-0", "pair-1"]


def test_a_release_held_back_is_tried_again_within_a_second_and_on_record_when_it_goes_through():
    clock, audit = FakeClock(), _Discard()
    loop, api = reserve_a_pair(clock, audit)
    updated = copy.deepcopy(api.pods[f"{NS}/pair-1"])  # changed by someone; the pods' watch has not said so yet
    updated["metadata"]["resourceVersion"] = "7"
    api.pods[f"{NS}/pair-1"] = updated
    loop.turn(lambda: True)
    assert api.pod_writes == [] and "gang.released" not in audit.events
    assert loop.due() <= clock.now + HELD_RELEASE_RETRY_SECONDS + DEBOUNCE, "not at the next resync"
    loop.pods.add(updated)
    assert released(loop.turn(lambda: True)) == {"pair-0", "pair-1"}
    assert audit.events.count("gang.released") == 1, "the release that went through is on record"
    assert loop.metrics.registry.get_sample_value("gangkeeper_complete_to_released_seconds_count") == 1


class PruningKube(FakeKube):
    """An API server whose Gang CRD is of an older version: its schema prunes status.reservations."""

    def patch_status(self, resource, namespace, name, body, patch_type=kube.MERGE_PATCH):
        status = {key: value for key, value in body["status"].items() if key != "reservations"}
        return super().patch_status(resource, namespace, name, {"status": status}, patch_type)


def test_a_gang_crd_that_prunes_reservations_turns_the_controller_to_reserving_on_each_member(caplog):
    clock, api = FakeClock(), PruningKube()
    loop = controller(clock, api)
    loop.nodes.add(node("n0"))
    submit(loop, api, member("pair-0"), member("pair-1"))
    assert reserved(loop.turn(lambda: True)) == {"pair-0", "pair-1"}, "on the Gang, which lost them"
    assert "prunes status.reservations" in caplog.text
    on_members = loop.turn(lambda: True)
    assert {action.pod for action in on_members.actions if isinstance(action, Reserve)} == {"pair-0", "pair-1"}
    assert released(loop.turn(lambda: True)) == {"pair-0", "pair-1"}


def test_a_crd_found_to_prune_reservations_is_remembered_across_a_rebuild_of_the_index():
    clock, api = FakeClock(), PruningKube()
    loop = controller(clock, api)
    loop.nodes.add(node("n0"))
    submit(loop, api, member("pair-0"), member("pair-1"))
    loop.turn(lambda: True)  # reserved on the Gang, which lost them
    clock.now = START + CONSISTENCY  # the index rebuilt from the caches before the next pass
    on_members = loop.turn(lambda: True)
    assert {action.pod for action in on_members.actions if isinstance(action, Reserve)} == {"pair-0", "pair-1"}
