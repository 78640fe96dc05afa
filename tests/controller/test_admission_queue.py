from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper.controller.cache.holders import holders
from gangkeeper.controller.model.members import group_of
from gangkeeper.controller.planning.queue import Order, QueuePolicy, plan_pass, queued
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
    big = gang("big", 2, first_seen=0)
    ledger.bind("running", "n1", member("running").requests)
    small = gang("small", 1, first_seen=1, gpus=2)
    result = plan_pass([big, small], pool, ledger, now=10_000, policy=BEST_EFFORT)
    assert admitted(result) == ["small"] and result.held_for is big
    assert result.admitted[0][1].nodes == {"n3"}


def test_only_the_first_starving_group_is_held():
    pool, ledger = cluster([node("n1"), node("n2"), node("n3")])
    ledger.bind("running", "n3", member("running").requests)
    first, second = gang("first", 3, first_seen=0), gang("second", 3, first_seen=1)
    result = plan_pass([first, second], pool, ledger, now=10_000, policy=BEST_EFFORT)
    assert result.held_for is first
    assert result.waiting[1].no_fit.placeable == 0


def test_a_group_larger_than_the_empty_cluster_holds_nothing_and_says_why():
    pool, ledger = cluster([node("n1"), node("n2"), node("n3")])
    ledger.bind("running", "n3", member("running").requests)
    huge = gang("huge", 4, first_seen=0)  # 4 × 8 GPUs: three 8-GPU nodes never hold it
    small = gang("small", 1, first_seen=1)
    result = plan_pass([huge, small], pool, ledger, now=10_000, policy=BEST_EFFORT)
    assert admitted(result) == ["small"] and result.held_for is None
    assert result.waiting[0].reason.endswith(
        "; it holds no capacity while it waits: 4 members need 8 nvidia.com/gpu each, "
        "and the 3 nodes that may take them hold 3 such members even when empty")


def test_the_next_starving_group_that_could_fit_is_held_behind_one_that_never_fits():
    pool, ledger = cluster([node("n1"), node("n2"), node("n3")])
    ledger.bind("running", "n3", member("running").requests)
    huge, big = gang("huge", 4, first_seen=0), gang("big", 3, first_seen=1)
    result = plan_pass([huge, big, gang("small", 1, first_seen=2)], pool, ledger, now=10_000, policy=BEST_EFFORT)
    assert result.held_for is big and admitted(result) == []


def test_classes_that_share_an_accelerator_are_counted_together_against_the_empty_cluster():
    pool, ledger = cluster([node("n1"), node("n2")])  # 16 GPUs
    fours = [member(f"four-{i}", gpus=4) for i in range(4)]  # 16 GPUs: each class alone would fit
    twos = [member(f"two-{i}", gpus=2) for i in range(2)]
    mixed = group_of(("team", "mixed"), fours + twos, 6, 0.0)
    result = plan_pass([mixed], pool, ledger, now=10_000, policy=BEST_EFFORT)
    assert result.held_for is None
    assert result.waiting[0].reason.endswith(
        "; it holds no capacity while it waits: its members need 20 nvidia.com/gpu, "
        "and the 2 nodes that may take them hold 16")


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
        return holders([group_of(("team", "low"), low, len(low), 0.0)], (), ledger)

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
                       candidates=lambda below: holders([group_of(("team", "low"), low, len(low), 0.0)], (), ledger))
    assert [group.key[1] for group, _ in result.preemptions] == ["urgent"]


# --- reusing the last pass's answers (queue module docstring, "Reuse") ---------------------------

def _counting(monkeypatch):
    """Count the planner's calls from the queue."""
    from gangkeeper.controller.planning import queue

    calls = []
    real = queue.plan_unit

    def counted(group, *args):
        calls.append(group.key[1])
        return real(group, *args)

    monkeypatch.setattr(queue, "plan_unit", counted)
    return calls


def _same(a, b):
    return (a.admitted, a.waiting, a.held_for, a.preemptions) == (b.admitted, b.waiting, b.held_for, b.preemptions)


def test_a_pass_on_what_the_last_one_planned_on_plans_nothing_again_and_decides_the_same(monkeypatch):
    pool, ledger = cluster([node("n1"), node("n2")])
    groups = [gang("big", 3, first_seen=0), gang("small", 1, first_seen=1), gang("other", 1, first_seen=2)]
    calls = _counting(monkeypatch)
    first = plan_pass(groups, pool, ledger, now=10, policy=BEST_EFFORT, basis=1)
    again = plan_pass(groups, pool, ledger, now=11, policy=BEST_EFFORT, basis=1, last=first.planned)
    assert calls == ["big", "small", "other"], "the second pass asked the planner nothing"
    assert _same(again, first) and admitted(again) == ["small", "other"]
    assert dict(again.ledger.free("n1")) == dict(first.ledger.free("n1")), "the admitted plans are counted alike"


def test_another_basis_plans_every_group_again(monkeypatch):
    pool, ledger = cluster([node("n1"), node("n2")])
    groups = [gang("a", 1, first_seen=0), gang("b", 1, first_seen=1)]
    first = plan_pass(groups, pool, ledger, now=10, policy=BEST_EFFORT, basis=1)
    ledger.bind("running", "n1", member("running").requests)  # what the basis says: the ledger changed
    calls = _counting(monkeypatch)
    again = plan_pass(groups, pool, ledger, now=10, policy=BEST_EFFORT, basis=2, last=first.planned)
    assert calls == ["a", "b"]
    assert admitted(again) == ["a"], "n1 is taken now"


def test_without_a_basis_nothing_is_reused_nor_kept(monkeypatch):
    pool, ledger = cluster([node("n1")])
    groups = [gang("a", 1)]
    first = plan_pass(groups, pool, ledger, now=10, policy=BEST_EFFORT, basis=1)
    calls = _counting(monkeypatch)
    again = plan_pass(groups, pool, ledger, now=10, policy=BEST_EFFORT, last=first.planned)
    assert calls == ["a"] and again.planned is None


def test_a_group_admitted_ahead_of_the_others_has_every_group_behind_it_planned_again(monkeypatch):
    pool, ledger = cluster([node("n1"), node("n2")])
    old = [gang("big", 3, first_seen=1), gang("small", 1, first_seen=2)]
    first = plan_pass(old, pool, ledger, now=10, policy=BEST_EFFORT, basis=1)
    assert admitted(first) == ["small"]
    newcomer = gang("urgent", 1, first_seen=5, priority=100)  # first in the queue, takes a node
    calls = _counting(monkeypatch)
    again = plan_pass([*old, newcomer], pool, ledger, now=10, policy=BEST_EFFORT, basis=1, last=first.planned)
    assert calls == ["urgent", "big", "small"]
    assert admitted(again) == ["urgent", "small"]
    assert _same(again, plan_pass([*old, newcomer], pool, ledger, now=10, policy=BEST_EFFORT))


def test_a_group_that_took_nothing_ahead_of_the_others_changes_nothing_for_them(monkeypatch):
    pool, ledger = cluster([node("n1"), node("n2")])
    old = [gang("small", 1, first_seen=2), gang("other", 1, first_seen=3)]
    first = plan_pass(old, pool, ledger, now=10, policy=BEST_EFFORT, basis=1)
    huge = gang("huge", 5, first_seen=0)  # ahead of both, fits nowhere
    calls = _counting(monkeypatch)
    again = plan_pass([*old, huge], pool, ledger, now=10, policy=BEST_EFFORT, basis=1, last=first.planned)
    assert calls == ["huge"]
    assert admitted(again) == ["small", "other"]


def test_a_group_that_changed_is_planned_again(monkeypatch):
    pool, ledger = cluster([node("n1")])
    first = plan_pass([gang("a", 1, gpus=8)], pool, ledger, now=10, policy=BEST_EFFORT, basis=1)
    calls = _counting(monkeypatch)
    again = plan_pass([gang("a", 2, gpus=8)], pool, ledger, now=10, policy=BEST_EFFORT, basis=1, last=first.planned)
    assert calls == ["a"] and admitted(again) == []


def test_a_group_that_starts_starving_holds_capacity_and_the_groups_behind_it_are_planned_again(monkeypatch):
    pool, ledger = cluster([node("n1"), node("n2"), node("n3")], [])
    ledger.bind("running", "n3", member("running").requests)
    groups = [gang("big", 3, first_seen=0), gang("small", 1, first_seen=1)]
    first = plan_pass(groups, pool, ledger, now=599, policy=BEST_EFFORT, basis=1)
    assert admitted(first) == ["small"] and first.held_for is None
    calls = _counting(monkeypatch)
    again = plan_pass(groups, pool, ledger, now=600, policy=BEST_EFFORT, basis=1, last=first.planned)
    assert calls == ["small"], "big's answer is the same; what follows its hold is not"
    assert again.held_for.key[1] == "big" and admitted(again) == []
    assert _same(again, plan_pass(groups, pool, ledger, now=600, policy=BEST_EFFORT))


def test_another_topology_plans_every_group_again(monkeypatch):
    from gangkeeper.controller.planning.plans import Topology

    pool, ledger = cluster([node("n1")])
    groups = [gang("a", 1)]
    first = plan_pass(groups, pool, ledger, now=10, policy=BEST_EFFORT, basis=1)
    calls = _counting(monkeypatch)
    racks = QueuePolicy(starvation_seconds=600, topology=Topology(rack_label="example.com/rack"))
    plan_pass(groups, pool, ledger, now=10, policy=racks, basis=1, last=first.planned)
    assert calls == ["a"]


def test_strict_fifo_stops_at_a_reused_answer_as_at_a_planned_one(monkeypatch):
    pool, ledger = cluster([node("n1"), node("n2")])
    groups = [gang("first", 1, first_seen=0), gang("big", 3, first_seen=1), gang("small", 1, first_seen=2)]
    first = plan_pass(groups, pool, ledger, now=10, policy=STRICT, basis=1)
    calls = _counting(monkeypatch)
    again = plan_pass(groups, pool, ledger, now=10, policy=STRICT, basis=1, last=first.planned)
    assert calls == [] and _same(again, first) and admitted(again) == ["first"]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["nothing", "tick", "bind", "free", "add", "drop"]), st.integers(0, 7)),
                min_size=1, max_size=12))
def test_reusing_answers_decides_what_planning_every_group_again_decides(changes):
    pool, ledger = cluster([node(f"n{i}") for i in range(4)])
    groups = {f"g{i}": gang(f"g{i}", 1 + i % 3, first_seen=i * 100.0, gpus=(8, 4, 2)[i % 3]) for i in range(4)}
    now, basis, bound = 0.0, 0, []
    last = {STRICT: None, BEST_EFFORT: None}
    for change, k in changes:
        if change == "tick":  # time alone: a group may start starving
            now += 350.0
        elif change == "bind":
            bound.append(f"b{len(bound)}")
            ledger.bind(bound[-1], f"n{k % 4}", member("x", gpus=2 + k % 3).requests)
            basis += 1
        elif change == "free" and bound:
            ledger.forget(bound.pop())
            basis += 1
        elif change == "add":
            groups[f"x{k}"] = gang(f"x{k}", 1 + k % 3, first_seen=now, gpus=4, priority=k % 2 * 10)
        elif change == "drop" and groups:
            del groups[sorted(groups)[k % len(groups)]]
        for policy in last:
            reused = plan_pass(groups.values(), pool, ledger, now=now, policy=policy, basis=basis, last=last[policy])
            assert _same(reused, plan_pass(groups.values(), pool, ledger, now=now, policy=policy))
            last[policy] = reused.planned
