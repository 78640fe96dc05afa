"""What a member is told on itself (controller/deciding/telling.py), decided by `reconcile()` pass
after pass on a stand-in API: why it waits, in its Gang's words, once per change of reason; that
it was released with its group; and no more Events a pass than the settings allow."""

from gangkeeper import names
from gangkeeper.controller.deciding.decisions import EVENT_MESSAGE_MAX, Phase, Reason, Report, TellPod, Verdict
from gangkeeper.controller.deciding.memory import Memory
from gangkeeper.controller.deciding.settings import Settings
from gangkeeper.controller.deciding.telling import RETELL_SECONDS, TELL_AGAIN_SECONDS, waiting_words
from tests.controller.builders import node_object, pod_object
from tests.controller.world import CREATED, NS, Run, World, add_group, member_object, nodes, of

ZONE = "topology.kubernetes.io/zone"


def told(outcome) -> dict[str, tuple[str, str]]:
    """Each pod told this pass: (reason, message)."""
    return {action.pod.name: (str(action.reason), action.message) for action in of(outcome, TellPod)}


def short_group(world: World, group: str, present: int, declared: int, created: str = CREATED) -> None:
    """`present` members of a group declared as `declared` with gangkeeper.io/min-count."""
    for i in range(present):
        world.add(member_object(f"{group}-{i}", group=group, min_count=declared, created=created))


def admitted_condition(world: World, gang: str) -> dict:
    return next(c for c in world.gang(gang)["status"]["conditions"] if c["type"] == "Admitted")


def test_a_member_of_a_group_short_of_members_is_told_what_it_waits_for_in_its_gangs_words():
    world = World(nodes(2))
    world.add(member_object("half-0", group="half", min_count=2, created=CREATED))
    run = Run(world)
    outcome = run.step()
    sentence = "Waiting for 1 more pod of group half (1 of 2 present; gangkeeper.io/min-count=2)"
    assert told(outcome) == {"half-0": ("Incomplete", sentence)}
    (action,) = of(outcome, TellPod)
    assert (action.pod.kind, action.pod.uid, action.warning) == ("Pod", f"uid-{NS}-half-0", False)
    assert admitted_condition(world, "half")["message"] == sentence, "the Gang says the same"
    assert told(run.step()) == {}, "told once, not once a pass"


def test_an_owners_size_is_named_as_its_declaration():
    world = World(nodes(1))
    world.add(member_object("pj-0", source=names.SOURCE_PYTORCHJOB, owner=("PyTorchJob", "pj"), created=CREATED))
    world.put_workload("pytorchjobs.kubeflow.org", {"metadata": {"name": "pj"}, "spec": {"pytorchReplicaSpecs": {
        "Master": {"replicas": 1}, "Worker": {"replicas": 2}}}})
    ((reason, message),) = told(Run(world).step()).values()
    assert reason == "Incomplete" and message.startswith("Waiting for 2 more pods of group pj-")
    assert message.endswith("(1 of 3 present; size 3 from PyTorchJob pj)")


def test_a_group_that_does_not_fit_says_the_constraint_and_where_to_look_and_not_again_for_new_numbers():
    world = World(nodes(2))
    add_group(world, "big", 2, gpus=16)
    run = Run(world)
    (reason, message), _ = told(run.step()).values()
    assert reason == "NoFit"
    assert message.startswith("Waiting: 0 of 2 waiting members placeable: needs 2 × 16 nvidia.com/gpu")
    assert message.endswith(f"(kubectl get gang big -n {NS})")
    assert message == f"Waiting: {admitted_condition(world, 'big')['message']} (kubectl get gang big -n {NS})"
    world.node("n2")
    assert told(run.step()) == {}, "more GPUs free change the numbers, not the reason"


def test_a_verdict_too_long_for_an_event_is_cut_short_and_where_to_look_is_kept():
    words = waiting_words(Verdict(Phase.WAITING, Reason.NO_FIT, "x" * 2000), "big", NS)
    assert len(words) == EVENT_MESSAGE_MAX and words.endswith(f"x… (kubectl get gang big -n {NS})")


def test_a_group_given_up_at_its_schedule_timeout_says_so_on_its_members():
    world = World(nodes(1))
    for i in range(2):
        world.add(member_object(f"big-{i}", group="big", min_count=2, gpus=16, timeout=5, created=CREATED))
    run = Run(world, Settings(fail_on_schedule_timeout=True))
    assert {reason for reason, _ in told(run.step(seconds=10)).values()} == {"NoFit"}
    assert set(told(run.step()).values()) == {
        ("TimedOut", f"Not admitted within 5s; given up (kubectl get gang big -n {NS})")}


def test_a_member_waiting_on_for_the_same_reason_is_told_again_before_its_event_ages_out():
    world = World(nodes(2))
    world.add(pod_object("running", namespace=NS, gated=False, node_name="n1", phase="Running"))
    add_group(world, "big", 2)
    run = Run(world)
    said = told(run.step())
    assert told(run.step(seconds=RETELL_SECONDS - 2)) == {}
    assert told(run.step()) == {}
    assert told(run.step()) == said, "the same words: its Event's count goes up and the Event stays"
    assert told(run.step()) == {}


def test_a_group_no_zone_holds_says_so():
    world = World([node_object(f"{zone}-{i}", zone=zone) for zone in "ab" for i in range(2)])
    for i in range(3):
        pod = member_object(f"wide-{i}", group="wide", min_count=3, created=CREATED)
        pod["metadata"]["annotations"][names.TOPOLOGY_REQUIRED_ANNOTATION] = ZONE
        world.add(pod)
    ((reason, message),) = set(told(Run(world).step()).values())
    assert reason == "NoFit"
    assert message.startswith(f"Waiting: required {ZONE}: needs 24 nvidia.com/gpu in one zone; a: 16 free, b: 16 free")


def test_a_new_reason_is_news_and_the_last_member_hears_only_the_latest():
    world = World(nodes(1))
    world.add(member_object("g-0", min_count=2, gpus=8, created=CREATED))
    run = Run(world)
    assert told(run.step())["g-0"][0] == "Incomplete"
    world.add(member_object("g-1", min_count=2, gpus=8, created=CREATED))
    assert {pod: reason for pod, (reason, _) in told(run.step()).items()} == {"g-0": "NoFit", "g-1": "NoFit"}


def test_a_member_preempting_is_told_how_many_it_takes():
    world = World(nodes(1))
    world.add(member_object("low-0", group="low", min_count=1, gpus=8, gated=False, node_name="n0", phase="Running",
                            priority=10, created=CREATED))
    world.add(member_object("urgent-0", group="urgent", min_count=1, gpus=8, priority=1000, created=CREATED))
    outcome = Run(world).step()
    reason, message = told(outcome)["urgent-0"]
    assert reason == "Preempting"
    assert message.startswith("Waiting: 1 members reserved; preempting 1 of lower priority, 1 pod (team/low)")
    assert message.endswith(f"(kubectl get gang urgent -n {NS})")


def test_a_member_released_is_told_its_node_and_its_group_and_is_then_forgotten():
    world = World(nodes(2))
    add_group(world, "g", 2)
    run = Run(world)
    assert told(run.step()) == {}, "reserved: the next pass releases it"
    releasing = run.step(bind=True)
    assert told(releasing) == {f"g-{i}": ("Released", f"Released to n{i} with its group of 2") for i in range(2)}
    (report,) = [r for r in of(releasing, Report) if r.reason is Reason.RELEASED]
    assert not report.on_pods, "one Event on each pod, in its own words"
    assert told(run.step()) == {} and run.memory.told == {}


def test_a_declaration_problem_is_a_warning():
    world = World(nodes(1))
    world.add(member_object("g-0", min_count=2, created=CREATED))
    world.add(member_object("g-1", min_count=3, created=CREATED))
    run = Run(world)
    outcome = run.step()
    assert {action.warning for action in of(outcome, TellPod)} == {True}
    assert {reason for reason, _ in told(outcome).values()} == {"Disagreement"}


def test_a_lone_pod_is_told_by_its_own_reports_alone():
    world = World(nodes(1, gpus=4))
    pod = pod_object("notebook", gpus=8, created=CREATED)
    pod["metadata"]["annotations"][names.GROUP_SOURCE_ANNOTATION] = names.SOURCE_ACCELERATOR_POD
    pod["metadata"]["labels"] = {names.GROUP_LABEL: "notebook"}
    world.add(pod)
    outcome = Run(world).step()
    assert told(outcome) == {}
    assert [(r.involved.kind, r.involved.name) for r in of(outcome, Report)] == [("Pod", "notebook")]


def test_a_pass_tells_at_most_its_share_the_longest_waiting_first_and_falls_due_soon_for_the_rest():
    world = World()  # no node: every group waits
    for group, created in (("new", "2027-01-15T07:59:00Z"), ("old", "2027-01-15T07:00:00Z")):
        short_group(world, group, 3, 4, created)
    run = Run(world, Settings(pod_events_per_pass=4))
    first = run.step()
    assert list(told(first)) == ["old-0", "old-1", "old-2", "new-0"]
    assert first.next_due is not None and first.next_due <= run.now - 1 + TELL_AGAIN_SECONDS
    second = run.step()
    assert list(told(second)) == ["new-1", "new-2"], "the rest, and nobody twice"
    assert told(run.step()) == {}


def test_none_are_told_when_the_settings_say_none_and_the_pass_does_not_fall_due_for_them():
    world = World()
    add_group(world, "g", 3)
    outcome = Run(world, Settings(pod_events_per_pass=0)).step()
    assert told(outcome) == {} and outcome.next_due is None


def test_after_a_restart_each_waiting_member_is_told_once_more():
    world = World(nodes(1))
    short_group(world, "g", 2, 3)
    run = Run(world)
    said = told(run.step())
    run.memory = Memory()
    assert told(run.step()) == said, "the same words: the executor bumps the Event's count"
    assert told(run.step()) == {}


def test_members_of_a_group_rolled_back_are_told_by_its_report_not_again():
    world = World(nodes(2))
    add_group(world, "g", 2)
    run = Run(world, Settings(bind_timeout_seconds=5.0))
    run.step()
    run.step()  # released, never bound
    rolled_back = run.step(seconds=10)
    assert told(rolled_back) == {}
    rolling = run.step()
    assert [r.on_pods for r in of(rolling, Report) if r.reason is Reason.ROLLED_BACK] == [True]
    assert told(rolling) == {}

