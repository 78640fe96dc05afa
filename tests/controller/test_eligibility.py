from collections import Counter
from fractions import Fraction

import pytest

from gangkeeper.controller.cache.capacity import Ledger
from gangkeeper.controller.checks.eligibility import NodePool, affinity_matches, placement_refusal, refusal, tolerates
from gangkeeper.controller.model.nodes import Taint, Toleration
from gangkeeper.controller.model.selectors import Requirement, Term, requirement_matches
from tests.controller.builders import GPU, member, node

TAINT = Taint("gpu", "a100", "NoSchedule")


@pytest.mark.parametrize("toleration, taint, expected", [
    (Toleration("gpu", "Equal", "a100", "NoSchedule"), TAINT, True),
    (Toleration("gpu", "", "a100", "NoSchedule"), TAINT, True),  # operator defaults to Equal
    (Toleration("gpu", "Equal", "h100", "NoSchedule"), TAINT, False),
    (Toleration("gpu", "Exists", "", "NoSchedule"), TAINT, True),
    (Toleration("gpu", "Exists", "", ""), TAINT, True),  # empty effect: every effect
    (Toleration("gpu", "Exists", "", "NoExecute"), TAINT, False),
    (Toleration("", "Exists", "", ""), TAINT, True),  # empty key with Exists: everything
    (Toleration("other", "Exists", "", ""), TAINT, False),
    (Toleration("gpu", "Equal", "", "NoSchedule"), Taint("gpu", "", "NoSchedule"), True),
    (Toleration("gpu", "Gt", "1", "NoSchedule"), TAINT, False),  # unknown operator
])
def test_tolerates(toleration, taint, expected):
    assert tolerates(toleration, taint) is expected


LABELS = {"zone": "a", "gpus": "8", "big": "99999999999999999999", "padded": " 8"}


@pytest.mark.parametrize("key, operator, values, expected", [
    ("zone", "In", ("a", "b"), True),
    ("zone", "In", ("b",), False),
    ("missing", "In", ("",), False),
    ("zone", "NotIn", ("b",), True),
    ("zone", "NotIn", ("a",), False),
    ("missing", "NotIn", ("a",), True),
    ("zone", "Exists", (), True),
    ("missing", "Exists", (), False),
    ("missing", "DoesNotExist", (), True),
    ("zone", "DoesNotExist", (), False),
    ("gpus", "Gt", ("4",), True),
    ("gpus", "Gt", ("8",), False),
    ("gpus", "Lt", ("+9",), True),
    ("gpus", "Lt", ("-1",), False),
    ("zone", "Gt", ("1",), False),  # not a number
    ("big", "Gt", ("1",), False),  # beyond int64
    ("padded", "Gt", ("1",), False),  # Go's ParseInt takes no spaces
    ("missing", "Lt", ("100",), False),
    ("gpus", "Gt", ("1", "2"), False),  # exactly one value
    ("zone", "Like", ("a",), False),
])
def test_requirement_matches(key, operator, values, expected):
    assert requirement_matches(Requirement(key, operator, values), LABELS) is expected


IN_A = Requirement("zone", "In", ("a",))
IN_B = Requirement("zone", "In", ("b",))
NAME_N1 = Requirement("metadata.name", "In", ("n1",))
NOT_N1 = Requirement("metadata.name", "NotIn", ("n1",))


@pytest.mark.parametrize("terms, expected", [
    (None, True),  # no required affinity
    ((), False),  # required, but no term
    ((Term((), ()),), False),  # an empty term matches nothing
    ((Term((IN_A,), ()),), True),
    ((Term((IN_B,), ()), Term((IN_A,), ())), True),  # terms are ORed
    ((Term((IN_A, IN_B), ()),), False),  # requirements are ANDed
    ((Term((IN_A,), (NAME_N1,)),), True),
    ((Term((IN_A,), (NOT_N1,)),), False),
    ((Term((), (NAME_N1,)),), True),
    ((Term((), (Requirement("metadata.name", "In", ("n2",)),)),), False),
    ((Term((), (Requirement("spec.unknown", "In", ("n1",)),)),), False),
])
def test_affinity_matches(terms, expected):
    assert affinity_matches(terms, node("n1", labels={"zone": "a"})) is expected


@pytest.mark.parametrize("requirement", [
    Requirement("gpus", "Gt", ("-1",)),  # ParseInt takes it, but it is no label value
    Requirement("gpus", "Lt", ("+100",)),
    Requirement("zone", "NotIn", ("not a value",)),
    Requirement("zone", "In", ()),
    Requirement("zone", "Exists", ("a",)),
    Requirement("not a key", "DoesNotExist", ()),
    Requirement("zone", "Like", ("a",)),
])
def test_a_term_the_scheduler_cannot_parse_matches_no_node(requirement):
    """component-helpers `nodeaffinity` builds a term with `labels.NewRequirement`; a term with an
    error is set aside, even where its requirement alone would hold (NotIn, DoesNotExist)."""
    labelled = node("n1", labels={"zone": "a", "gpus": "8"})
    assert not affinity_matches((Term((requirement,), ()),), labelled)
    assert affinity_matches((Term((requirement,), ()), Term((IN_A,), ())), labelled)


def test_a_field_requirement_takes_exactly_one_value():
    assert not affinity_matches((Term((), (Requirement("metadata.name", "NotIn", ("n2", "n3")),)),), node("n1"))


GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}
UNSCHEDULABLE_TOLERATION = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}


@pytest.mark.parametrize("node_kwargs, pod_kwargs, expected", [
    ({}, {}, None),
    ({"ready": False}, {}, "not Ready"),
    ({"ready": False}, {"tolerations": [{"operator": "Exists"}]}, "not Ready"),
    ({"unschedulable": True}, {}, "cordoned"),
    ({"unschedulable": True}, {"tolerations": [UNSCHEDULABLE_TOLERATION]}, None),
    ({"taints": [{"key": GPU, "value": "present", "effect": "NoSchedule"}]}, {},
     f"untolerated taint {GPU}=present:NoSchedule"),
    ({"taints": [{"key": GPU, "value": "present", "effect": "NoSchedule"}]}, {"tolerations": [GPU_TOLERATION]},
     None),
    ({"taints": [{"key": "maintenance", "effect": "NoExecute"}]}, {"tolerations": [GPU_TOLERATION]},
     "untolerated taint maintenance:NoExecute"),
    ({"taints": [{"key": "spot", "effect": "PreferNoSchedule"}]}, {}, None),
    ({"labels": {"pool": "a100"}}, {"node_selector": {"pool": "a100"}}, None),
    ({"labels": {"pool": "h100"}}, {"node_selector": {"pool": "a100"}}, "nodeSelector pool=a100 not matched"),
    ({"labels": {"pool": "a100"}}, {"affinity_terms": [{"matchExpressions": [
        {"key": "pool", "operator": "NotIn", "values": ["a100"]}]}]}, "required node affinity not matched"),
])
def test_placement_refusal(node_kwargs, pod_kwargs, expected):
    assert placement_refusal(member("p", **pod_kwargs), node("n1", **node_kwargs)) == expected


def test_refusal_adds_the_pod_slot():
    pod, target = member("p"), node("n1")
    assert refusal(pod, target, {"pods": Fraction(1)}) is None
    assert refusal(pod, target, {"pods": Fraction(0)}) == "no pod slot left"
    assert refusal(pod, node("n1", ready=False), {"pods": Fraction(0)}) == "not Ready"


def test_pool_keeps_the_eligible_ones_among_a_tuple_until_another_comes():
    pool = NodePool([node("a"), node("b"), node("c", ready=False)])
    eligible = pool.eligible(member("p"))
    every, some = ("a", "b"), ("a", "b", "c")
    assert pool.eligible_among(eligible, every, "eights") is every  # all eligible: the tuple itself
    among = pool.eligible_among(eligible, some, "eights")
    assert among == ("a", "b") and pool.eligible_among(eligible, some, "eights") is among
    assert pool.eligible_among(frozenset({"c"}), some, "eights") == ("c",)  # another set, the same slot


def test_pool_counts_label_values_and_keeps_the_count_of_a_tuple_until_another_comes():
    pool = NodePool([node("a", labels={"pool": "a100"}), node("b", labels={"pool": "a100"}), node("c")])
    names = ("a", "b", "c")
    counted = pool.labelled("pool", names, "eights")
    assert counted == {"a100": 2, None: 1} and pool.labelled("pool", names, "eights") is counted
    assert pool.labelled("pool", ("a", "c"), "eights") == {"a100": 1, None: 1}  # another tuple, the same slot
    assert pool.labelled("pool", ["a", "b"], "eights") == {"a100": 2}  # a list may change: counted each time


def test_pool_remembers_eligible_nodes_and_counts_refusals():
    pool = NodePool([node("b", labels={"pool": "a100"}), node("a", labels={"pool": "a100"}),
                     node("c", ready=False), node("d", labels={"pool": "h100"})])
    pod = member("p", node_selector={"pool": "a100"})
    assert list(pool.nodes) == ["a", "b", "c", "d"]
    assert pool.eligible(pod) == {"a", "b"}
    assert pool.eligible(member("other", node_selector={"pool": "a100"})) is pool.eligible(pod)
    assert pool.refusals(pod) == {"not Ready": 1, "nodeSelector pool=a100 not matched": 1}
    assert pool.label_values("pool") == {"a": "a100", "b": "a100", "d": "h100"}


def test_what_the_pool_works_out_from_the_ledgers_names_follows_the_nodes_that_move_as_a_fresh_pool_finds_it():
    nodes = [node(f"n{i}", zone="ab"[i % 3 == 0]) for i in range(9)] + [node("n9", zone="a", ready=False)]
    pool, ledger = NodePool(nodes), Ledger(nodes)
    every, eligible = frozenset(n.name for n in nodes), pool.eligible(member("p"))
    for step in range(12):  # nodes leave the 8 free for 6 and come back, one plan after the other
        for amount, chosen in [(amount, chosen) for amount in (8, 6)
                               for chosen in (every, eligible, frozenset({"n0", "n2", "n9"}), every - {"n1"})]:
            names = ledger.names_by_free(GPU, amount)
            among = pool.eligible_among(chosen, names, (amount, chosen))
            assert among == tuple(name for name in names if name in chosen)
            counted = pool.labelled("topology.kubernetes.io/zone", among, (amount, chosen))
            assert counted == Counter(NodePool(nodes).label_values("topology.kubernetes.io/zone")[n] for n in among)
            assert all(counted.values()), "a value no node has any more is left out"
        ledger.bind(f"p{step}", f"n{step % 10}", {GPU: Fraction(2)})
        if step % 3:
            ledger.forget(f"p{step - 1}")
    assert pool.eligible_among(every, ledger.names_by_free(GPU, 8), (8, every)) is ledger.names_by_free(GPU, 8)


def test_pool_knows_the_most_of_a_resource_one_node_has():
    pool = NodePool([node("a", gpus=8), node("b", gpus=16), node("c", gpus=None)])
    assert (pool.most(GPU), pool.most("example.com/fpga")) == (16, 0)
