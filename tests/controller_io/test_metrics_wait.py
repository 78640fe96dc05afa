"""`gangkeeper_group_wait_seconds`: from a group first seen (its oldest member's creation) to the
pass that released it, once per wait; and `gangkeeper_leader`, which says whether a replica leads."""

from gangkeeper.controller.metrics import WAIT_BUCKETS
from tests.controller_io.test_metrics_groups import bind, delete, leading, pod, sample
from tests.controller_io.test_runner import WALL, FakeClock, FakeKube, controller, node, released, reserved, submit


def test_a_group_wait_is_observed_once_from_its_oldest_member_creation_to_its_release():
    clock, api = FakeClock(), FakeKube()
    loop = controller(clock, api)
    loop.nodes.add(node("n0"))
    submit(loop, api, pod("pair-0", "ml", "pair", created=WALL - 600), pod("pair-1", "ml", "pair", created=WALL - 5))
    assert reserved(loop.turn(leading)) == {"pair-0", "pair-1"}
    clock.now += 3
    assert released(loop.turn(leading)) == {"pair-0", "pair-1"}
    assert sample(loop, "gangkeeper_group_wait_seconds_count", namespace="ml") == 1
    assert sample(loop, "gangkeeper_group_wait_seconds_sum", namespace="ml") == clock.wall() - (WALL - 600)
    assert sample(loop, "gangkeeper_group_wait_seconds_bucket", namespace="ml", le="600.0") == 0
    assert sample(loop, "gangkeeper_group_wait_seconds_bucket", namespace="ml", le="1200.0") == 1
    bind(loop, api, "ml", "pair-0", "pair-1")
    loop.turn(leading)
    # A member lost and replaced: the replacement is reserved and released, the group had stopped waiting long ago.
    delete(loop, api, "ml", "pair-1")
    loop.turn(leading)
    submit(loop, api, pod("pair-2", "ml", "pair"))
    assert reserved(loop.turn(leading)) == {"pair-2"}
    assert released(loop.turn(leading)) == {"pair-2"}
    assert sample(loop, "gangkeeper_group_wait_seconds_count", namespace="ml") == 1, "a replacement is no new wait"


def test_a_release_sent_again_ends_one_wait_whether_some_members_or_none_were_released():
    clock, api = FakeClock(), FakeKube()
    loop = controller(clock, api)
    loop.nodes.add(node("n0"))
    loop.nodes.add(node("n1"))
    submit(loop, api, pod("pair-0", "ml", "pair"), pod("pair-1", "ml", "pair"),
           pod("duo-0", "ml", "duo"), pod("duo-1", "ml", "duo"))
    assert len(reserved(loop.turn(leading))) == 4
    original, refused = api.patch, set()

    def refuse_once(resource, namespace, name, body, *args, **kwargs):
        if name in ("pair-1", "duo-0", "duo-1") and name not in refused:
            refused.add(name)
            raise RuntimeError("the API server is gone for a moment")
        return original(resource, namespace, name, body, *args, **kwargs)

    api.patch = refuse_once
    assert released(loop.turn(leading)) == {"pair-0", "pair-1", "duo-0", "duo-1"}
    assert released(loop.turn(leading)) == {"pair-1", "duo-0", "duo-1"}, "sent again"
    assert sample(loop, "gangkeeper_group_wait_seconds_count", namespace="ml") == 2, "one wait per group"


def test_wait_buckets_reach_from_seconds_to_a_day():
    assert WAIT_BUCKETS[0] <= 1 and WAIT_BUCKETS[-1] >= 86400 and list(WAIT_BUCKETS) == sorted(WAIT_BUCKETS)


def test_the_leader_gauge_says_whether_this_replica_leads_and_a_follower_reports_no_groups():
    clock, api = FakeClock(), FakeKube()
    loop = controller(clock, api)
    submit(loop, api, pod("big-0", "ml", "big"), pod("big-1", "ml", "big"))
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
