"""The metrics by namespace, read from the registry after turns of the controller's loop: groups
by namespace and phase (settled groups too, which a pass no longer decides), the accelerators
waiting groups request, the longest wait, and a namespace's series gone with its last group."""

from gangkeeper.controller.metrics import PHASES, GroupPhases
from tests.controller_io.loop import (
    START,
    WALL,
    FakeClock,
    World,
    controller,
    leading,
    member,
    node,
    released,
    sample,
)


def groups(loop, namespace: str) -> dict[str, float | None]:
    return {phase: sample(loop, "gangkeeper_groups", namespace=namespace, phase=phase) for phase in PHASES}


def test_groups_are_counted_by_namespace_and_phase_also_once_settled_and_not_decided_again():
    clock = FakeClock()
    world = World(clock)
    loop = controller(clock, world)
    world.add(node("n0"))
    world.add(member("pair-0"), member("pair-1"), member("solo-0", "solo", namespace="vision"))
    first = loop.turn(leading)
    assert groups(loop, "ml") == {"Waiting": 0, "Admitted": 1, "Running": 0, "Succeeded": 0, "Failed": 0}
    assert groups(loop, "vision") == {"Waiting": 1, "Admitted": 0, "Running": 0, "Succeeded": 0, "Failed": 0}, \
        "1 of 2 members: incomplete"
    assert sum(first.phases.values()) == 2
    assert released(loop.turn(leading)) == {"pair-0", "pair-1"}
    world.bind("ml", "pair-0", "pair-1")
    loop.turn(leading)
    assert groups(loop, "ml")["Running"] == 1
    clock.now += 60
    quiet = loop.turn(leading)
    assert ("ml", "pair") not in quiet.decided_phases, "settled: this pass did not decide it"
    assert groups(loop, "ml")["Running"] == 1 and groups(loop, "ml")["Admitted"] == 0, "still counted, in its phase"
    assert quiet.phases == {"Running": 1, "Waiting": 1}, "the same groups as the totals"


def test_waiting_accelerators_and_the_longest_wait_are_by_namespace_and_resource():
    clock = FakeClock(START - 100)  # the pods were created before the controller started
    world = World(clock)
    world.api.create("pods", member("big-0", "big"))
    world.api.create("pods", member("big-1", "big"))
    clock.now = START - 30
    world.api.create("pods", member("solo-0", "solo", namespace="vision"))
    clock.now = START
    loop = controller(clock, world)
    world.deliver()
    loop.turn(leading)
    waiting = {namespace: sample(loop, "gangkeeper_waiting_accelerators", namespace=namespace,
                                 resource="nvidia.com/gpu") for namespace in ("ml", "vision")}
    assert waiting == {"ml": 8, "vision": 4}, "no node: both wait, with every member's GPUs"
    assert sample(loop, "gangkeeper_longest_wait_seconds", namespace="ml") == clock.wall() - (WALL - 100)
    assert sample(loop, "gangkeeper_longest_wait_seconds", namespace="vision") == clock.wall() - (WALL - 30)
    world.add(node("n0"))
    loop.turn(leading)
    assert groups(loop, "ml")["Admitted"] == 1
    assert sample(loop, "gangkeeper_waiting_accelerators", namespace="ml", resource="nvidia.com/gpu") == 0, \
        "admitted: no longer demand that waits"
    assert sample(loop, "gangkeeper_longest_wait_seconds", namespace="ml") == 0
    assert sample(loop, "gangkeeper_waiting_accelerators", namespace="vision", resource="nvidia.com/gpu") == 4


def test_a_namespace_without_groups_has_no_series_left_but_its_waits():
    clock = FakeClock()
    world = World(clock)
    loop = controller(clock, world)
    world.add(node("n0"))
    world.add(member("pair-0"), member("pair-1"), member("solo-0", "solo", namespace="vision"))
    loop.turn(leading)
    loop.turn(leading)
    assert sample(loop, "gangkeeper_group_wait_seconds_count", namespace="ml") == 1
    world.delete("ml", "pair-0", "pair-1")
    world.delete("vision", "solo-0")
    loop.turn(leading)
    assert groups(loop, "ml") == dict.fromkeys(PHASES), "no series left for the namespace"
    assert groups(loop, "vision") == dict.fromkeys(PHASES)
    assert sample(loop, "gangkeeper_waiting_accelerators", namespace="vision", resource="nvidia.com/gpu") is None
    assert sample(loop, "gangkeeper_longest_wait_seconds", namespace="vision") is None
    assert sample(loop, "gangkeeper_group_wait_seconds_count", namespace="ml") == 1, "a histogram is never reset"


def test_group_phases_follow_decided_groups_forget_gone_ones_and_start_over_on_a_complete_pass():
    phases = GroupPhases()
    assert phases.update({("a", "x"): "Waiting", ("b", "y"): "Running"}, (), True) == {
        ("a", "Waiting"): 1, ("b", "Running"): 1}
    assert phases.update({("a", "x"): "Admitted"}, (), False) == {("a", "Admitted"): 1, ("b", "Running"): 1}
    assert phases.update({}, [("b", "y")], False) == {("a", "Admitted"): 1}
    assert phases.namespaces == {"a"}
    assert phases.update({("c", "z"): "Failed"}, (), True) == {("c", "Failed"): 1}, "a complete pass is all there is"


def test_a_degraded_group_is_counted_by_namespace_also_once_settled_and_not_decided_again():
    clock = FakeClock()
    world = World(clock)
    loop = controller(clock, world)
    world.add(node("n0"))
    world.add(member("duo-0", "duo", size=1), member("duo-1", "duo", size=1))  # one elastic extra
    for _ in range(3):
        loop.turn(leading)
        world.bind("ml", *(name for name in ("duo-0", "duo-1")
                           if not world.pod(name, "ml")["spec"].get("schedulingGates")
                           and not world.pod(name, "ml")["spec"].get("nodeName")))
    loop.turn(leading)
    assert sample(loop, "gangkeeper_degraded_groups", namespace="ml") == 0
    world.delete("ml", "duo-1")
    loop.turn(leading)
    assert sample(loop, "gangkeeper_degraded_groups", namespace="ml") == 1, "1 of the 2 it had, min 1"
    clock.now += 60
    quiet = loop.turn(leading)
    assert ("ml", "duo") not in quiet.decided_phases and sample(loop, "gangkeeper_degraded_groups", namespace="ml") == 1
