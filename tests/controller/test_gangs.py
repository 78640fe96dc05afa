"""Which Gang is a group's, what it is called, and when its status is written (controller/deciding/gangs.py)."""

import hashlib
import re

from hypothesis import given
from hypothesis import strategies as st

from gangkeeper import names
from gangkeeper.controller.cache.groups import GANGS, JOBS, JOBSETS
from gangkeeper.controller.deciding.capabilities import ApiCapabilities
from gangkeeper.controller.deciding.decisions import DeleteGang, Report, Reserve, ReserveGroup, SaveGang
from gangkeeper.controller.deciding.gangs import NAME_MAX, STATUS_DETAILS_REFRESH_SECONDS, name_candidates, status_due
from gangkeeper.controller.deciding.memory import Memory
from gangkeeper.controller.deciding.reconciler import reconcile
from gangkeeper.controller.model.objects import Owner
from gangkeeper.controller.reading.workloads import workload_from_api
from tests.controller.builders import node_object, pod_object
from tests.controller.world import NS, World, member_object

NOW = 1_800_000_000.0
UID = "69041e62-37fd-4282-8337-ffb9221e2f8a"
OBJECT_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")  # DNS-1123 subdomain


def suffix(group: str, length: int = 4) -> str:
    return hashlib.sha256(f"{NS}/{group}".encode()).hexdigest()[:length]


def job_world(name: str = "huge", uid: str = UID, gangs=()) -> World:
    """A Job's two gated members, as the webhook labels them (`<job>-<uid>`), and room for them."""
    world = World([node_object("n0")], [(JOBS, {"metadata": {"name": name, "uid": uid}, "spec": {"parallelism": 2}}),
                                        *[(GANGS, gang) for gang in gangs]])
    for index in range(2):
        pod = member_object(f"{name}-{index}", group=f"{name}-{uid}", source=names.SOURCE_JOB, owner=("Job", name),
                            gpus=1)
        pod["metadata"]["ownerReferences"][0]["uid"] = uid
        world.add(pod)
    return world


def other_groups_gang(name: str) -> dict:
    return {"metadata": {"name": name}, "spec": {"minCount": 1, "groupName": "someone-else"}}


def step(world: World, memory: Memory = Memory(), now: float = NOW):
    outcome = reconcile(world.index(), memory, now)
    world.apply(outcome.actions)
    return outcome


def saved(outcome) -> list[SaveGang]:
    return [a for a in outcome.actions if isinstance(a, SaveGang)]


def involved(outcome) -> set[tuple[str, str]]:
    return {(a.involved.kind, a.involved.name) for a in outcome.actions if isinstance(a, Report)}


def uids(outcome) -> set[str]:
    return {a.involved.uid for a in outcome.actions if isinstance(a, Report)}


# --- names ---------------------------------------------------------------------------------------

def test_an_owned_groups_gang_is_named_after_its_owner_with_a_short_suffix():
    (save,) = saved(step(job_world()))
    assert save.name == f"huge-{suffix(f'huge-{UID}')}" and OBJECT_NAME.fullmatch(save.name) and "." not in save.name
    assert save.create["metadata"]["name"] == save.name
    assert save.create["metadata"]["ownerReferences"][0]["name"] == "huge"
    assert save.create["spec"]["groupName"] == f"huge-{UID}", "it declares the group by its label"


def test_the_name_is_derived_so_a_restarted_controller_finds_the_same_gang():
    world = job_world()
    (created,) = saved(step(world))
    assert [a.name for a in saved(step(job_world()))] == [created.name], "the same in another cluster, too"
    restarted = step(world, Memory(), NOW + 1)  # a new leader: released, nothing remembered
    assert [a.create for a in saved(restarted)] == [None] * len(saved(restarted))
    assert involved(restarted) == {("Gang", created.name)}
    assert uids(restarted) == {f"uid-{created.name}"}, "an existing Gang's Events carry its uid"
    assert uids(step(job_world())) == {""}, "a Gang created in this pass has none yet: the executor learns it"


def test_a_name_another_groups_gang_holds_is_lengthened_and_kept_once_taken():
    taken = f"huge-{suffix(f'huge-{UID}')}"
    world = job_world(gangs=[other_groups_gang(taken)])
    (save,) = saved(step(world))
    assert save.name == f"huge-{suffix(f'huge-{UID}', 5)}"
    assert world.gang(taken)["spec"]["groupName"] == "someone-else", "the other group's Gang is left alone"
    world.apply([DeleteGang((NS, "someone-else"), taken)])  # the shorter name is free again
    later = step(world, Memory(), NOW + 1)
    assert involved(later) == {("Gang", save.name)} and all(a.create is None for a in saved(later))


def test_a_gang_name_is_at_most_63_characters_and_the_suffix_is_never_cut():
    owner = "a" * 63
    (save,) = saved(step(job_world(name=owner)))
    assert save.name == f"{'a' * 58}-{suffix(f'{owner}-{UID}')}"


@given(st.text(min_size=1, max_size=80), st.text(max_size=80), st.one_of(st.none(), st.text(max_size=80)))
def test_every_candidate_name_is_a_valid_object_name_and_all_differ(group, part, owner_name):
    key, owner = (NS, group + part), Owner("batch/v1", "Job", owner_name, "u") if owner_name is not None else None
    candidates = list(name_candidates(key, group, owner))
    assert all(len(name) <= NAME_MAX and OBJECT_NAME.fullmatch(name) for name in candidates)
    assert len(set(candidates)) == len(candidates)


def test_a_group_without_owner_keeps_its_label_when_that_is_a_valid_name():
    world = World([node_object("n0")])
    world.add(member_object("a-0", group="plain", min_count=1, gpus=1))
    world.add(member_object("b-0", group="Team.B", min_count=1, gpus=1))
    world.add(member_object("c-0", group="team.c", min_count=1, gpus=1))
    assert {a.group[1]: a.name for a in saved(step(world))} == {
        "plain": "plain", "Team.B": f"team-b-{suffix('Team.B')}", "team.c": "team.c"}


def test_a_label_another_groups_gang_is_named_after_gets_a_suffix_and_that_gang_is_never_deleted():
    world = World([node_object("n0")], [(GANGS, other_groups_gang("plain"))])
    world.add(member_object("p-0", group="plain", min_count=1, gpus=1))
    first = step(world)
    (save,) = saved(first)
    assert save.name == f"plain-{suffix('plain')}"
    world.delete(f"{NS}/p-0")
    gone = step(world, first.memory, NOW + 1)
    assert [(a.group, a.name) for a in gone.actions if isinstance(a, DeleteGang)] == [((NS, "plain"), save.name)]
    assert world.gang("plain") is not None


def test_a_gang_a_user_created_keeps_its_name():
    world = World([node_object("n0")], [(GANGS, {"metadata": {"name": "my-training-run"},
                                                  "spec": {"minCount": 2, "groupName": "run"}})])
    for index in range(2):
        world.add(member_object(f"run-{index}", group="run", gpus=1))
    (save,) = saved(step(world))
    assert (save.name, save.create) == ("my-training-run", None)
    assert set(world.workloads) == {(GANGS, NS, "my-training-run")}, "no Gang of its own beside the user's"


def test_the_parts_of_an_in_order_jobset_have_gangs_named_after_their_replicated_job():
    jobset = {"metadata": {"name": "train", "uid": "js-uid"}, "spec": {
        "startupPolicy": {"startupPolicyOrder": "InOrder"},
        "replicatedJobs": [{"name": "driver", "template": {"spec": {"parallelism": 1}}},
                           {"name": "workers", "template": {"spec": {"parallelism": 1}}}]}}
    world = World([node_object("n0")], [(JOBSETS, jobset)])
    for part in ("driver", "workers"):
        pod = member_object(f"train-{part}-0", group="train-js-uid-0", source=names.SOURCE_JOBSET, gpus=1)
        pod["metadata"]["labels"].update({names.JOBSET_NAME_LABEL: "train", names.JOBSET_UID_LABEL: "js-uid",
                                          names.JOBSET_REPLICATED_JOB_LABEL: part})
        world.add(pod)
    assert sorted(a.name for a in saved(step(world))) == [
        f"train-driver-{suffix('train-js-uid-0/driver')}", f"train-workers-{suffix('train-js-uid-0/workers')}"]


def test_a_group_whose_every_name_is_taken_has_no_gang_and_is_reported_on_its_pod():
    candidates = list(name_candidates((NS, "g"), "g", None))
    world = World([node_object("n0")], [(GANGS, other_groups_gang(name)) for name in candidates])
    world.add(member_object("g-0", group="g", min_count=1, gpus=1))
    outcome = step(world)
    assert saved(outcome) == [] and involved(outcome) == {("Pod", "g-0")}


# --- status writes -------------------------------------------------------------------------------

def test_a_status_is_written_when_more_than_a_message_changed_or_the_details_are_old():
    def status(phase, message):
        return {"phase": phase, "conditions": [{"type": "Admitted", "reason": "NoFit", "message": message}]}

    current = status("Waiting", "16 free")
    assert status_due(current, status("Waiting", "16 free"), None, NOW) is None, "nothing new"
    assert status_due(current, status("Admitted", "16 free"), NOW, NOW) == NOW
    assert status_due(current, status("Waiting", "12 free"), NOW - 9, NOW) == NOW + 1, "the details, a second later"
    assert status_due(current, status("Waiting", "12 free"), NOW - 10, NOW) == NOW
    assert status_due(current, status("Waiting", "12 free"), None, NOW) == NOW, "never written by this controller"


def test_fields_a_gang_crd_of_an_older_version_prunes_are_not_written_again_and_again():
    current = {"phase": "Running", "conditions": []}
    wanted = {**current, "placed": 8, "peak": 8}
    assert status_due(current, wanted, None, NOW) == NOW, "written once"
    assert status_due(current, wanted, NOW - 1, NOW) is None, "came back without them: its CRD prunes them"
    assert status_due({**current, "placed": 7, "peak": 8}, wanted, NOW - 1, NOW) == NOW, "a CRD that keeps them"


def test_a_gang_says_why_and_since_when_a_waiting_group_waits_and_forgets_it_once_admitted():
    world = World([node_object("n0", gpus=8)])
    for i in range(2):
        world.add(member_object(f"big-{i}", group="big", min_count=3, gpus=8))
    (waiting,) = saved(step(world))
    assert waiting.status["phase"] == "Waiting" and waiting.status["reason"] == "Incomplete"
    # When the controller first saw the group; on its first pass, its oldest member's creation.
    assert waiting.status["waitingSince"] == "2025-01-01T00:00:00Z"
    small = World([node_object("n0", gpus=8)])
    small.add(member_object("small-0", group="small", min_count=1, gpus=8))
    (admitted,) = saved(step(small))
    assert admitted.status["reason"] == "Reserved"
    assert admitted.status["waitingSince"] is None, "null: the merge patch removes what a waiting status wrote"


def test_details_held_back_by_the_refresh_interval_are_written_by_the_pass_that_falls_due():
    world = World([node_object("n0", gpus=8)])
    for i in range(2):
        world.add(member_object(f"big-{i}", group="big", min_count=2, gpus=8))
    first = step(world)
    assert saved(first), "the Gang is created"
    world.add(pod_object("lone", gpus=4, gated=False, node_name="n0", phase="Running"))  # 4 free, not 8
    later = step(world, first.memory, NOW + 1)
    assert saved(later) == [], "the details only: held back"
    assert later.next_due == NOW + STATUS_DETAILS_REFRESH_SECONDS
    (refreshed,) = saved(step(world, later.memory, later.next_due))
    assert "eligible nodes have 4 free" in refreshed.status["conditions"][0]["message"]


# --- reservations -------------------------------------------------------------------------------

def test_a_reservation_keeps_the_entries_of_live_members_and_drops_those_of_pods_gone_or_replaced():
    world = World([node_object("n0"), node_object("n1")])
    for name in ("g-0", "g-1", "g-2"):
        world.add(member_object(name, min_count=3, gpus=1))
    world.put_workload(GANGS, {"metadata": {"name": "g"}, "spec": {"minCount": 3}, "status": {"reservations": {
        "g-0": {"uid": f"uid-{NS}-g-0", "node": "n0"},  # a member reserved before (an elastic group's, say)
        "g-1": {"uid": "uid-of-a-pod-gone", "node": "n0"},  # another pod of the name: this one waits
        "old": {"uid": "uid-old", "node": "n1"}}}})
    outcome = reconcile(world.index(), Memory(), NOW)
    (write,) = [a for a in outcome.actions if isinstance(a, ReserveGroup)]
    assert write.create is None and write.reservations == {
        "g-1": {"uid": f"uid-{NS}-g-1", "node": "n0"}, "g-2": {"uid": f"uid-{NS}-g-2", "node": "n0"}, "old": None}


def pair() -> World:
    world = World([node_object("n0")])
    for name in ("g-0", "g-1"):
        world.add(member_object(name, min_count=2, gpus=1))
    return world


def on_pods(outcome) -> list[tuple[str, str]]:
    return [(a.pod, a.node) for a in outcome.actions if isinstance(a, Reserve)]


def test_without_the_gang_api_a_group_is_reserved_and_reported_on_its_pods():
    outcome = reconcile(pair().index(), Memory(), NOW, capabilities=ApiCapabilities(serves_gangs=False))
    assert on_pods(outcome) == [("g-0", "n0"), ("g-1", "n0")]
    assert saved(outcome) == [] and involved(outcome) == {("Pod", "g-0")}


def test_a_gang_crd_that_prunes_reservations_has_them_written_on_the_pods_and_the_gang_status_still_saved():
    outcome = reconcile(pair().index(), Memory(), NOW, capabilities=ApiCapabilities(keeps_gang_reservations=False))
    assert on_pods(outcome) == [("g-0", "n0"), ("g-1", "n0")]
    assert [a for a in outcome.actions if isinstance(a, ReserveGroup)] == []
    assert [a.name for a in saved(outcome)] == ["g"] and involved(outcome) == {("Gang", "g")}


def test_a_gangs_reservations_are_read_as_written_and_malformed_entries_book_nothing():
    gang = {"metadata": {"name": "g", "namespace": NS}, "spec": {"minCount": 1}, "status": {"reservations": {
        "p0": {"uid": "u0", "node": "n0"}, "p1": {"uid": "u1"}, "p2": "n2", "p3": {"uid": 3, "node": "n3"}}}}
    assert workload_from_api(GANGS, gang).reservations == {"p0": ("u0", "n0")}
    assert workload_from_api(GANGS, {**gang, "status": {"reservations": ["p0"]}}).reservations == {}
