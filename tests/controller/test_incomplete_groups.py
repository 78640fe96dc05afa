"""Groups that never complete (controller/deciding/incomplete.py), decided by `reconcile()` pass after pass
on a stand-in API: when a gated group short of members counts as stuck, what it is told, and that
it is told once."""

from gangkeeper import names
from gangkeeper.controller.cache.groups import PYTORCHJOBS
from gangkeeper.controller.deciding.decisions import Report
from gangkeeper.controller.deciding.settings import Settings
from tests.controller.world import CREATED, NS, Run, World, booked, member_object, nodes, of

SET_TIME = 300.0


def stuck_reports(outcome) -> list[Report]:
    return [report for report in of(outcome, Report) if report.event == "gang.stuck"]


def stuck_condition(world: World, gang: str = "g") -> dict | None:
    conditions = world.gang(gang)["status"]["conditions"]
    return next((condition for condition in conditions if condition["type"] == "Stuck"), None)


def add_members(world: World, indices: range, declared: int, gpus: int = 8) -> None:
    """Members g-i of group g, each declaring the group's size with gangkeeper.io/min-count."""
    for i in indices:
        world.add(member_object(f"g-{i}", group="g", min_count=declared, gpus=gpus, created=CREATED))


def pytorchjob_with_two_of_four_pods() -> World:
    """A PyTorchJob of a master and 3 workers whose operator created 2 pods (say, the rest only
    once these run)."""
    world = World(nodes(2), [(PYTORCHJOBS, {"metadata": {"name": "pj"}, "spec": {"pytorchReplicaSpecs": {
        "Master": {"replicas": 1}, "Worker": {"replicas": 3}}}})])
    for i in range(2):
        world.add(member_object(f"pj-{i}", source=names.SOURCE_PYTORCHJOB, owner=("PyTorchJob", "pj"),
                                created=CREATED))
    return world


def test_the_report_names_what_is_missing_the_owner_and_where_the_size_came_from():
    world = pytorchjob_with_two_of_four_pods()
    run = Run(world, Settings(incomplete_group_seconds=SET_TIME))
    assert stuck_reports(run.step(seconds=SET_TIME - 1)) == []
    assert stuck_reports(run.step(seconds=1)) == [], "new pods may still come"
    (report,) = stuck_reports(run.step())
    assert report.warning and report.reason == "IncompleteGroup" and report.on_pods
    assert (report.involved.kind, [pod.name for pod in report.pods]) == ("Gang", ["pj-0", "pj-1"])
    assert report.message.startswith("2 of 4 pods present; no new pod for 5m or more: waiting for 2 more pods of "
                                     "PyTorchJob pj (size 4 from PyTorchJob pj). If its owner creates the rest only "
                                     "after these run, the group is declared too large")
    assert 'docs/configuration.md, "A group that never completes"' in report.message


def test_a_member_gone_while_stuck_is_news_and_the_same_words_are_not():
    world = World(nodes(1))
    add_members(world, range(3), declared=4)
    run = Run(world, Settings(incomplete_group_seconds=SET_TIME))
    run.step(seconds=SET_TIME)
    assert len(stuck_reports(run.step())) == 1
    assert stuck_reports(run.step(seconds=600)) == [], "said once"
    world.delete(f"{NS}/g-2")
    (again,) = stuck_reports(run.step())
    assert again.message.startswith("2 of 4 pods present") and "waiting for 2 more pods" in again.message
    assert stuck_condition(world)["message"] == again.message


def test_a_complete_group_that_loses_a_member_gives_its_owner_the_set_time_to_replace_it():
    world = World()  # no node: the group is complete and waits for capacity
    add_members(world, range(4), declared=4)
    run = Run(world, Settings(incomplete_group_seconds=SET_TIME))
    run.step(seconds=3 * SET_TIME)  # its pods were created long ago
    world.delete(f"{NS}/g-3")
    assert stuck_reports(run.step(seconds=SET_TIME - 1)) == [], "not from the newest pod's creation, long ago"
    assert stuck_reports(run.step(seconds=1)) == []
    assert len(stuck_reports(run.step())) == 1, "the set time from when it was first seen short of a member"


def test_the_condition_says_it_while_it_holds_and_goes_when_the_group_completes():
    world = World(nodes(2))
    add_members(world, range(2), declared=4, gpus=4)
    run = Run(world, Settings(incomplete_group_seconds=SET_TIME))
    run.step(seconds=SET_TIME)
    run.step()
    condition = stuck_condition(world)
    assert (condition["status"], condition["reason"]) == ("True", "IncompleteGroup")
    assert condition["lastTransitionTime"] == "2027-01-15T08:05:00Z", "when it became stuck"
    assert world.gang("g")["status"]["conditions"][0]["reason"] == "Incomplete", "Admitted still says why it waits"
    add_members(world, range(2, 4), declared=4, gpus=4)
    assert len(booked(run.step())) == 4, "complete, and admitted"
    assert stuck_condition(world) is None, "gone, as TimedOut goes"
