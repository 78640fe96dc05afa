"""Pure decisions of `reconcile()`, pass after pass on a stand-in API (tests/controller/world.py)."""

import gc

import pytest

from gangkeeper import names
from gangkeeper.controller.cache.groups import GANGS, PYTORCHJOBS
from gangkeeper.controller.deciding import gangs, reconciler
from gangkeeper.controller.deciding.decisions import (
    DeleteGang,
    DeletePod,
    Release,
    Report,
    Reserve,
    ReserveGroup,
    SaveGang,
)
from gangkeeper.controller.deciding.memory import Memory
from gangkeeper.controller.deciding.settings import Ownerless, Settings
from gangkeeper.controller.planning.queue import Order, QueuePolicy
from tests.controller.builders import pod_object
from tests.controller.world import CREATED, NOW, NS, Run, World, add_group, booked, member_object, nodes, of, reports


def pod(world, name):
    return world.pods[f"{NS}/{name}"]


def test_a_pass_holds_the_garbage_collector_off_and_lets_it_run_again_after(monkeypatch):
    world = World(nodes(1))
    add_group(world, "g", 1)
    seen, planning = [], reconciler._plan
    monkeypatch.setattr(reconciler, "_plan", lambda *args: seen.append(gc.isenabled()) or planning(*args))
    assert gc.isenabled()
    Run(world).step()
    assert seen == [False] and gc.isenabled()


# --- reserve, then release -------------------------------------------------------------------

def test_a_group_is_reserved_in_one_write_on_its_gang_and_its_pods_are_written_once_to_release_them():
    world = World(nodes(2))
    add_group(world, "g", 2)
    versions = {key: pod["metadata"]["resourceVersion"] for key, pod in world.pods.items()}
    run = Run(world)
    reserving = run.step()
    (write,) = of(reserving, ReserveGroup)
    assert of(reserving, Reserve) == [] and write.create["spec"]["groupName"] == "g", "the Gang created with it"
    assert write.reservations == {"g-0": {"uid": f"uid-{NS}-g-0", "node": "n0"},
                                  "g-1": {"uid": f"uid-{NS}-g-1", "node": "n1"}}
    assert {key: pod["metadata"]["resourceVersion"] for key, pod in world.pods.items()} == versions, "pods untouched"
    releasing = run.step()
    assert sorted((a.pod, a.node) for a in of(releasing, Release)) == [("g-0", "n0"), ("g-1", "n1")]
    assert of(releasing, ReserveGroup) == []


def test_a_restart_between_reservation_and_release_books_what_the_gang_holds_and_nothing_twice():
    world = World(nodes(1))
    add_group(world, "first", 2, gpus=4)
    Run(world).step()
    add_group(world, "second", 2, gpus=4)
    restarted = Run(world)  # a new leader: nothing remembered, the ledger rebuilt from the API's objects
    outcome = restarted.step()
    assert sorted(a.pod for a in of(outcome, Release)) == ["first-0", "first-1"]
    assert booked(outcome) == [], "the node is the first group's: the second waits"


def test_a_plan_too_large_for_its_gang_and_a_group_without_one_are_booked_on_each_member(monkeypatch):
    monkeypatch.setattr(gangs, "RESERVATIONS_MAX_BYTES", 60)  # room for one entry of the two
    world = World(nodes(2))
    add_group(world, "g", 2)
    outcome = Run(world).step()
    assert of(outcome, ReserveGroup) == [] and sorted(a.pod for a in of(outcome, Reserve)) == ["g-0", "g-1"]
    lone = World(nodes(1))
    lone.add(member_object("solo", group="solo", source=names.SOURCE_ACCELERATOR_POD, gpus=1))
    assert [a.pod for a in of(Run(lone).step(), Reserve)] == ["solo"], "a lone accelerator pod keeps no Gang"


# --- queue policy ----------------------------------------------------------------------------

def blocked_head_and_small_group(order: Order, starvation: float = 300.0) -> Run:
    world = World(nodes(3))
    world.add(pod_object("running", namespace=NS, gated=False, node_name="n2", phase="Running"))
    add_group(world, "big", 3, created="2027-01-15T07:00:00Z")  # older, does not fit beside the running pod
    add_group(world, "small", 1)
    return Run(world, Settings(policy=QueuePolicy(order=order, starvation_seconds=starvation)))


def test_best_effort_fifo_admits_a_smaller_group_behind_one_that_does_not_fit():
    outcome = blocked_head_and_small_group(Order.BEST_EFFORT_FIFO, starvation=7200).step()
    assert [a.group[1] for a in booked(outcome)] == ["small"]


def test_strict_fifo_admits_nothing_behind_a_group_that_does_not_fit():
    run = blocked_head_and_small_group(Order.STRICT_FIFO)
    outcome = run.step()
    assert booked(outcome) == []
    status = of(outcome, SaveGang, "small")[0].status
    assert status["phase"] == "Waiting" and "StrictFIFO" in status["conditions"][0]["message"]


def test_a_starving_group_holds_what_fits_of_it_so_smaller_ones_cannot_take_it():
    run = blocked_head_and_small_group(Order.BEST_EFFORT_FIFO, starvation=600)  # big waited 3,600 s
    outcome = run.step()
    assert booked(outcome) == []
    message = of(outcome, SaveGang, "small")[0].status["conditions"][0]["message"]
    assert "capacity is held for team/big" in message
    run.world.finish(f"{NS}/running")
    assert {a.group[1] for a in booked(run.step())} == {"big"}


# --- elastic groups and replacements ---------------------------------------------------------

def test_members_beyond_min_count_are_reserved_and_released_one_at_a_time():
    world = World(nodes(3), [(PYTORCHJOBS, {"metadata": {"name": "pj"}, "spec": {
        "elasticPolicy": {"minReplicas": 2, "maxReplicas": 4}, "pytorchReplicaSpecs": {"Worker": {"replicas": 4}}}})])
    for i in range(4):
        world.add(member_object(f"w{i}", source=names.SOURCE_PYTORCHJOB, owner=("PyTorchJob", "pj")))
    run = Run(world)
    assert len(booked(run.step())) == 2, "admitted with min count"
    second = run.step(bind=True)
    assert len(of(second, Release)) == 2 and len(booked(second)) == 1, "then one extra"
    third = run.step(bind=True)
    assert len(of(third, Release)) == 1 and booked(third) == [], "no room for the fourth"
    waiting = [p for p in world.pods.values() if p["spec"].get("schedulingGates")]
    assert [p["metadata"]["name"] for p in waiting] == ["w3"]


def test_a_running_group_with_finished_members_stays_running_and_a_replacement_goes_alone():
    world = World(nodes(2))
    add_group(world, "g", 2)
    run = Run(world)
    run.step()
    run.step(bind=True)
    world.finish(f"{NS}/g-0")
    outcome = run.step()
    assert of(outcome, SaveGang)[0].status["phase"] == "Running"
    world.add(member_object("g-2", group="g", min_count=2, created=CREATED))
    assert [a.pod for a in booked(run.step())] == ["g-2"]
    assert [a.pod for a in of(run.step(), Release)] == ["g-2"]


# --- bind timeout and rollback -----------------------------------------------------------------

def test_the_release_records_when_and_the_bind_timeout_survives_a_restart():
    world = World(nodes(1))
    world.add(member_object("p0", group="g", min_count=1, owner=("Job", "j"), created=CREATED))
    run = Run(world, Settings(bind_timeout_seconds=60))
    run.step()
    release = of(run.step(), Release)[0]
    stamp = pod(world, "p0")["metadata"]["annotations"][names.RELEASED_AT_ANNOTATION]
    assert stamp == "2027-01-15T08:00:01.000000Z" and release.patch[1]["op"] == "add"
    run.memory, run.now = Memory(), NOW + 1 + 60  # a new leader, right at the deadline
    outcome = run.step()
    assert [a.pod for a in of(outcome, DeletePod)] == ["p0"]
    assert reports(outcome, "gang.rolled_back")[0].on_pods


def owned_and_lone_group_past_its_bind_timeout(settings: Settings) -> tuple[World, Run]:
    """A member owned by something without a suspend switch (a plain owner reference) and one
    without owner, both released and never bound."""
    world = World(nodes(1))
    world.add(member_object("owned", group="g", min_count=2, gpus=4, owner=("Job", "j"), created=CREATED))
    world.add(member_object("lone", group="g", min_count=2, gpus=4, created=CREATED))
    run = Run(world, settings)
    run.step()
    run.step(seconds=10)
    return world, run


def test_a_rollback_deletes_owned_members_and_those_without_owner_and_backs_off():
    world, run = owned_and_lone_group_past_its_bind_timeout(Settings(bind_timeout_seconds=5,
                                                                     rollback_backoff_seconds=30))
    outcome = run.step()
    assert [a.pod for a in of(outcome, DeletePod)] == ["owned", "lone"]
    message = reports(outcome, "gang.rolled_back")[0].message
    assert "deleted 1 members for their owner to recreate them gated" in message
    assert "deleted 1 members no owner recreates" in message and "planning again in 30s" in message


def test_a_rollback_told_to_keep_members_without_owner_keeps_them_booked():
    world, run = owned_and_lone_group_past_its_bind_timeout(Settings(bind_timeout_seconds=5,
                                                                     rollback_ownerless=Ownerless.KEEP))
    outcome = run.step()
    assert [a.pod for a in of(outcome, DeletePod)] == ["owned"]
    assert "kept 1 members no owner recreates" in reports(outcome, "gang.rolled_back")[0].message
    assert f"{NS}/lone" in world.pods, "capacity stays booked by what was not deleted"


# --- a running group that lost members ------------------------------------------------------

def lose_a_member_with_its_node(world: World, run: Run, replacement_created: str = "2027-01-15T08:00:02Z"):
    """g-0 and g-1 (owned, 8 GPUs each) run on n0 and n1; n1 goes, with g-1; its owner recreates g-2."""
    for i in range(2):
        world.add(member_object(f"g-{i}", group="g", min_count=2, gpus=8, owner=("Job", "j"), created=CREATED))
    run.step()
    run.step(bind=True)
    assert {p["spec"].get("nodeName") for p in world.pods.values()} == {"n0", "n1"}
    lost = next(key for key, p in world.pods.items() if p["spec"]["nodeName"] == "n1")
    del world.nodes["n1"]
    world.delete(lost)
    world.add(member_object("g-2", group="g", min_count=2, gpus=8, owner=("Job", "j"), created=replacement_created))


def test_a_running_group_whose_replacement_cannot_be_placed_is_rolled_back_after_the_bind_timeout():
    world = World(nodes(2))
    run = Run(world, Settings(bind_timeout_seconds=20, rollback_backoff_seconds=30))
    lose_a_member_with_its_node(world, run)
    for _ in range(20):  # incomplete, holding n0's 8 GPUs: within the bind timeout it waits for room
        assert of(run.step(), DeletePod) == []
    survivor = next(p["metadata"]["name"] for p in world.pods.values() if p["spec"].get("nodeName") == "n0")
    outcome = run.step()
    assert {a.pod for a in of(outcome, DeletePod)} == {survivor, "g-2"}
    message = reports(outcome, "gang.rolled_back")[0].message
    assert "incomplete" in message and "1 of min count 2" in message and "planning again in 30s" in message
    assert world.pods == {}, "every owned member deleted, for its owner to recreate gated"


def test_the_incomplete_clock_survives_a_restart_from_the_replacement_creation():
    world = World(nodes(2))
    run = Run(world, Settings(bind_timeout_seconds=20))
    lose_a_member_with_its_node(world, run, replacement_created="2027-01-15T08:00:05Z")  # NOW + 5
    run.memory, run.now = Memory(), NOW + 5 + 19  # a new leader, before the deadline
    assert of(run.step(), DeletePod) == []
    run.memory = Memory()  # and another, at the deadline: the replacement's creation is the clock
    assert len(of(run.step(), DeletePod)) == 2


def test_a_replacement_placed_in_time_keeps_the_group():
    world = World(nodes(2))
    run = Run(world, Settings(bind_timeout_seconds=20))
    lose_a_member_with_its_node(world, run)
    for _ in range(10):
        assert of(run.step(bind=True), DeletePod) == []
    world.node("n1")  # the node comes back: the replacement is reserved, released and bound
    for _ in range(30):
        assert of(run.step(bind=True), DeletePod) == []
    assert sorted(p["spec"].get("nodeName") for p in world.pods.values()) == ["n0", "n1"]


def test_members_that_succeeded_count_toward_min_count_while_an_extra_waits():
    world = World(nodes(2), [(PYTORCHJOBS, {"metadata": {"name": "pj"}, "spec": {
        "elasticPolicy": {"minReplicas": 2}, "pytorchReplicaSpecs": {"Worker": {"replicas": 3}}}})])
    for i in range(3):
        world.add(member_object(f"w{i}", source=names.SOURCE_PYTORCHJOB, owner=("PyTorchJob", "pj")))
    run = Run(world, Settings(bind_timeout_seconds=5))
    run.step()
    run.step(bind=True)
    done = next(key for key, p in world.pods.items() if p["spec"].get("nodeName") == "n1")
    world.finish(done)  # one worker finished; another workload takes its node before w2 gets it
    world.add(pod_object("other", gpus=8, gated=False, node_name="n1", phase="Running"))
    for _ in range(20):  # 1 bound + 1 succeeded of min count 2, and w2 waiting for room
        assert of(run.step(seconds=10, bind=True), DeletePod) == []


def test_an_elastic_group_running_at_its_min_count_is_not_incomplete():
    world = World(nodes(3), [(PYTORCHJOBS, {"metadata": {"name": "pj"}, "spec": {
        "elasticPolicy": {"minReplicas": 2}, "pytorchReplicaSpecs": {"Worker": {"replicas": 4}}}})])
    for i in range(4):
        world.add(member_object(f"w{i}", source=names.SOURCE_PYTORCHJOB, owner=("PyTorchJob", "pj")))
    run = Run(world, Settings(bind_timeout_seconds=5))
    for _ in range(20):  # w3 never fits; 3 of min count 2 run
        assert of(run.step(seconds=10, bind=True), DeletePod) == []


# --- schedule timeout, Gang status, reporting ---------------------------------------------------

def test_a_group_past_its_schedule_timeout_is_reported_once_and_keeps_waiting():
    world = World(nodes(1))
    add_group(world, "g", 2, timeout=10)
    run = Run(world)
    first = run.step(seconds=11)
    assert reports(first, "gang.timed_out") == []
    timed_out = run.step()
    assert reports(timed_out, "gang.timed_out")[0].warning
    status = of(timed_out, SaveGang)[0].status
    assert status["phase"] == "Waiting"
    assert {c["type"]: c["status"] for c in status["conditions"]} == {"Admitted": "False", "TimedOut": "True"}
    later = run.step()
    assert reports(later, "gang.timed_out") == [] and of(later, SaveGang) == []
    world.node("n1")
    assert len(booked(run.step())) == 2, "still admitted when capacity comes"


def test_a_timed_out_group_is_given_up_when_configured_to_fail():
    world = World(nodes(1))
    add_group(world, "g", 2, timeout=10, created="2027-01-15T07:00:00Z")
    run = Run(world, Settings(fail_on_schedule_timeout=True))
    outcome = run.step()
    assert of(outcome, SaveGang)[0].status["phase"] == "Failed"
    assert "given up" in reports(outcome, "gang.timed_out")[0].message
    world.node("n1")
    assert booked(run.step()) == []


def test_gang_status_follows_the_group_and_events_follow_changes_only():
    world = World(nodes(2))
    add_group(world, "g", 2)
    run = Run(world)
    reserved = run.step()
    create = of(reserved, SaveGang)[0]
    assert create.create["spec"] == {"minCount": 2, "groupName": "g"}
    assert create.status["phase"] == "Admitted" and create.status["present"] == 2
    assert create.status["accelerators"] == 16 and create.status["minCount"] == 2
    admitted = create.status["conditions"][0]
    assert (admitted["type"], admitted["status"], admitted["reason"]) == ("Admitted", "True", "Reserved")
    released = run.step(bind=True)
    pods = reports(released, "gang.released")[0].pods
    assert [(p.kind, p.name, p.uid) for p in pods] == [("Pod", "g-0", "uid-team-g-0"), ("Pod", "g-1", "uid-team-g-1")]
    running = run.step()
    assert of(running, SaveGang)[0].status["phase"] == "Running"
    assert [r.event for r in of(running, Report)] == ["gang.bound"]
    quiet = run.step()
    assert quiet.actions == (), "nothing changed: no Event, no audit line, no status write"
    assert world.gang("g")["status"]["conditions"][0]["lastTransitionTime"] == admitted["lastTransitionTime"]


def test_a_group_whose_declarations_disagree_is_reported_on_its_pod_and_never_reserved():
    world = World(nodes(2), [(GANGS, {"metadata": {"name": "g"}, "spec": {"minCount": 3}})])
    add_group(world, "g", 2)
    outcome = Run(world).step()
    assert booked(outcome) == []
    (report,) = of(outcome, Report)
    assert report.reason == "Disagreement" and report.warning and report.involved[1] == "Gang"


def test_a_pin_on_a_gated_pod_is_the_users_constraint_not_a_reservation():
    world = World(nodes(2))
    pin = [{"matchFields": [{"key": names.PIN_FIELD, "operator": "In", "values": ["n1"]}]}]
    world.add(member_object("p0", group="g", min_count=1, affinity_terms=pin, created=CREATED))
    outcome = Run(world).step()
    assert [(a.pod, a.node) for a in booked(outcome)] == [("p0", "n1")]


def test_a_pod_bound_outside_any_group_takes_capacity():
    world = World(nodes(1))
    world.add(pod_object("other", gated=False, node_name="n0", phase="Running", namespace="elsewhere", gpus=8))
    add_group(world, "g", 1)
    assert booked(Run(world).step()) == []


# --- Gang status writes ------------------------------------------------------------------------

def test_a_waiting_groups_details_are_rewritten_at_most_every_30_seconds():
    """A group that cannot fit is told why in its Gang; the free-capacity figures in that message
    change with every pod that starts or ends, and are not worth an API write each time."""
    world = World(nodes(2))
    add_group(world, "small", 1, gpus=4)
    add_group(world, "big", 3, created="2027-01-15T08:00:01Z")  # 24 GPUs never fit on 16
    run = Run(world)
    run.step(bind=True)
    assert "16 free" in world.gang("big")["status"]["conditions"][0]["message"]
    for _ in range(5):  # small is released and bound: 12 free now, but not worth a write yet
        assert of(run.step(seconds=1, bind=True), SaveGang, "big") == []
    run.now += 30
    saved = of(run.step(), SaveGang, "big")
    assert saved and "12 free" in saved[0].status["conditions"][0]["message"]


def test_a_waiting_groups_phase_change_is_written_at_once():
    world = World(nodes(1))
    add_group(world, "g", 2)  # 16 GPUs on an 8-GPU node: waits
    run = Run(world)
    run.step()
    world.node("n1", gpus=8)
    outcome = run.step(seconds=1)
    assert booked(outcome, "g") and of(outcome, SaveGang, "g")[0].status["phase"] == "Admitted"


def test_a_lone_accelerator_pod_gets_no_gang_and_never_sizes_a_group_of_its_name():
    """Lone GPU pods are reserved and released like any group, with their state in Events; a
    Gang per pod would also declare a size of 1 for an explicit group sharing the pod's name."""
    world = World(nodes(1))
    world.add(member_object("trainer", group="trainer", source=names.SOURCE_ACCELERATOR_POD, gpus=1))
    for index in range(2):
        world.add(member_object(f"trainer-{index}", group="trainer", min_count=2, gpus=1))
    run = Run(world)
    outcome = run.step()
    assert {a.pod for a in booked(outcome)} == {"trainer", "trainer-0", "trainer-1"}
    assert [a.group for a in of(outcome, SaveGang)] == [(NS, "trainer")]
    assert world.gang("trainer")["spec"]["minCount"] == 2


def test_the_gang_of_an_ownerless_group_is_deleted_once_its_pods_are_gone():
    """Plain pods have no owner to take their Gang with them: the controller, which made it,
    deletes it when the last pod is gone — else every finished group would leave one behind."""
    world = World(nodes(1))
    add_group(world, "plain", 2, gpus=1)
    run = Run(world)
    run.step(bind=True)
    assert world.gang("plain")["metadata"]["labels"] == {names.MANAGED_BY_LABEL: names.MANAGED_BY_VALUE}
    for index in range(2):
        world.delete(f"{NS}/plain-{index}")
    outcome = run.step()
    assert [(a.group, a.name) for a in of(outcome, DeleteGang)] == [((NS, "plain"), "plain")]
    assert world.gang("plain") is None


def test_a_gang_a_user_created_is_never_deleted():
    world = World(nodes(1))
    world.put_workload(GANGS, {"metadata": {"name": "mine", "namespace": NS}, "spec": {"minCount": 1}})
    add_group(world, "mine", 1, gpus=1, min_count=None)
    run = Run(world)
    run.step(bind=True)
    world.delete(f"{NS}/mine-0")
    assert of(run.step(), DeleteGang) == []
    assert world.gang("mine") is not None


def test_the_pass_says_when_a_bind_timeout_falls_due():
    """The runner wakes when a released member's bind timeout expires, not at its next resync."""
    world = World(nodes(1))
    add_group(world, "g", 1, gpus=1)
    run = Run(world, Settings(bind_timeout_seconds=120))
    run.step()  # reserved
    released = run.now
    outcome = run.step()  # released, never bound
    assert of(outcome, Release)
    assert run.step().next_due == pytest.approx(released + 120, abs=1)


def test_members_of_different_priorities_disagree_until_admitted_but_a_running_groups_replacement_does_not():
    world = World(nodes(2))
    world.add(member_object("mixed-0", group="mixed", min_count=2, priority=10))
    world.add(member_object("mixed-1", group="mixed", min_count=2, priority=20))
    (report,) = of(Run(world).step(), Report)
    assert report.reason == "Disagreement" and "priorities disagree" in report.message
    running = World(nodes(2))
    running.add(member_object("r-0", group="r", min_count=2, priority=10, gated=False, node_name="n0",
                              phase="Running", created=CREATED))
    running.add(member_object("r-1", group="r", min_count=2, priority=20, created=CREATED))  # after its class changed
    assert [a.pod for a in booked(Run(running).step())] == ["r-1"]
