"""The scheduler's placement decision, on plain data."""

from fractions import Fraction

import pytest

from sim.placement import (
    MOST_ALLOCATED,
    Decision,
    NodeUsage,
    Scoring,
    node_facts,
    place,
    requirement_matches,
    static_reasons,
)
from tests.builders import pod


def node(name, gpus=8, cpu="64", pods=110, labels=None, taints=None, unschedulable=False, ready=True):
    allocatable = {"cpu": cpu, "memory": "512Gi", "pods": str(pods), "nvidia.com/gpu": str(gpus)}
    return node_facts({"metadata": {"name": name, "labels": labels or {}},
                       "spec": {"taints": taints or [], "unschedulable": unschedulable},
                       "status": {"allocatable": allocatable,
                                  "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}})


GPU1 = {"nvidia.com/gpu": Fraction(1), "cpu": Fraction(1)}


def test_a_pod_goes_to_a_node_with_free_gpus():
    nodes = [node("a"), node("b")]
    usage = {"a": NodeUsage({"nvidia.com/gpu": 8, "cpu": 8}, 8)}
    assert place(pod(), GPU1, nodes, usage).node == "b"


def test_the_message_counts_each_reason_like_kube_scheduler():
    nodes = [node(f"n{i}") for i in range(6)]
    full = {f"n{i}": NodeUsage({"nvidia.com/gpu": 8}, 8) for i in range(6)}
    decision = place(pod(), GPU1, nodes, full)
    assert decision.node is None
    assert decision.message() == "0/6 nodes are available: 6 Insufficient nvidia.com/gpu."


def test_several_reasons_are_sorted_and_a_node_can_give_two():
    nodes = [node("a", cpu="1"), node("b", unschedulable=True)]
    usage = {"a": NodeUsage({"nvidia.com/gpu": 8, "cpu": 1}, 1)}
    message = place(pod(), GPU1, nodes, usage).message()
    assert message == ("0/2 nodes are available: 1 Insufficient cpu, 1 Insufficient nvidia.com/gpu, "
                       "1 node(s) were unschedulable.")


def test_pod_slots_run_out_before_resources():
    assert place(pod(), GPU1, [node("a", pods=2)], {"a": NodeUsage({}, 2)}).reasons == {"Too many pods": 1}


def test_extended_resource_the_node_lacks_is_insufficient():
    decision = place(pod(), {"amd.com/gpu": Fraction(1)}, [node("a")], {})
    assert decision.reasons == {"Insufficient amd.com/gpu": 1}


def test_node_selector_must_match_every_label():
    nodes = [node("a", labels={"pool": "h100"}), node("b", labels={"pool": "a100"})]
    assert place(pod(nodeSelector={"pool": "a100"}), GPU1, nodes, {}).node == "b"
    assert place(pod(nodeSelector={"pool": "v100"}), GPU1, nodes, {}).message() == \
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."


def pinned(*names, extra_terms=()):
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": list(names)}]}
    return pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term, *extra_terms]}}})


def test_the_pin_puts_the_pod_on_its_node_only():
    nodes = [node("a"), node("b"), node("c")]
    assert place(pinned("c"), GPU1, nodes, {}).node == "c"
    full = {"c": NodeUsage({"nvidia.com/gpu": 8}, 8)}
    assert place(pinned("c"), GPU1, nodes, full).reasons == {
        "node(s) didn't satisfy plugin(s) [NodeAffinity]": 2, "Insufficient nvidia.com/gpu": 1}


def test_terms_are_ored_and_an_empty_term_matches_nothing():
    nodes = [node("a", labels={"zone": "z1"}), node("b")]
    either = pinned("b", extra_terms=[{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}])
    assert static_reasons(either, nodes[0]) == () and static_reasons(either, nodes[1]) == ()
    empty = pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{}]}}})
    assert place(empty, GPU1, nodes, {}).node is None


@pytest.mark.parametrize("operator, values, labels, expected", [
    ("In", ["a", "b"], {"k": "b"}, True),
    ("In", ["a"], {}, False),
    ("NotIn", ["a"], {"k": "b"}, True),
    ("NotIn", ["a"], {}, True),
    ("NotIn", ["a"], {"k": "a"}, False),
    ("Exists", [], {"k": ""}, True),
    ("Exists", [], {}, False),
    ("DoesNotExist", [], {}, True),
    ("DoesNotExist", [], {"k": "x"}, False),
    ("Gt", ["4"], {"k": "8"}, True),
    ("Gt", ["8"], {"k": "8"}, False),
    ("Lt", ["8"], {"k": "4"}, True),
    ("Lt", ["8"], {"k": "x"}, False),
    ("Gt", ["4"], {}, False),
    ("Bogus", ["a"], {"k": "a"}, False),
])
def test_requirement_operators(operator, values, labels, expected):
    assert requirement_matches({"key": "k", "operator": operator, "values": values}, labels) is expected


def affinity(*expressions):
    return pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": list(expressions)}]}}})


def matched(expression, labels):
    return static_reasons(affinity(expression), node("a", labels=labels)) == ()


@pytest.mark.parametrize("bound, label, expected", [
    ("4", "8", True),
    ("4", "0008", True),
    ("4", "1_000", False),  # Python's int() reads it as 1000; Go's ParseInt refuses it
    (" 4", "8", False),
    ("4 ", "8", False),
    ("9223372036854775807", "9223372036854775808", False),  # beyond int64: ParseInt fails
    ("1e3", "2000", False),
])
def test_gt_reads_both_sides_as_go_parses_an_int64(bound, label, expected):
    assert matched({"key": "k", "operator": "Gt", "values": [bound]}, {"k": label}) is expected


@pytest.mark.parametrize("expression", [
    {"key": "k", "operator": "Gt", "values": ["-1"]},  # an integer, but no label value: the term never matches
    {"key": "k", "operator": "Lt", "values": ["+100"]},
    {"key": "k", "operator": "Gt", "values": ["1", "2"]},
    {"key": "k", "operator": "NotIn", "values": ["not a label value"]},
    {"key": "k", "operator": "In", "values": []},
    {"key": "k", "operator": "Exists", "values": ["3"]},
    {"key": "not a key", "operator": "DoesNotExist"},
])
def test_a_term_the_scheduler_cannot_parse_matches_no_node(expression):
    """component-helpers `nodeaffinity` builds each term with `labels.NewRequirement`; a term with an
    error is set aside, even where its requirement alone would have matched (NotIn, DoesNotExist)."""
    assert not matched(expression, {"k": "3"})
    either = pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [expression]}, {"matchExpressions": [{"key": "k", "operator": "Exists"}]}]}}})
    assert static_reasons(either, node("a", labels={"k": "3"})) == ()


def test_a_field_term_needs_exactly_one_value():
    two = pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["b", "c"]}]}]}}})
    assert static_reasons(two, node("a")) == ("node(s) didn't match Pod's node affinity/selector",)


def test_untolerated_taints_filter_and_tolerations_pass():
    tainted = node("a", taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}])
    assert static_reasons(pod(), tainted) == ("node(s) had untolerated taint(s)",)
    for toleration in ({"key": "nvidia.com/gpu", "operator": "Exists"},
                       {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                       {"operator": "Exists"}):
        assert static_reasons(pod(tolerations=[toleration]), tainted) == ()
    wrong = {"key": "nvidia.com/gpu", "value": "absent", "effect": "NoSchedule"}
    assert static_reasons(pod(tolerations=[wrong]), tainted) != ()


def test_a_toleration_without_a_key_matches_every_key_as_tolerates_taint_reads_it():
    """The API server refuses an empty key with Equal; the scheduler's own rule still compares values."""
    tainted = node("a", taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}])
    assert static_reasons(pod(tolerations=[{"operator": "Equal", "value": "present"}]), tainted) == ()
    assert static_reasons(pod(tolerations=[{"operator": "Equal", "value": "absent"}]), tainted) != ()


def test_prefer_no_schedule_does_not_filter():
    soft = node("a", taints=[{"key": "k", "effect": "PreferNoSchedule"}])
    assert static_reasons(pod(), soft) == ()


def test_cordoned_and_not_ready_nodes_are_filtered():
    assert static_reasons(pod(), node("a", unschedulable=True)) == ("node(s) were unschedulable",)
    assert static_reasons(pod(), node("a", ready=False)) == ("node(s) had untolerated taint(s)",)
    tolerant = pod(tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}])
    assert static_reasons(tolerant, node("a", unschedulable=True)) == ()


def test_least_allocated_spreads_and_most_allocated_packs():
    nodes = [node("a"), node("b")]
    usage = {"a": NodeUsage({"cpu": 32, "nvidia.com/gpu": 4}, 4)}
    assert place(pod(), GPU1, nodes, usage).node == "b"
    assert place(pod(), GPU1, nodes, usage, Scoring(MOST_ALLOCATED)).node == "a"
    gpu_weighted = Scoring(MOST_ALLOCATED, {"nvidia.com/gpu": 1})
    assert place(pod(), GPU1, nodes, usage, gpu_weighted).node == "a"


def test_ties_go_to_the_first_node():
    assert place(pod(), GPU1, [node("x"), node("a")], {}).node == "x"


def test_an_unknown_strategy_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="'Packed' is not known; use one of LeastAllocated, MostAllocated"):
        Scoring("Packed")


def test_no_nodes_message():
    assert Decision(None, {}, 0).message() == "0/0 nodes are available."
