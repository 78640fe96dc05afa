"""`gangkeeper_group_wait_seconds`: from a group first seen (its oldest member's creation) to the
pass that released it, once per wait; and `gangkeeper_leader`, which says whether a replica leads."""

from gangkeeper.controller.metrics import WAIT_BUCKETS
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
    reserved,
    sample,
)


def test_a_group_wait_is_observed_once_from_its_oldest_member_creation_to_its_release():
    clock = FakeClock(START - 600)  # the pods were created before the controller started
    world = World(clock)
    world.api.create("pods", member("pair-0"))
    clock.now = START - 5
    world.api.create("pods", member("pair-1"))
    clock.now = START
    loop = controller(clock, world)
    world.add(node("n0"))
    world.deliver()
    assert reserved(loop.turn(leading)) == {"pair-0", "pair-1"}
    clock.now += 3
    assert released(loop.turn(leading)) == {"pair-0", "pair-1"}
    assert sample(loop, "gangkeeper_group_wait_seconds_count", namespace="ml") == 1
    assert sample(loop, "gangkeeper_group_wait_seconds_sum", namespace="ml") == clock.wall() - (WALL - 600)
    assert sample(loop, "gangkeeper_group_wait_seconds_bucket", namespace="ml", le="600.0") == 0
    assert sample(loop, "gangkeeper_group_wait_seconds_bucket", namespace="ml", le="1200.0") == 1
    world.bind("ml", "pair-0", "pair-1")
    loop.turn(leading)
    # A member lost and replaced: the replacement is reserved and released, the group had stopped waiting long ago.
    world.delete("ml", "pair-1")
    loop.turn(leading)
    world.add(member("pair-2"))
    assert reserved(loop.turn(leading)) == {"pair-2"}
    assert released(loop.turn(leading)) == {"pair-2"}
    assert sample(loop, "gangkeeper_group_wait_seconds_count", namespace="ml") == 1, "a replacement is no new wait"


def test_a_release_sent_again_ends_one_wait_whether_some_members_or_none_were_released():
    clock = FakeClock()
    world = World(clock)
    loop = controller(clock, world)
    world.add(node("n0"), node("n1"))
    world.add(member("pair-0"), member("pair-1"), member("duo-0", "duo"), member("duo-1", "duo"))
    assert len(reserved(loop.turn(leading))) == 4
    original, refused = world.kube.patch, set()

    def refuse_once(resource, namespace, name, body, *args, **kwargs):
        if name in ("pair-1", "duo-0", "duo-1") and name not in refused:
            refused.add(name)
            raise RuntimeError("the API server is gone for a moment")
        return original(resource, namespace, name, body, *args, **kwargs)

    world.kube.patch = refuse_once
    assert released(loop.turn(leading)) == {"pair-0", "pair-1", "duo-0", "duo-1"}
    assert released(loop.turn(leading)) == {"pair-1", "duo-0", "duo-1"}, "sent again"
    assert sample(loop, "gangkeeper_group_wait_seconds_count", namespace="ml") == 2, "one wait per group"


def test_wait_buckets_reach_from_seconds_to_a_day():
    assert WAIT_BUCKETS[0] <= 1 and WAIT_BUCKETS[-1] >= 86400 and list(WAIT_BUCKETS) == sorted(WAIT_BUCKETS)


def test_the_leader_gauge_says_whether_this_replica_leads_and_a_follower_reports_no_groups():
    clock = FakeClock()
    world = World(clock)
    loop = controller(clock, world)
    world.add(member("big-0", "big"), member("big-1", "big"))
    assert sample(loop, "gangkeeper_leader") == 0
    loop.turn(lambda: False)
    assert sample(loop, "gangkeeper_leader") == 0
    assert sample(loop, "gangkeeper_groups", namespace="ml", phase="Waiting") is None
    loop.turn(leading)
    assert sample(loop, "gangkeeper_leader") == 1
    assert sample(loop, "gangkeeper_groups", namespace="ml", phase="Waiting") == 1
    assert sample(loop, "gangkeeper_waiting_accelerators", namespace="ml", resource="nvidia.com/gpu") == 8
    loop.turn(lambda: False)
    assert sample(loop, "gangkeeper_leader") == 0, "lost the lease"
    assert sample(loop, "gangkeeper_groups", namespace="ml", phase="Waiting") is None, \
        "the new leader counts them: a sum over replicas counts each group once"
    assert sample(loop, "gangkeeper_waiting_accelerators", namespace="ml", resource="nvidia.com/gpu") is None
    loop.turn(leading)
    assert sample(loop, "gangkeeper_groups", namespace="ml", phase="Waiting") == 1, "leading again: all counted again"
