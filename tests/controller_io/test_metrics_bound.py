"""`gangkeeper_group_complete_to_bound_seconds`: from a group complete to its members seen bound,
once each time it becomes complete (issue 15: the figure users see on their clusters)."""

from tests.controller_io.test_metrics_groups import bind, delete, leading, pod, sample
from tests.controller_io.test_runner import FakeClock, FakeKube, controller, node, released, reserved, submit

METRIC = "gangkeeper_group_complete_to_bound_seconds"


def test_complete_to_bound_is_observed_when_the_group_is_seen_bound_and_again_when_a_replacement_completes_it():
    clock, api = FakeClock(), FakeKube()
    loop = controller(clock, api)
    loop.nodes.add(node("n0"))
    submit(loop, api, pod("pair-0", "ml", "pair"), pod("pair-1", "ml", "pair"))  # complete now
    assert reserved(loop.turn(leading)) == {"pair-0", "pair-1"}
    clock.now += 0.2
    assert released(loop.turn(leading)) == {"pair-0", "pair-1"}
    assert sample(loop, f"{METRIC}_count") == 0, "released, not bound yet"
    clock.now += 0.3
    bind(loop, api, "ml", "pair-0", "pair-1")
    loop.turn(leading)
    assert sample(loop, f"{METRIC}_count") == 1
    assert abs(sample(loop, f"{METRIC}_sum") - 0.5) < 1e-6
    assert sample(loop, f"{METRIC}_bucket", le="0.5") == 1 and sample(loop, f"{METRIC}_bucket", le="0.25") == 0
    loop.turn(leading)
    assert sample(loop, f"{METRIC}_count") == 1, "once: the group stays bound"
    delete(loop, api, "ml", "pair-1")  # a member lost: incomplete until its replacement comes
    loop.turn(leading)
    clock.now += 5
    submit(loop, api, pod("pair-2", "ml", "pair"))  # complete again
    loop.turn(leading)
    loop.turn(leading)
    clock.now += 1
    bind(loop, api, "ml", "pair-2")
    loop.turn(leading)
    assert sample(loop, f"{METRIC}_count") == 2
    assert abs(sample(loop, f"{METRIC}_sum") - 1.5) < 1e-6, "the replacement's second, not the time it was missing"
