from fractions import Fraction

import pytest

from gangkeeper.controller.cache.capacity import Ledger, members_fitting, usage
from gangkeeper.controller.model.names_in_order import moves_between
from tests.controller.builders import GPU, member, node

REQUESTS = {"cpu": Fraction(4), GPU: Fraction(2)}


def test_usage_adds_one_pod_slot():
    assert usage(REQUESTS) == {"cpu": 4, GPU: 2, "pods": 1}
    assert usage({}) == {"pods": 1}


@pytest.mark.parametrize("free, limit, expected", [
    ({"cpu": 16, GPU: 8, "pods": 10}, 10, 4),
    ({"cpu": 16, GPU: 8, "pods": 10}, 3, 3),
    ({"cpu": 6, GPU: 8, "pods": 10}, 10, 1),  # cpu limits
    ({"cpu": 16, GPU: 8, "pods": 2}, 10, 2),  # pod slots limit
    ({"cpu": 16, "pods": 10}, 10, 0),  # no GPU on the node
    ({"cpu": 16, GPU: 8, "pods": 10, "memory": -5}, 10, 4),  # over-committed on what is not asked
])
def test_members_fitting(free, limit, expected):
    assert members_fitting(usage(REQUESTS), {k: Fraction(v) for k, v in free.items()}, limit) == expected


def ledger_with_two_nodes():
    return Ledger([node("n1", gpus=8, cpu="32", pods=10), node("n2", gpus=4, cpu="32", pods=10)])


def test_free_is_allocatable_minus_bound_minus_reserved():
    ledger = ledger_with_two_nodes()
    ledger.bind("a", "n1", REQUESTS)
    ledger.reserve("b", "n1", REQUESTS)
    assert ledger.free("n1")[GPU] == 4
    assert ledger.free("n1")["cpu"] == 24
    assert ledger.free("n1")["pods"] == 8
    assert ledger.free("n2")[GPU] == 4
    assert ledger.free("unknown") == {}


def test_a_reserved_member_that_binds_is_counted_once():
    ledger = ledger_with_two_nodes()
    ledger.reserve("a", "n1", REQUESTS)
    assert ledger.is_bound("a") is False
    ledger.bind("a", "n1", REQUESTS)
    assert ledger.is_bound("a") is True
    assert ledger.free("n1")[GPU] == 6 and ledger.free("n1")["pods"] == 9


def test_recording_a_pod_again_replaces_it_even_on_another_node():
    ledger = ledger_with_two_nodes()
    ledger.reserve("a", "n1", REQUESTS)
    ledger.bind("a", "n2", REQUESTS)
    assert ledger.free("n1")[GPU] == 8 and ledger.free("n2")[GPU] == 2


def test_forget_gives_the_capacity_back_and_ignores_unknown_pods():
    ledger = ledger_with_two_nodes()
    ledger.bind("a", "n1", REQUESTS)
    ledger.forget("a")
    ledger.forget("never-seen")
    assert ledger.free("n1") == {"cpu": 32, "memory": 2**40, "pods": 10, GPU: 8}
    assert ledger.is_bound("a") is None


def test_pods_on_a_node_not_yet_known_count_once_it_appears():
    ledger = Ledger()
    ledger.bind("a", "late", REQUESTS)
    ledger.set_node(node("late", gpus=8))
    assert ledger.free("late")[GPU] == 6


def test_a_node_changing_allocatable_keeps_its_pods():
    ledger = ledger_with_two_nodes()
    ledger.bind("a", "n1", REQUESTS)
    ledger.set_node(node("n1", gpus=4, cpu="32", pods=10))
    assert ledger.free("n1")[GPU] == 2
    ledger.set_node(node("n1", gpus=None, cpu="32", pods=10))  # device plugin gone
    assert ledger.free("n1")[GPU] == -2
    assert ledger.nodes_by_free(GPU) == {-2: {"n1"}, 4: {"n2"}}


def test_removed_node_leaves_the_index():
    ledger = ledger_with_two_nodes()
    ledger.remove_node("n2")
    assert ledger.free("n2") == {}
    assert ledger.nodes_by_free(GPU) == {8: {"n1"}}


def test_nodes_are_indexed_by_free_accelerators_only():
    ledger = ledger_with_two_nodes()
    ledger.bind("a", "n1", REQUESTS)
    assert ledger.nodes_by_free(GPU) == {6: {"n1"}, 4: {"n2"}}
    assert ledger.nodes_by_free("cpu") == {}
    ledger.bind("b", "n2", REQUESTS)
    ledger.forget("a")
    assert ledger.nodes_by_free(GPU) == {8: {"n1"}, 2: {"n2"}}


def test_a_copy_is_independent():
    ledger = ledger_with_two_nodes()
    ledger.bind("a", "n1", REQUESTS)
    copy = ledger.copy()
    copy.reserve("b", "n1", REQUESTS)
    copy.forget("a")
    copy.set_node(node("n3"))
    assert ledger.free("n1")[GPU] == 6 and ledger.is_bound("b") is None
    assert ledger.nodes_by_free(GPU) == {6: {"n1"}, 4: {"n2"}}
    assert copy.nodes_by_free(GPU) == {6: {"n1"}, 4: {"n2"}, 8: {"n3"}}


def test_usage_of_is_the_usage_in_whole_ints_shared_by_equal_requests():
    ledger = ledger_with_two_nodes()
    counted = ledger.usage_of(REQUESTS)
    assert counted == usage(REQUESTS) and all(type(value) is int for value in counted.values())
    assert ledger.usage_of(dict(REQUESTS)) is counted


def test_names_by_free_stay_in_name_order_as_nodes_move_and_each_copy_keeps_its_own():
    ledger = Ledger([node(name, gpus=8) for name in ("n3", "n1", "n2")])
    first = ledger.names_by_free(GPU, 8)
    assert first == ("n1", "n2", "n3") and ledger.names_by_free(GPU, 8) is first  # unchanged: the same tuple
    ledger.bind("a", "n2", REQUESTS)
    copy = ledger.copy()
    copy.bind("b", "n1", REQUESTS)
    ledger.forget("a")
    assert ledger.names_by_free(GPU, 8) == ("n1", "n2", "n3") and ledger.names_by_free(GPU, 6) == ()
    assert copy.names_by_free(GPU, 8) == ("n3",) and copy.names_by_free(GPU, 6) == ("n1", "n2")
    ledger.remove_node("n1")
    assert ledger.names_by_free(GPU, 8) == ("n2", "n3")


def test_a_copy_shares_node_figures_until_either_side_changes_them():
    ledger = ledger_with_two_nodes()
    first = ledger.copy()
    ledger.bind("a", "n1", REQUESTS)  # the source changes after the copy
    second = first.copy()
    first.reserve("b", "n2", REQUESTS)
    second.reserve("c", "n1", REQUESTS)
    assert (ledger.free("n1")[GPU], ledger.free("n2")[GPU]) == (6, 4)
    assert (first.free("n1")[GPU], first.free("n2")[GPU]) == (8, 2)
    assert (second.free("n1")[GPU], second.free("n2")[GPU]) == (6, 4)
    assert ledger.counted() == {"a": ("n1", True)} and second.counted() == {"c": ("n1", False)}


def test_init_containers_sidecars_and_overhead_are_counted():
    sidecar = {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "2"}}}
    pod = member("p", gpus=2, cpu="4", init_containers=[sidecar], overhead={"cpu": "1"})
    ledger = ledger_with_two_nodes()
    ledger.bind(pod.uid, "n1", pod.requests)
    assert ledger.free("n1")["cpu"] == 32 - 7


def test_whole_amounts_are_kept_as_ints_and_fractions_stay_exact():
    ledger = Ledger([node("n1", cpu="2")])
    half = {"cpu": Fraction(1, 2)}
    for uid in ("a", "b", "c"):
        ledger.bind(uid, "n1", half)
    assert ledger.free("n1")["cpu"] == Fraction(1, 2)
    ledger.bind("d", "n1", half)
    free = ledger.free("n1")
    assert free["cpu"] == 0 and type(free["cpu"]) is int, "four halves make a whole again"
    assert type(free["memory"]) is int and type(free["pods"]) is int and type(free[GPU]) is int
    assert members_fitting({"cpu": Fraction(1, 3)}, {"cpu": 1}, 10) == 3
    assert members_fitting({"cpu": Fraction(2, 3), "pods": Fraction(1)}, {"cpu": 2, "pods": 5}, 10) == 3


def test_a_usage_found_by_its_requests_mapping_is_that_of_those_requests():
    ledger = Ledger([node("n1")])
    shared = {"cpu": Fraction(4), GPU: Fraction(2)}
    ledger.bind("a", "n1", shared)
    ledger.bind("b", "n1", dict(shared))  # equal, another mapping
    assert ledger.free("n1")[GPU] == 4
    for number in range(5000):  # more mappings than are remembered: each still counts as it asks
        ledger.reserve(f"r{number}", "n1", {"cpu": Fraction(number % 3, 1000)})
        ledger.forget(f"r{number}")
    ledger.bind("c", "n1", shared)
    assert ledger.free("n1")[GPU] == 2 and ledger.free("n1")["cpu"] == 96 - 12


def test_the_names_handed_out_carry_what_moved_since_and_each_ledger_journals_its_own():
    ledger = Ledger([node(name, gpus=8) for name in ("n1", "n2", "n3")])
    first = ledger.names_by_free(GPU, 8)
    ledger.bind("a", "n2", REQUESTS)
    ledger.forget("a")
    ledger.bind("b", "n3", REQUESTS)
    second = ledger.names_by_free(GPU, 8)
    assert second == ("n1", "n2") and moves_between(first, second) == [("n2", -1), ("n2", +1), ("n3", -1)]
    assert moves_between(second, first) is None, "the later hand-out first: not known"
    copy = ledger.copy()
    assert copy.names_by_free(GPU, 8) is second, "nothing moved since: the same names"
    copy.bind("c", "n1", REQUESTS)
    assert copy.names_by_free(GPU, 8) == ("n2",) and moves_between(second, copy.names_by_free(GPU, 8)) is None
    assert ledger.names_by_free(GPU, 8) is second, "the copy's moves are its own"
    for number in range(40):  # more moves than a journal keeps for three names: read again in full
        ledger.bind(f"x{number}", "n1", REQUESTS)
        ledger.forget(f"x{number}")
    assert ledger.names_by_free(GPU, 8) == ("n1", "n2") and moves_between(second, ledger.names_by_free(GPU, 8)) is None


def test_in_one_go_the_nodes_figures_change_when_it_ends_as_they_would_pod_by_pod():
    by_pod, at_once = ledger_with_two_nodes(), ledger_with_two_nodes()
    steps = [("bind", "a", "n1"), ("reserve", "b", "n1"), ("bind", "c", "n2"), ("forget", "b", None),
             ("bind", "a", "n2"), ("reserve", "d", "n1")]

    def take(ledger):
        for step, uid, where in steps:
            if step == "forget":
                ledger.forget(uid)
            else:
                getattr(ledger, step)(uid, where, REQUESTS)

    take(by_pod)
    with at_once.in_one_go():
        take(at_once)
        assert at_once.free("n1")[GPU] == 8 and at_once.counted() == by_pod.counted(), "figures from before, pods now"
    assert {name: dict(at_once.free(name)) for name in ("n1", "n2")} == {
        name: dict(by_pod.free(name)) for name in ("n1", "n2")} == {
        "n1": {GPU: 6, "cpu": 28, "pods": 9, "memory": 2**40}, "n2": {GPU: 0, "cpu": 24, "pods": 8, "memory": 2**40}}
    assert at_once.nodes_by_free(GPU) == by_pod.nodes_by_free(GPU) == {6: {"n1"}, 0: {"n2"}}
