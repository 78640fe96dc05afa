"""Preemption in the reconcile pass, on the stand-in API of tests/controller/test_rollback.py: a
group that does not fit takes the place of lower-priority work, whole, and without harm."""

from gangkeeper.controller.cache.groups import JOBS
from gangkeeper.controller.deciding.decisions import (
    DeleteGang,
    DeletePod,
    EvictPod,
    Reason,
    Release,
    SaveGang,
    SuspendOwner,
)
from gangkeeper.controller.deciding.gangs import STATUS_DETAILS_REFRESH_SECONDS
from gangkeeper.controller.deciding.preempting import RETAKE_SECONDS
from gangkeeper.controller.deciding.settings import Preempting, Settings
from tests.controller.builders import pod_object
from tests.controller.owners import BACKOFF, JobController, Owners
from tests.controller.world import CREATED, NS, Run, booked, member_object, nodes, of, reports

HIGH = 1000


def urgent(world: Owners, size: int = 1, **kwargs) -> None:
    """An ownerless group of high priority, 8 GPUs a member."""
    for i in range(size):
        world.add(member_object(f"urgent-{i}", group="urgent", min_count=size, gpus=8, priority=HIGH,
                                created=CREATED, **kwargs))


def running_job(priority: int = 10, **settings) -> Run:
    """A Job of two 8-GPU pods filling both nodes, bound."""
    world = Owners(nodes(2))
    run = Run(world, Settings(rollback_backoff_seconds=BACKOFF, **settings), JobController(world, priority=priority))
    run.step()
    run.step()
    for pod in list(world.pods.values()):
        world.bind_one(pod["metadata"]["name"])
    run.step()
    return run


def test_a_higher_priority_group_suspends_the_job_in_its_way_and_is_released_once_its_pods_are_gone():
    run = running_job()
    urgent(run.world)
    preempting = run.step()
    (reserved,) = booked(preempting)
    assert reserved.pod == "urgent-0"
    assert [(a.resource.name, a.name) for a in of(preempting, SuspendOwner)] == [(JOBS, "train")]
    assert of(preempting, DeletePod) == [], "a suspended Job's pods go without counting as failed"
    (preempted,) = reports(preempting, "gang.preempted")
    assert preempted.warning and "preempted by team/urgent (priority 1000, above its 10)" in preempted.message
    assert preempting.preemptions == {"suspended": 1}
    jobs, run.jobs = run.jobs, None  # the Job controller has not acted yet: its pods still run
    held = run.step()
    assert of(held, Release) == [], "the room is held until the victims are gone"
    jobs.sync()  # now it deletes the suspended Job's pods
    assert [a.pod for a in of(run.step(), Release)] == ["urgent-0"]


def test_the_preempted_job_is_resumed_after_the_backoff_and_waits_gated_for_room():
    run = running_job()
    urgent(run.world)
    for _ in range(int(BACKOFF) + 3):
        run.step()
    assert run.world.owner(JOBS, "train")["spec"]["suspend"] is False
    assert run.jobs.pods(), "its pods came back"
    assert all(pod["spec"].get("schedulingGates") for key, pod in run.world.pods.items() if "train" in key)


def test_an_ownerless_group_in_the_way_is_deleted_whole_and_says_so():
    world = Owners(nodes(1))
    run = Run(world, Settings())
    for i in range(2):
        world.add(member_object(f"low-{i}", group="low", min_count=2, gpus=4, priority=10, created=CREATED))
    run.step()
    run.step()
    for pod in list(world.pods.values()):
        world.bind_one(pod["metadata"]["name"])
    urgent(world)
    preempting = run.step()
    assert sorted((a.pod, a.reason) for a in of(preempting, DeletePod)) == [("low-0", Reason.PREEMPTED),
                                                                           ("low-1", Reason.PREEMPTED)]
    assert preempting.preemptions == {"deleted": 1}
    (status,) = [a.status for a in of(preempting, SaveGang) if a.group == (NS, "low")]
    assert status["phase"] == "Waiting"
    (condition,) = [c for c in status["conditions"] if c["type"] == "Preempted"]
    assert condition["status"] == "True" and condition["message"].startswith("preempted by team/urgent")
    later = [run.step() for _ in range(3)]  # its pods are gone now
    assert not any(a.group == (NS, "low") for outcome in later for a in of(outcome, DeleteGang)), \
        "its Gang stays, saying what to resubmit"


def test_lone_pods_are_evicted_only_as_many_as_needed():
    world = Owners(nodes(1))
    for i in range(4):
        world.add(pod_object(f"lone-{i}", gpus=2, gated=False, node_name="n0", phase="Running", priority=5))
    run = Run(world, Settings())
    world.add(member_object("half-0", group="half", min_count=1, gpus=4, priority=HIGH, created=CREATED))
    preempting = run.step()
    evicted = of(preempting, EvictPod)
    assert len(evicted) == 2 and all(e.group == (NS, e.pod) for e in evicted)
    assert preempting.preemptions == {"evicted": 2}


def test_with_preemption_off_or_equal_priority_nothing_is_taken():
    for run in (running_job(preemption=Preempting.NEVER), running_job(priority=HIGH)):
        urgent(run.world)
        outcome = run.step()
        assert not of(outcome, SuspendOwner) and not booked(outcome) and not outcome.preemptions


# --- victims that still stand ------------------------------------------------------------------

def lone_pods_and_a_preemptor() -> Run:
    """Four 2-GPU lone pods fill the node; a 4-GPU group of high priority arrives. The stand-in API
    takes no eviction: the pods stay, as when the Eviction API refuses them."""
    world = Owners(nodes(1))
    for i in range(4):
        world.add(pod_object(f"lone-{i}", gpus=2, gated=False, node_name="n0", phase="Running", priority=5))
    run = Run(world, Settings())
    world.add(member_object("half-0", group="half", min_count=1, gpus=4, priority=HIGH, created=CREATED))
    return run


def test_a_victim_whose_eviction_did_not_take_is_evicted_again_and_counted_once():
    run = lone_pods_and_a_preemptor()
    first = sorted(e.pod for e in of(run.step(), EvictPod))
    soon = run.step()
    assert of(soon, EvictPod) == [], "the first eviction is given time"
    later = [run.step() for _ in range(int(RETAKE_SECONDS))]
    again = [e for outcome in later for e in of(outcome, EvictPod)]
    assert sorted(e.pod for e in again) == first
    assert "taken again" in again[0].why
    assert not any(outcome.preemptions for outcome in [soon, *later]), "a victim is counted when first taken"
    assert not any(of(outcome, Release) for outcome in [soon, *later]), "still waiting for the room"


def test_the_preemptor_waits_for_its_victims_even_where_the_ledger_shows_room():
    # The victims may hold what the ledger does not count (devices, ports, a place in pod rules):
    # here the two pods that were not taken are deleted by their user, so the node's figures add
    # up, yet the two victims still run.
    run = lone_pods_and_a_preemptor()
    victims = sorted(e.pod for e in of(run.step(), EvictPod))
    for name in {f"lone-{i}" for i in range(4)} - set(victims):
        run.world.delete(f"{NS}/{name}")
    held = [run.step() for _ in range(int(STATUS_DETAILS_REFRESH_SECONDS) + 1)]
    assert not any(of(outcome, Release) for outcome in held)
    said = [a.status["conditions"][0]["message"] for outcome in held for a in of(outcome, SaveGang)
            if a.group == (NS, "half")]
    assert any(f"waiting for 2 preempted pods to go: {', '.join(f'{NS}/{v}' for v in victims)}" in m for m in said)
    for name in victims:
        run.world.delete(f"{NS}/{name}")
    assert [a.pod for a in of(run.step(), Release)] == ["half-0"]


def test_a_job_whose_suspension_was_lost_is_suspended_again():
    run = running_job()
    urgent(run.world)
    patch_owner, run.world.patch_owner = run.world.patch_owner, lambda *args: None  # the write is lost
    assert of(run.step(), SuspendOwner)
    run.world.patch_owner = patch_owner
    retried = [run.step() for _ in range(int(RETAKE_SECONDS))]
    suspended = [a for outcome in retried for a in of(outcome, SuspendOwner)]
    assert [(a.resource.name, a.name) for a in suspended] == [(JOBS, "train")]
    assert run.world.owner(JOBS, "train")["spec"]["suspend"] is True
