"""The planner with a group's own topology rule: required, preferred, both, and slices (issue 13)."""

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper.controller.cache.capacity import usage
from gangkeeper.controller.cache.holders import holders
from gangkeeper.controller.checks.eligibility import refusal
from gangkeeper.controller.model.members import TopologyRule, group_of
from gangkeeper.controller.planning.planner import apply, plan_group
from gangkeeper.controller.planning.plans import NoFit, Plan
from gangkeeper.controller.planning.preemption import preempt
from gangkeeper.controller.planning.queue import plan_pass
from gangkeeper.controller.reading.pods import member_from_api
from tests.controller.builders import busy, cluster, member, node, replace
from tests.controller.generated import BUSY, GROUP, NODES, build
from tests.controller.occupied import (
    HOSTNAME,
    anti_affinity,
    claiming,
    device_class,
    device_slice,
    gang_of,
    plan,
    running,
    template,
    world,
)
from tests.controller.occupied import placement as occupancy_placement

ZONE = "topology.kubernetes.io/zone"
RACK = "example.com/rack"
CLIQUE = "nvidia.com/gpu.clique"


def ruled(name, size, rule, gpus=8, **pod):
    """A group of `size` members ranked 0 … size-1, declaring `rule`."""
    members = [replace(member(f"{name}-{i}", gpus=gpus, **pod), rank=(i,)) for i in range(size)]
    return replace(group_of(("team", name), members, size, 0.0), topology=rule)


def placed_on(plan_or_fit):
    assert isinstance(plan_or_fit, Plan), plan_or_fit
    return {m.name: node_name for m, node_name in plan_or_fit.assignments}


def labels_of(pool, plan_or_fit, label):
    return Counter(pool.nodes[n].labels.get(label) for n in placed_on(plan_or_fit).values())


def zoned(spec):
    """Nodes from {zone: {rack: count}}, named zone-rack-i."""
    return [node(f"{zone}-{rack}-{i}", zone=zone, labels={RACK: f"{zone}-{rack}"})
            for zone, racks in spec.items() for rack, count in racks.items() for i in range(count)]


# --- required --------------------------------------------------------------------------------

def test_required_zone_lands_in_the_only_zone_with_room():
    nodes = zoned({"a": {"r1": 3}, "b": {"r2": 3}})
    pool, ledger = cluster(nodes, [busy("a-r1-0", 8), busy("a-r1-1", 4)])  # a: 12 free, b: 24
    outcome = plan_group(ruled("g", 3, TopologyRule(required=ZONE)), pool, ledger)
    assert labels_of(pool, outcome, ZONE) == {"b": 3}
    assert outcome.domain == f"{ZONE}=b"


def test_without_the_rule_the_same_group_spreads_over_both_zones():
    nodes = zoned({"a": {"r1": 3}, "b": {"r2": 2}})
    pool, ledger = cluster(nodes)
    outcome = plan_group(ruled("g", 4, TopologyRule()), pool, ledger)
    assert set(labels_of(pool, outcome, ZONE)) == {"a", "b"}


def test_a_group_that_fits_the_cluster_but_no_zone_says_so_per_zone():
    nodes = zoned({"a": {"r1": 3}, "b": {"r2": 3}})
    pool, ledger = cluster(nodes, [busy("b-r2-0", 4)])  # a: 24 free, b: 20
    outcome = plan_group(ruled("g", 4, TopologyRule(required=ZONE)), pool, ledger)
    assert isinstance(outcome, NoFit)
    assert outcome.reason == f"required {ZONE}: needs 32 nvidia.com/gpu in one zone; a: 24 free, b: 20 free"
    assert outcome.limiting == ("topology",)
    assert outcome.placeable == 3 and {n.split("-")[0] for _, n in outcome.partial} == {"a"}  # held in one zone


def test_a_zone_with_the_accelerators_free_on_too_few_nodes_says_how_many_members_it_holds():
    nodes = [node(f"a{i}", zone="a") for i in range(4)] + [node("b0", zone="b"), node("c0", zone="c")]
    pool, ledger = cluster(nodes, [busy(f"a{i}", 4) for i in range(4)])  # a: 16 free, 4 on each node
    outcome = plan_group(ruled("g", 2, TopologyRule(required=ZONE)), pool, ledger)
    assert isinstance(outcome, NoFit)
    assert outcome.reason.endswith("; a: 16 free (room for 0 of 2 members), b: 8 free, c: 8 free")


def test_the_message_names_ten_zones_at_most():
    nodes = [node(f"n{i:02d}", zone=f"z{i:02d}") for i in range(14)]
    pool, ledger = cluster(nodes)
    outcome = plan_group(ruled("g", 2, TopologyRule(required=ZONE)), pool, ledger)
    assert outcome.reason.endswith("z09: 8 free and 4 more")


def test_nodes_without_the_label_never_qualify():
    nodes = [node("a0", zone="a"), node("bare-0"), node("bare-1")]
    pool, ledger = cluster(nodes)
    outcome = plan_group(ruled("g", 2, TopologyRule(required=ZONE)), pool, ledger)
    assert isinstance(outcome, NoFit) and outcome.reason.endswith("a: 8 free")


def test_best_fit_partly_used_zone_first_then_fewest_stranded():
    nodes = [node(f"{z}{i}", zone=z) for z, count in (("whole", 4), ("used", 4), ("tight", 3)) for i in range(count)]
    pool, ledger = cluster(nodes, [busy("used0", 8), busy("tight0", 4)])  # used: 24 free; tight: 20; whole: 32
    outcome = plan_group(ruled("g", 2, TopologyRule(required=ZONE)), pool, ledger)
    assert labels_of(pool, outcome, ZONE) == {"tight": 2}
    apply(outcome, ledger)
    outcome = plan_group(ruled("h", 3, TopologyRule(required=ZONE)), pool, ledger)
    assert labels_of(pool, outcome, ZONE) == {"used": 3}  # the untouched zone stays whole
    apply(outcome, ledger)
    assert labels_of(pool, plan_group(ruled("k", 4, TopologyRule(required=ZONE)), pool, ledger), ZONE) == {"whole": 4}


def test_members_reserved_before_a_restart_keep_the_rest_in_their_zone():
    nodes = zoned({"a": {"r1": 2}, "b": {"r2": 4}})
    pool, ledger = cluster(nodes)
    group = ruled("g", 3, TopologyRule(required=ZONE))
    first = replace(group.members[0], reserved_node="b-r2-3")
    group = replace(group, members=(first, *group.members[1:]))
    ledger.reserve(first.uid, "b-r2-3", first.requests)
    outcome = plan_group(group, pool, ledger)
    assert labels_of(pool, outcome, ZONE) == {"b": 2}


def test_required_zone_of_a_cpu_only_group():
    nodes = [node("a0", zone="a", gpus=None), node("b0", zone="b", gpus=None)]
    pool, ledger = cluster(nodes)
    outcome = plan_group(ruled("g", 3, TopologyRule(required=ZONE), gpus=0, cpu="20"), pool, ledger)
    assert len(set(placed_on(outcome).values())) == 1


# --- preferred and both ------------------------------------------------------------------------

def test_preferred_rack_packs_into_one_rack_when_one_fits():
    nodes = zoned({"a": {"r1": 2, "r2": 3, "r3": 4}})
    pool, ledger = cluster(nodes, [busy("a-r1-0", 2)])
    outcome = plan_group(ruled("g", 3, TopologyRule(preferred=RACK)), pool, ledger)
    assert labels_of(pool, outcome, RACK) == {"a-r2": 3} and outcome.domain == f"{RACK}=a-r2"


def test_preferred_rack_uses_as_few_racks_as_hold_the_group():
    nodes = zoned({"a": {"r1": 2, "r2": 2, "r3": 3, "r4": 2}})
    pool, ledger = cluster(nodes, [busy("a-r1-0", 8)])
    outcome = plan_group(ruled("g", 5, TopologyRule(preferred=RACK)), pool, ledger)
    assert sorted(labels_of(pool, outcome, RACK).values()) == [2, 3]  # r3 and one rack of two, not three racks
    assert outcome.domain is None


def test_preferred_rack_falls_back_to_anywhere_including_nodes_without_it():
    nodes = [node("r0", labels={RACK: "r"}), node("bare")]
    pool, ledger = cluster(nodes)
    assert len(placed_on(plan_group(ruled("g", 2, TopologyRule(preferred=RACK)), pool, ledger))) == 2


def test_required_zone_with_preferred_rack_honours_both():
    nodes = zoned({"a": {"r1": 2, "r2": 2}, "b": {"r3": 3, "r4": 1}})
    pool, ledger = cluster(nodes, [busy("b-r4-0", 8)])
    rule = TopologyRule(required=ZONE, preferred=RACK)
    three = plan_group(ruled("three", 3, rule), pool, ledger)
    assert labels_of(pool, three, RACK) == {"b-r3": 3} and three.domain == f"{RACK}=b-r3"
    apply(three, ledger)
    four = plan_group(ruled("four", 4, rule), pool, ledger)  # no rack holds 4: zone a, in its two racks
    assert labels_of(pool, four, ZONE) == {"a": 4} and four.domain == f"{ZONE}=a"


def test_required_zone_with_preferred_rack_keeps_a_rack_inside_its_zone():
    nodes = zoned({"a": {"r1": 1}, "b": {"r1": 1}}) + [node("c-0", zone="c")]
    nodes = [replace(n, labels={**n.labels, RACK: "shared"}) if n.name != "c-0" else n for n in nodes]
    pool, ledger = cluster(nodes)
    outcome = plan_group(ruled("g", 2, TopologyRule(required=ZONE, preferred=RACK)), pool, ledger)
    assert isinstance(outcome, NoFit)  # the rack straddles zones a and b: one zone never holds two


# --- slices ----------------------------------------------------------------------------------

def cliques(count, nodes_each=2, gpus=4, zone=None):
    return [node(f"{zone or 'c'}{c}-{i}", gpus=gpus, zone=zone, labels={CLIQUE: f"{zone or ''}clique-{c}"})
            for c in range(count) for i in range(nodes_each)]


def slice_cliques(pool, outcome, group, size):
    by_name = placed_on(outcome)
    ordered = sorted(group.members, key=lambda m: m.rank)
    return [{pool.nodes[by_name[m.name]].labels[CLIQUE] for m in ordered[i:i + size]}
            for i in range(0, len(ordered), size)]


def test_each_slice_of_four_ranks_sits_in_one_clique():
    nodes = cliques(6)  # 6 cliques of 2 × 4 GPUs: 4 members of 2 GPUs each
    pool, ledger = cluster(nodes, [busy("c0-0", 2), busy("c1-1", 2)])  # cliques 0 and 1 hold 3 members only
    group = ruled("g", 16, TopologyRule(slice_required=CLIQUE, slice_size=4), gpus=2)
    outcome = plan_group(group, pool, ledger)
    per_slice = slice_cliques(pool, outcome, group, 4)
    assert [len(c) for c in per_slice] == [1, 1, 1, 1]
    assert set().union(*per_slice) == {"clique-2", "clique-3", "clique-4", "clique-5"}


def test_without_slices_the_fragments_of_the_same_cliques_are_used():
    nodes = cliques(6)
    pool, ledger = cluster(nodes, [busy("c0-0", 2), busy("c1-1", 2)])
    group = ruled("g", 16, TopologyRule(), gpus=2)
    outcome = plan_group(group, pool, ledger)
    assert any(len(c) > 1 for c in slice_cliques(pool, outcome, group, 4))


def test_slices_follow_rank_not_name():
    nodes = cliques(3, nodes_each=1, gpus=8)  # 8 GPUs per clique: 2 members of 4
    pool, ledger = cluster(nodes)
    group = ruled("g", 6, TopologyRule(slice_required=CLIQUE, slice_size=2), gpus=4)
    ranks = {"g-0": (5,), "g-1": (0,), "g-2": (4,), "g-3": (1,), "g-4": (3,), "g-5": (2,)}
    group = replace(group, members=tuple(replace(m, rank=ranks[m.name]) for m in group.members))
    outcome = plan_group(group, pool, ledger)
    assert [len(c) for c in slice_cliques(pool, outcome, group, 2)] == [1, 1, 1]


def test_slices_share_a_clique_best_fit_when_it_holds_several():
    nodes = cliques(2, nodes_each=4, gpus=8)  # a clique holds 4 members of 8 GPUs, 2 slices of 2
    pool, ledger = cluster(nodes, [busy("c1-0", 8)])
    group = ruled("g", 4, TopologyRule(slice_required=CLIQUE, slice_size=2))
    outcome = plan_group(group, pool, ledger)
    assert labels_of(pool, outcome, CLIQUE) == {"clique-1": 2, "clique-0": 2}  # the partly used clique first
    assert [len(c) for c in slice_cliques(pool, outcome, group, 2)] == [1, 1]


def test_a_slice_no_clique_holds_is_explained():
    nodes = cliques(4)
    pool, ledger = cluster(nodes, [busy(f"c{c}-0", 2) for c in range(4)])  # each clique: room for 3 members
    group = ruled("g", 8, TopologyRule(slice_required=CLIQUE, slice_size=4), gpus=2)
    outcome = plan_group(group, pool, ledger)
    assert isinstance(outcome, NoFit)
    assert outcome.reason == (f"slice-required {CLIQUE}: needs 8 nvidia.com/gpu for each slice of 4 members "
                              "in one gpu.clique; clique-0: 6 free, clique-1: 6 free, clique-2: 6 free, clique-3: 6 free")


def test_slices_inside_the_required_zone():
    nodes = cliques(2, zone="a") + cliques(4, zone="b")
    pool, ledger = cluster(nodes, [busy("a0-0", 2)])
    group = ruled("g", 8, TopologyRule(required=ZONE, slice_required=CLIQUE, slice_size=4), gpus=2)
    outcome = plan_group(group, pool, ledger)  # zone a holds 7 members, not two slices of 4
    assert labels_of(pool, outcome, ZONE) == {"b": 8}
    assert [len(c) for c in slice_cliques(pool, outcome, group, 4)] == [1, 1]


def test_a_slice_partly_reserved_before_a_restart_stays_in_its_clique():
    nodes = cliques(3)
    pool, ledger = cluster(nodes)
    group = ruled("g", 4, TopologyRule(slice_required=CLIQUE, slice_size=4), gpus=2)
    first = replace(group.members[0], reserved_node="c2-1")
    ledger.reserve(first.uid, "c2-1", first.requests)
    outcome = plan_group(replace(group, members=(first, *group.members[1:])), pool, ledger)
    assert labels_of(pool, outcome, CLIQUE) == {"clique-2": 3}


# --- with the occupancy and in a pass ------------------------------------------------------------

def test_required_zone_with_anti_affinity_placed_one_by_one():
    nodes = [node(f"{z}{i}", zone=z, labels={HOSTNAME: f"{z}{i}"}) for z, n in (("a", 2), ("b", 3)) for i in range(n)]
    index = world(nodes)
    group = gang_of("g", 3, {"affinity": anti_affinity(HOSTNAME, {"job": "g"})}, gpus=2)
    group = replace(group, topology=TopologyRule(required=ZONE))
    outcome = plan(index, group)
    assert set(occupancy_placement(outcome)) == {"b0", "b1", "b2"}


def test_a_pass_admits_ruled_groups_one_after_another():
    nodes = zoned({"a": {"r1": 2}, "b": {"r2": 2}})
    pool, ledger = cluster(nodes)
    groups = [replace(ruled(f"g{i}", 2, TopologyRule(required=ZONE)), first_seen=float(i)) for i in range(3)]
    result = plan_pass(groups, pool, ledger, now=0.0)
    assert [len(set(n.split("-")[0] for n in p.nodes)) for _, p in result.admitted] == [1, 1]
    assert "needs 2 × 8 nvidia.com/gpu" in result.waiting[0].reason  # the cluster is full: its shortage says so


def test_a_rule_and_a_node_selector_both_hold():
    nodes = zoned({"a": {"r1": 2}, "b": {"r2": 2}})
    nodes = [replace(n, labels={**n.labels, "pool": "x" if n.name.startswith("b") else "y"}) for n in nodes]
    index = world(nodes)
    group = gang_of("g", 2, {"nodeSelector": {"pool": "x"}}, gpus=8)
    outcome = plan(index, replace(group, topology=TopologyRule(required=ZONE)))
    assert set(occupancy_placement(outcome)) == {"b-r2-0", "b-r2-1"}


def test_required_zone_for_members_claiming_devices():
    nodes = [node(name, gpus=None, zone=zone, labels={HOSTNAME: name}) for name, zone in
             (("dra-a1", "a"), ("dra-b1", "b"), ("dra-b2", "b"))]
    index = world(nodes, [device_class(), device_slice("dra-a1", 4), device_slice("dra-b1", 4),
                          device_slice("dra-b2", 2), template()])
    members = [member_from_api(claiming(f"p{i}")) for i in range(5)]
    group = replace(group_of(("team", "five"), members, 5, 0.0), topology=TopologyRule(required=ZONE))
    assert occupancy_placement(plan(index, group)) == {"dra-b1": 4, "dra-b2": 1}
    members = [member_from_api(claiming(f"q{i}")) for i in range(7)]
    outcome = plan(index, replace(group_of(("team", "seven"), members, 7, 0.0), topology=TopologyRule(required=ZONE)))
    assert isinstance(outcome, NoFit)  # 8 devices in all, 6 in zone b, 4 in zone a


def test_slices_of_members_kept_apart_are_placed_one_by_one_each_in_one_clique():
    nodes = [node(f"c{c}-{i}", labels={CLIQUE: f"clique-{c}", HOSTNAME: f"c{c}-{i}"}) for c in range(3) for i in range(3)]
    index = world(nodes, pods=[running("busy", "c0-0", gpus=2)])
    group = gang_of("g", 6, {"affinity": anti_affinity(HOSTNAME, {"job": "g"})}, gpus=2)
    ranked = tuple(replace(m, rank=(int(m.name.split("-")[1]),)) for m in group.members)
    group = replace(group, members=ranked, topology=TopologyRule(slice_required=CLIQUE, slice_size=3))
    outcome = plan(index, group)
    placed = occupancy_placement(outcome)
    assert len(placed) == 6 and set(placed.values()) == {1}  # apart: one member a node
    by_name = {m.name: n for m, n in outcome.assignments}
    for start in (0, 3):
        assert len({index.pool.nodes[by_name[f"g-{i}"]].labels[CLIQUE] for i in range(start, start + 3)}) == 1


def test_a_group_requiring_a_zone_preempts_inside_the_zone_it_would_hold():
    nodes = [node("a1", zone="a"), node("a2", zone="a"), node("b1", zone="b")]
    low = [member(f"low-{i}", gpus=8, gated=False, node_name=n, phase="Running", priority=10)
           for i, n in enumerate(("a1", "b1"))]
    pool, ledger = cluster(nodes, [(m.node, m) for m in low])
    urgent = replace(ruled("urgent", 2, TopologyRule(required=ZONE), priority=1000), priority=1000)
    outcome = preempt(urgent, holders([group_of(("team", "low"), low[:1], 1, 0.0)], low[1:], ledger), pool, ledger)
    assert outcome is not None and [v.name for v in outcome.victims] == ["team/low"]
    assert sorted(n for _, n in outcome.plan.assignments) == ["a1", "a2"]


# --- whatever the cluster: a plan keeps the rule, never over-commits, and is all or nothing -----------

RULES = st.builds(TopologyRule, st.sampled_from([None, ZONE, RACK]), st.sampled_from([None, ZONE, RACK]),
                  st.sampled_from([None, RACK, CLIQUE]), st.sampled_from([1, 2, 3]))
DOMAINS = st.lists(st.fixed_dictionaries({ZONE: st.sampled_from(["a", "b"]), RACK: st.sampled_from(["r1", "r2", "r3"]),
                                          CLIQUE: st.sampled_from(["c1", "c2", "c3", "c4"])}), min_size=12, max_size=12)
DROPPED = st.lists(st.sampled_from([ZONE, RACK, CLIQUE]), max_size=2)  # labels some nodes lack
PLAIN_NODES = st.lists(st.builds(lambda gpus, pods, ready: dict(labels={}, gpus=gpus, cpu="32", pods=pods, ready=ready),
                                 st.sampled_from([4, 8]), st.integers(1, 6), st.booleans() | st.just(True)),
                       min_size=2, max_size=12)
PLAIN_GROUP = st.lists(st.tuples(st.builds(lambda gpus: dict(gpus=gpus, cpu="1"), st.sampled_from([0, 1, 2, 4, 8])),
                                 st.integers(1, 6)), min_size=1, max_size=2)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(NODES | PLAIN_NODES, BUSY, GROUP | PLAIN_GROUP, RULES, DOMAINS, DROPPED)
def test_plans_keep_the_rule(node_specs, busy_specs, group_specs, rule, domains, dropped):
    node_specs = [{**spec, "labels": {**spec["labels"], **{k: v for k, v in domains[i].items()
                                                           if not (i % 3 == 0 and k in dropped)}}}
                  for i, spec in enumerate(node_specs)]
    pool, ledger, group = build(node_specs, busy_specs, group_specs)
    members = tuple(replace(m, rank=(len(group.members) - i,)) for i, m in enumerate(group.members))
    group = replace(group, members=members, topology=rule)
    before = {name: dict(ledger.free(name)) for name in pool.nodes}
    result = plan_group(group, pool, ledger)
    if isinstance(result, NoFit):
        assert 0 <= result.placeable < result.needed and result.reason
        return
    assert sorted(m.uid for m, _ in result.assignments) == sorted(m.uid for m in members)
    where = {m.uid: pool.nodes[n].labels for m, n in result.assignments}
    if rule.required:
        assert len({labels.get(rule.required) for labels in where.values()} | {None}) == 2, "one domain, labelled"
    if rule.slice_required:
        ordered = sorted(members, key=lambda m: (m.rank, m.name))
        for start in range(0, len(ordered), rule.slice_size):
            run = {where[m.uid].get(rule.slice_required) for m in ordered[start:start + rule.slice_size]}
            assert len(run) == 1 and None not in run, run
    taken: dict[str, Counter] = {}
    for placed, name in result.assignments:
        assert refusal(placed, pool.nodes[name], before[name]) is None
        taken.setdefault(name, Counter()).update(usage(placed.requests))
    for name, used in taken.items():
        assert all(amount <= before[name].get(resource, 0) for resource, amount in used.items()), name
