from gangkeeper.controller.model import group_of
from gangkeeper.controller.preemption import holders
from gangkeeper.controller.queue import Order, QueuePolicy, plan_pass, queued
from tests.controller.builders import cluster, gang, member, node

STRICT = QueuePolicy(order=Order.STRICT_FIFO)
BEST_EFFORT = QueuePolicy(starvation_seconds=600)


def keys(groups):
    return [group.key[1] for group in groups]


def admitted(result):
    return [group.key[1] for group, _ in result.admitted]


def test_queue_orders_by_priority_then_first_seen_and_skips_incomplete_groups():
    old_low = gang("old-low", 1, first_seen=1)
    new_high = gang("new-high", 1, first_seen=5, priority=100)
    old_high = gang("old-high", 1, first_seen=2, priority=100)
    partial = gang("partial", 1, min_count=2)
    assert keys(queued([old_low, new_high, partial, old_high])) == ["old-high", "new-high", "old-low"]


def test_one_pass_never_books_the_same_capacity_twice():
    pool, ledger = cluster([node("n1"), node("n2")])
    groups = [gang(f"g{i}", 1, first_seen=i) for i in range(3)]
    result = plan_pass(groups, pool, ledger, now=10, policy=BEST_EFFORT)
    assert admitted(result) == ["g0", "g1"]
    assert [w.group.key[1] for w in result.waiting] == ["g2"]
    assert {n for _, plan in result.admitted for n in plan.nodes} == {"n1", "n2"}
    assert ledger.free("n1")["nvidia.com/gpu"] == 8  # the caller's ledger is untouched


def test_best_effort_lets_smaller_groups_pass_a_group_that_does_not_fit():
    pool, ledger = cluster([node("n1"), node("n2")])
    big, small = gang("big", 3, first_seen=0), gang("small", 1, first_seen=1)
    result = plan_pass([big, small], pool, ledger, now=10, policy=BEST_EFFORT)
    assert admitted(result) == ["small"]
    assert result.waiting[0].group is big and result.waiting[0].no_fit.placeable == 2
    assert result.held_for is None


def test_strict_fifo_stops_at_the_first_group_that_does_not_fit():
    pool, ledger = cluster([node("n1"), node("n2")])
    first, big, small = gang("first", 1, first_seen=0), gang("big", 3, first_seen=1), gang("small", 1, first_seen=2)
    result = plan_pass([small, big, first], pool, ledger, now=10, policy=STRICT)
    assert admitted(result) == ["first"]
    reasons = {w.group.key[1]: w.reason for w in result.waiting}
    assert reasons["small"] == "behind team/big in StrictFIFO order"
    assert reasons["big"].startswith("1 of 3 waiting members placeable")


def test_a_starving_group_holds_the_capacity_that_frees_for_it():
    pool, ledger = cluster([node("n1"), node("n2"), node("n3")], [])
    big = gang("big", 3, first_seen=0)
    small = gang("small", 1, first_seen=1)
    ledger.bind("running", "n3", member("running").requests)  # n1 and n2 free: big does not fit yet
    result = plan_pass([big, small], pool, ledger, now=599, policy=BEST_EFFORT)
    assert admitted(result) == ["small"]
    result = plan_pass([big, small], pool, ledger, now=600, policy=BEST_EFFORT)
    assert admitted(result) == [] and result.held_for is big
    assert "capacity is held for team/big" in result.waiting[-1].reason
    ledger.forget("running")  # the running job ends: all of it goes to the starving group
    result = plan_pass([big, small], pool, ledger, now=601, policy=BEST_EFFORT)
    assert admitted(result) == ["big"] and result.waiting[0].group is small


def test_a_later_group_that_fits_beside_the_hold_is_admitted():
    pool, ledger = cluster([node("n1"), node("n2"), node("n3", gpus=2)])
    big = gang("big", 3, first_seen=0)
    ledger.bind("running", "n1", member("running").requests)
    small = gang("small", 1, first_seen=1, gpus=2)
    result = plan_pass([big, small], pool, ledger, now=10_000, policy=BEST_EFFORT)
    assert admitted(result) == ["small"] and result.held_for is big
    assert result.admitted[0][1].nodes == {"n3"}


def test_only_the_first_starving_group_is_held():
    pool, ledger = cluster([node("n1"), node("n2")])
    first, second = gang("first", 3, first_seen=0), gang("second", 3, first_seen=1)
    result = plan_pass([first, second], pool, ledger, now=10_000, policy=BEST_EFFORT)
    assert result.held_for is first
    assert result.waiting[1].no_fit.placeable == 0


def test_incomplete_groups_are_reported_and_groups_in_flight_are_not():
    pool, ledger = cluster([node("n1")])
    partial = gang("partial", 1, min_count=2)
    in_flight = group_of(("team", "in-flight"), [member("r", reserved_node="n1")], 1, 0.0)
    released = group_of(("team", "released"), [member("a"), member("b", gated=False)], 2, 0.0)
    result = plan_pass([partial, in_flight, released], pool, ledger, now=0)
    reasons = {w.group.key[1]: w.reason for w in result.waiting}
    assert reasons == {"partial": "1 of min count 2 members present", "released": "members already released: b"}


def test_one_group_a_pass_preempts_and_its_room_is_not_given_to_the_groups_behind_it():
    low = [member(f"low-{i}", gpus=8, gated=False, node_name=f"n{i + 1}", phase="Running", priority=1)
           for i in range(2)]
    pool, ledger = cluster([node("n1"), node("n2")], [(m.node, m) for m in low])
    asked = []

    def candidates(below):
        asked.append(below)
        return holders([(("team", "low"), low)], (), ledger)

    first, second = gang("first", 1, first_seen=0, priority=100), gang("second", 2, first_seen=1, priority=100)
    result = plan_pass([first, second], pool, ledger, now=10, policy=BEST_EFFORT, candidates=candidates)
    ((preemptor, preemption),) = result.preemptions
    assert preemptor is first and [v.name for v in preemption.victims] == ["team/low"]
    assert admitted(result) == [] and [w.group.key[1] for w in result.waiting] == ["second"]
    assert asked == [100], "the candidates are gathered once, below the asking group's priority"


def test_a_group_that_no_preemption_can_seat_does_not_keep_the_next_one_from_preempting():
    low = [member(f"low-{i}", gpus=8, gated=False, node_name=f"n{i + 1}", phase="Running", priority=1)
           for i in range(2)]
    pool, ledger = cluster([node("n1"), node("n2")], [(m.node, m) for m in low])
    huge, urgent = gang("huge", 3, first_seen=0, priority=100), gang("urgent", 1, first_seen=1, priority=100)
    result = plan_pass([huge, urgent], pool, ledger, now=10, policy=BEST_EFFORT,
                       candidates=lambda below: holders([(("team", "low"), low)], (), ledger))
    assert [group.key[1] for group, _ in result.preemptions] == ["urgent"]
