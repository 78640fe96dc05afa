"""`gangkeeper_group_complete_to_bound_seconds`: from a group complete to its members seen bound,
once each time it becomes complete (issue 15: the figure users see on their clusters)."""

from tests.controller_io.loop import FakeClock, World, controller, leading, member, node, released, reserved, sample

METRIC = "gangkeeper_group_complete_to_bound_seconds"


def test_complete_to_bound_is_observed_when_the_group_is_seen_bound_and_again_when_a_replacement_completes_it():
    clock = FakeClock()
    world = World(clock)
    loop = controller(clock, world)
    world.add(node("n0"))
    world.add(member("pair-0"), member("pair-1"))  # complete now
    assert reserved(loop.turn(leading)) == {"pair-0", "pair-1"}
    clock.now += 0.2
    assert released(loop.turn(leading)) == {"pair-0", "pair-1"}
    assert sample(loop, f"{METRIC}_count") == 0, "released, not bound yet"
    clock.now += 0.3
    world.bind("ml", "pair-0", "pair-1")
    loop.turn(leading)
    assert sample(loop, f"{METRIC}_count") == 1
    assert abs(sample(loop, f"{METRIC}_sum") - 0.5) < 1e-6
    assert sample(loop, f"{METRIC}_bucket", le="0.5") == 1 and sample(loop, f"{METRIC}_bucket", le="0.25") == 0
    loop.turn(leading)
    assert sample(loop, f"{METRIC}_count") == 1, "once: the group stays bound"
    world.delete("ml", "pair-1")  # a member lost: incomplete until its replacement comes
    loop.turn(leading)
    clock.now += 5
    world.add(member("pair-2"))  # complete again
    loop.turn(leading)
    loop.turn(leading)
    clock.now += 1
    world.bind("ml", "pair-2")
    loop.turn(leading)
    assert sample(loop, f"{METRIC}_count") == 2
    assert abs(sample(loop, f"{METRIC}_sum") - 1.5) < 1e-6, "the replacement's second, not the time it was missing"
